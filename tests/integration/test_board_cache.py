"""Store.leaderboard keeps a board's rows until a batch publishes to it (the board's version)."""

from __future__ import annotations

import time

import pytest

from tasks.provenance import finished_provenance, provenance_of
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import LeaderboardEntry, Reduction
from tests.integration.conftest import bandit_spec

pytestmark = pytest.mark.integration


def publish(db: Store, scores: dict[str, float], seed: int) -> None:
    batch = validate_batch(
        bandit_spec(leaderboard="cached", protocol={"episodes": 1, "seed": seed})
    )
    boards = get_workload("bandit").boards(batch)
    submitted = provenance_of(batch)
    db.start_batch(batch.normalised(), "bandit", boards, 1, batch.identity, submitted)
    finished, per_agent = finished_provenance(submitted, time.time(), [])
    entries = [LeaderboardEntry(agent=a, score=s, stats={"episodes": 1}) for a, s in scores.items()]
    db.finish_batch(
        batch.batch_id, Reduction(summary={}, entries=entries), boards, finished, per_agent
    )


def test_rows_are_read_again_once_a_batch_publishes(db: Store) -> None:
    publish(db, {"a": 0.5, "b": 0.25}, seed=1)
    reader = Store(db.r, db.p)
    assert [(r.agent, r.score) for r in reader.leaderboard("cached")] == [("a", 0.5), ("b", 0.25)]
    db.r.hset(f"{db.p}lb:cached:entry:a", "score", 0.1)  # behind the Store's back: not seen
    assert [r.score for r in reader.leaderboard("cached")] == [0.5, 0.25]  # kept: one GET
    assert [r.score for r in Store(db.r, db.p).leaderboard("cached")] == [0.1, 0.25]
    publish(db, {"b": 0.75}, seed=1)  # another Store writes: the reader sees it
    assert [(r.agent, r.score) for r in reader.leaderboard("cached")] == [("b", 0.75), ("a", 0.1)]
    db.r.delete(*db.r.keys(f"{db.p}lb:cached*"))  # the board deleted, then filled again
    publish(db, {"c": 1.0}, seed=1)
    assert [r.agent for r in reader.leaderboard("cached")] == ["c"]


def test_a_board_without_a_version_is_never_kept(db: Store) -> None:
    publish(db, {"a": 0.5}, seed=2)
    db.r.delete(f"{db.p}lb:cached:version")  # a board written before versions existed
    reader = Store(db.r, db.p)
    assert [r.score for r in reader.leaderboard("cached")] == [0.5]
    db.r.hset(f"{db.p}lb:cached:entry:a", "score", 0.9)
    assert [r.score for r in reader.leaderboard("cached")] == [0.9]


def test_the_top_rows_alone(db: Store) -> None:
    publish(db, {"a": 0.5, "b": 0.25, "c": 0.75}, seed=3)
    fresh = Store(db.r, db.p)
    assert [r.agent for r in fresh.leaderboard("cached", limit=2)] == ["c", "a"]  # read: 2 rows
    assert [r.agent for r in fresh.leaderboard("cached")] == ["c", "a", "b"]  # not kept at 2
    assert [r.agent for r in fresh.leaderboard("cached", limit=1)] == ["c"]  # kept: sliced
