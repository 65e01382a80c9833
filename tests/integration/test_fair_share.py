"""Fair share on a real pool (docs/architecture.md, "Sharing"): two worker processes, real Redis,
the real CLI. Asserted on what ran and in what order, never on seconds (the machine is noisy)."""

from __future__ import annotations

import time

import pytest

from tasks import broker
from tasks.store import Store
from tests.integration.conftest import arena, bandit_spec, wait_finished
from tests.integration.test_cluster import submit

pytestmark = pytest.mark.integration


def quick_spec(units: int, seed: int, board: str) -> dict:
    """`units` greedy bandit episodes of ~15 ms (chunks of 10)."""
    return bandit_spec(
        leaderboard=board,
        agents=["greedy"],
        items=[{"name": "easy", "arms": [0.2, 0.5, 0.8]}],
        protocol={"episodes": units, "seed": seed, "unit_time_limit_s": 60},
        params={"pulls": 5000},
    )


def stored(db: Store, batch_id: str) -> int:
    return db.progress(batch_id)[0]


def test_a_small_interactive_batch_passes_a_big_bulk_one(cluster_env, db, workers, write_spec):
    workers.start(cluster_env, concurrency=2)
    big_spec = quick_spec(1000, 1, "big")
    big = submit(cluster_env, write_spec, big_spec, "--priority", "bulk")
    deadline = time.monotonic() + 120
    while stored(db, big) < 50:  # the big one runs on both processes
        assert time.monotonic() < deadline, "the big batch never started"
        time.sleep(0.02)
    assert len(db.pool_batches("cpu")) == 1 and db.pool_slots("cpu") == 2
    # Before: all 100 of its chunks were queued in the broker, the small one's behind them.
    in_broker = broker.queue_lengths(db.r, ["cpu"])["cpu"]
    assert in_broker <= 2  # the window: one chunk per process
    # What waits in the pool still counts for autoscaling and arena_queue_depth (its backlog).
    assert db.queue_lengths(["cpu"])["cpu"] >= in_broker + 40
    small = submit(cluster_env, write_spec, quick_spec(10, 2, "small"), "--priority", "interactive")
    assert wait_finished(db, small, timeout=120) == "done"
    left = 1000 - stored(db, big)
    assert db.status(big) == "running" and left >= 500, left  # long before the big one
    info = db.batch(small)
    assert info is not None and (info.priority, info.weight, info.team) == (
        "interactive",
        1.0,
        None,
    )
    assert wait_finished(db, big, timeout=300) == "done"
    assert db.batch(big).priority == "bulk"  # type: ignore[union-attr]
    assert db.pool_batches("cpu") == []  # both ended: they left the pool
    assert db.team_counts(None)["run"] == 1010  # every unit run, counted for the operator


def test_an_interactive_batch_over_the_limit_is_refused(cluster_env, db, write_spec):
    env = {**cluster_env, "ARENA_INTERACTIVE_MAX_UNITS": "100"}
    spec = write_spec(quick_spec(101, 3, "refused"))
    refused = arena("submit", str(spec), "--priority", "interactive", env=env)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "arena: error: priority: interactive batches have at most 100 units "
        "(ARENA_INTERACTIVE_MAX_UNITS); this one has 101: use scheduled or bulk"
    ]
    assert db.batch_ids() == []  # nothing stored
    accepted = arena("submit", str(spec), "--priority", "bulk", env=env)
    assert accepted.returncode == 0, accepted.stderr
    assert db.batch(accepted.stdout.strip()).priority == "bulk"  # type: ignore[union-attr]
