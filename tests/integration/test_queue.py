"""What a waiting user sees (arena queue, arena status, the batch page, GET /queue) on a real
Redis with batches submitted and no worker process consuming: a worker node registered one
slot, the first batch holds it, the others stay waiting in the order the scheduler would serve
them, so every place is exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from arena.service.queue import read_queue
from arena.web.app import create_app
from tasks.app import configure
from tasks.execute import execute_unit
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.submit import submit
from tasks.workloads import get_workload, validate_batch
from tests.integration.conftest import arena, bandit_spec


def batch_spec(name: str, priority: str, episodes: int) -> dict[str, Any]:
    """A bandit batch of 10 units an episode (5 agents × 2 items), a chunk of 10 each."""
    protocol = {"episodes": episodes, "seed": len(name), "unit_time_limit_s": 60}
    return bandit_spec(leaderboard=f"q-{name}", priority=priority, protocol=protocol)


@pytest.fixture
def queued(db: Store, redis_url: str) -> dict[str, str]:
    """A worker node registers one slot (as a worker does when it starts, tasks/units.py) and
    consumes nothing; a big bulk batch of team red is submitted first (it takes every chunk the
    pool gives out), then three that must wait: red's scheduled one, blue's interactive one and
    an interactive one of no team."""
    configure(ArenaSettings(redis_url=redis_url))  # this process submits
    assert db.register_slots("cpu", "still-worker", 1, ttl_s=600, headroom=0) == []
    shares = {
        "big": ("bulk", 8, "red", 3.0),
        "nightly": ("scheduled", 1, "red", 3.0),
        "check": ("interactive", 1, "blue", 1.0),
        "mine": ("interactive", 1, None, 1.0),
    }
    ids = {}
    for name, (priority, episodes, team, team_weight) in shares.items():
        batch = validate_batch(batch_spec(name, priority, episodes))
        ids[name] = submit(db, batch, team=team, team_weight=team_weight).batch_id
    return ids


def test_places_classes_and_eta_before_and_after_a_unit_ended(
    db: Store, queued: dict[str, str]
) -> None:
    (pool,) = read_queue(db).pools
    assert pool.pool == "cpu" and pool.slots == 1
    order = [(b.batch_id, b.priority, b.state, b.position) for b in pool.batches]
    # Interactive first (blue's before the one of no team: it came first), then scheduled,
    # then the bulk batch that runs: places count waiting batches only.
    assert order == [
        (queued["check"], "interactive", "waiting", 1),
        (queued["mine"], "interactive", "waiting", 2),
        (queued["nightly"], "scheduled", "waiting", 3),
        (queued["big"], "bulk", "running", None),
    ]
    big = pool.batches[-1]
    assert (big.team, big.team_weight, big.weight) == ("red", 3.0, 1.0)
    assert big.slots_held >= 1 and big.share == 1.0  # its chunks are all the pool has out
    assert [(b.completed, b.total) for b in pool.batches] == [(0, 10)] * 3 + [(0, 80)]
    assert all(b.eta_s is None and b.seconds_per_unit is None for b in pool.batches)

    # A worker ran one unit of the big batch: its ETA is the rest at that pace on its slots.
    batch = validate_batch(batch_spec("big", "bulk", 8))
    workload = get_workload("bandit")
    ran = execute_unit(workload, workload.expand(batch)[0]).result
    db.save_unit(queued["big"], ran)
    big = read_queue(db).pools[0].batches[-1]
    assert big.completed == 1 and big.seconds_per_unit == pytest.approx(ran.duration_s)
    assert big.eta_s == round(79 * ran.duration_s / 1, 1)  # the pool's one slot
    waiting = read_queue(db).pools[0].batches[:3]
    assert all(b.eta_s is None for b in waiting)  # no unit of theirs ended, and no slot


def test_the_cli_lists_the_queue_and_status_shows_a_place(
    db: Store, queued: dict[str, str], cluster_env: dict[str, str]
) -> None:
    listed = arena("queue", env=cluster_env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    text = listed.stdout
    assert "pool cpu: 1 worker slot, 1 running, 3 waiting" in text
    for expected in ("interactive", "scheduled", "bulk", "blue ×1", "red ×3", "waiting #1"):
        assert expected in text, text
    assert text.index("waiting #1") < text.index("waiting #2") < text.index("waiting #3")
    assert text.index("interactive") < text.index("scheduled") < text.index("bulk")

    as_json = arena("queue", "--json", env=cluster_env, timeout=60)
    assert as_json.returncode == 0, as_json.stderr
    pools = json.loads(as_json.stdout)["pools"]
    assert [(b["batch_id"], b["position"]) for b in pools[0]["batches"]] == [
        (queued["check"], 1),
        (queued["mine"], 2),
        (queued["nightly"], 3),
        (queued["big"], None),
    ]

    status = arena("status", queued["check"], env=cluster_env, timeout=60)
    assert status.returncode == 0, status.stderr
    assert "interactive · team blue (weight 1) · batch weight 1 · waiting, #1 in the cpu pool" in (
        status.stdout
    )
    assert "ends in unknown" in status.stdout
    detail = json.loads(arena("status", queued["big"], "--json", env=cluster_env).stdout)
    assert detail["priority"] == "bulk" and detail["team"] == "red"
    assert detail["queue"]["state"] == "running" and detail["queue"]["eta_s"] is None


def test_no_queue_says_so(cluster_env: dict[str, str]) -> None:
    listed = arena("queue", env=cluster_env, timeout=60)
    assert (listed.returncode, listed.stdout.strip()) == (0, "no batch is running or waiting")
    assert json.loads(arena("queue", "--json", env=cluster_env).stdout)["pools"] == []


def test_the_page_and_get_queue_show_the_same(
    db: Store, queued: dict[str, str], redis_url: str, tmp_path: Path
) -> None:
    settings = ArenaSettings(redis_url=redis_url, data_dir=tmp_path / "data")
    with TestClient(create_app(settings)) as client:
        page = client.get(f"/ui/batches/{queued['nightly']}")
        assert page.status_code == 200
        assert '<p class="queue"' in page.text
        assert "scheduled · team red (weight 3) · batch weight 1 · waiting, #3 in the cpu pool" in (
            page.text
        )
        assert 'http-equiv="refresh"' in page.text  # a waiting batch's page follows its place
        running = client.get(f"/ui/batches/{queued['big']}").text
        assert "bulk · team red (weight 3) · batch weight 1 · running, 100% of the cpu pool" in (
            running
        )
        answer = client.get("/queue")  # no token: a read, like GET /batches
        assert answer.status_code == 200
        batches = answer.json()["pools"][0]["batches"]
        assert [b["position"] for b in batches] == [1, 2, 3, None]
        assert batches == read_queue(db).model_dump(mode="json")["pools"][0]["batches"]
