"""The pool's scheduler (tasks/lua/, tasks/store_sharing.py) on a real Redis: which chunk the
next free slot gets, by class, then team weight, then batch weight; the capacity the pool's
registered workers give it; a batch that ends gives out nothing more. No worker runs here: a
chunk's end is told to the Store as a worker tells it (tasks/units.py end_chunk)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from arena.embedded import embedded_redis
from tasks.fair_share import Share, priority_of
from tasks.store import Store
from tasks.store_sharing import Chunk
from tasks.validation import InputError

pytestmark = pytest.mark.integration
Q = "cpu"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    with embedded_redis(tmp_path / "redis") as url:
        yield Store(redis.Redis.from_url(url, decode_responses=True))


def chunks(batch_id: str, count: int, units: int = 1) -> list[Chunk]:
    return [
        (f"chunk-{i}", [{"batch_id": batch_id, "id": f"{batch_id}:{i}:{j}"} for j in range(units)])
        for i in range(count)
    ]


def join(db: Store, batch_id: str, share: Share, count: int = 100) -> list[Chunk]:
    db.r.hset(db.k_batch(batch_id), mapping={"status": "running"})
    return db.join_pool(Q, batch_id, share, chunks(batch_id, count), headroom=0)


def batch_of(chunk: Chunk) -> str:
    return str(chunk[1][0]["batch_id"])


def run_one_at_a_time(db: Store, first: list[Chunk], steps: int, took_s: float = 1.0) -> list[str]:
    """One slot: end the chunk out after `took_s`, note which batch the next one is of."""
    order, out = [], list(first)
    for _ in range(steps):
        assert len(out) == 1, out
        ((chunk_id, units),) = out
        _, out = db.end_chunk(Q, batch_of(out[0]), chunk_id, took_s, len(units), headroom=0)
        order += [batch_of(c) for c in out]
    return order


def test_the_higher_class_takes_the_next_free_slot(db: Store):
    db.register_slots(Q, "node-1", 1, ttl_s=60, headroom=0)
    first = join(db, "nightly", Share("bulk", None, 1.0, 1.0))
    assert [batch_of(c) for c in first] == ["nightly"]
    assert join(db, "person", Share("interactive", None, 1.0, 1.0), count=3) == []  # no slot free
    join(db, "cron", Share("scheduled", None, 1.0, 1.0), count=3)
    order = run_one_at_a_time(db, first, 8)
    assert order == ["person"] * 3 + ["cron"] * 3 + ["nightly"] * 2  # nothing running was killed
    shown = [(e.batch_id, e.priority, e.waiting_chunks) for e in db.pool_batches(Q)]
    assert shown == [("nightly", "bulk", 97)]  # the others have nothing waiting or out


def test_weights_share_across_teams_then_across_a_teams_batches(db: Store):
    db.register_slots(Q, "node-1", 1, ttl_s=60, headroom=0)
    first = join(db, "a1", Share("bulk", "alpha", 3.0, 1.0), count=400)
    join(db, "a2", Share("bulk", "alpha", 3.0, 1.0), count=400)
    join(db, "b1", Share("bulk", "beta", 1.0, 1.0), count=400)
    ran = Counter(run_one_at_a_time(db, first, 400))
    assert 290 <= ran["a1"] + ran["a2"] <= 310 and 90 <= ran["b1"] <= 110, ran
    assert abs(ran["a1"] - ran["a2"]) <= 4, ran
    entries = {e.batch_id: e for e in db.pool_batches(Q)}
    assert entries["a1"].team == "alpha" and entries["a1"].team_weight == 3.0
    assert entries["b1"].team is None or entries["b1"].team == "beta"


def test_a_spec_s_weight_cannot_take_another_team_s_share(db: Store):
    """A hostile spec asks for the largest batch weight (1000): it only orders its own team's
    batches. Across teams the operator's team weights decide (equal here): half each."""
    db.register_slots(Q, "node-1", 1, ttl_s=60, headroom=0)
    first = join(db, "greedy", Share("bulk", "alpha", 1.0, 1000.0), count=300)
    join(db, "modest", Share("bulk", "beta", 1.0, 1.0), count=300)
    ran = Counter(run_one_at_a_time(db, first, 200))
    assert 95 <= ran["greedy"] <= 105 and 95 <= ran["modest"] <= 105, ran


def test_shares_are_of_seconds_not_of_chunks(db: Store):
    """A batch whose chunks take 4x as long gets a quarter of the chunks: equal time."""
    db.register_slots(Q, "node-1", 1, ttl_s=60, headroom=0)
    first = join(db, "slow", Share("bulk", None, 1.0, 1.0), count=300)
    join(db, "fast", Share("bulk", None, 1.0, 1.0), count=300)
    order, out = [], list(first)
    for _ in range(250):
        ((chunk_id, units),) = out
        batch = batch_of(out[0])
        took = 4.0 if batch == "slow" else 1.0
        _, out = db.end_chunk(Q, batch, chunk_id, took, len(units), headroom=0)
        order.append(batch_of(out[0]))
    ran = Counter(order)
    assert 180 <= ran["fast"] <= 220 and 45 <= ran["slow"] <= 55, ran


def test_a_newcomer_starts_at_the_lowest_pass_without_banked_credit(db: Store):
    db.register_slots(Q, "node-1", 1, ttl_s=60, headroom=0)
    first = join(db, "early", Share("bulk", "alpha", 1.0, 1.0), count=300)
    out = run_one_at_a_time(db, first, 100)  # alone: 100 chunks in a row
    assert set(out) == {"early"}
    join(db, "late", Share("bulk", "beta", 1.0, 1.0), count=300)  # a new team, and batch
    join(db, "late2", Share("bulk", "alpha", 1.0, 1.0), count=300)  # a new batch of alpha
    last = db.out_chunks("early")
    assert len(last) == 1
    _, nxt = db.end_chunk(Q, "early", last[0].chunk_id, 1.0, 1, headroom=0)
    ran = Counter(run_one_at_a_time(db, nxt, 40))
    # beta (one batch) half the time; alpha's half split between its two batches
    assert 18 <= ran["late"] <= 22 and 8 <= ran["late2"] <= 12 and 8 <= ran["early"] <= 12, ran


def test_a_newcomer_is_not_held_back_by_estimates_of_chunks_in_flight(db: Store):
    """Before any chunk ended, a batch is charged 1 s a unit per chunk it was given: a newcomer
    joining at that inflated pass waited until the first batch had run that many real seconds
    (bench/fair_share.py: two equal batches of tiny units ran one after the other). It joins at
    what the ended chunks really cost, so the next free slots alternate."""
    db.register_slots(Q, "node-1", 3, ttl_s=60, headroom=0)
    db.r.hset(db.k_batch("early"), mapping={"status": "running"})
    out = db.join_pool(Q, "early", Share("bulk", None, 1.0, 1.0), chunks("early", 100, 10), 0)
    assert len(out) == 3  # charged 3 x 10 s of estimates; each really takes 0.1 s
    db.r.hset(db.k_batch("late"), mapping={"status": "running"})
    assert db.join_pool(Q, "late", Share("bulk", None, 1.0, 1.0), chunks("late", 100, 10), 0) == []
    order = []
    for _ in range(12):
        chunk_id, units = out.pop(0)
        _, given = db.end_chunk(Q, batch_of((chunk_id, units)), chunk_id, 0.1, len(units), 0)
        out += given
        order += [batch_of(c) for c in given]
    assert order[0] == "late", order
    assert 4 <= Counter(order)["late"] <= 8, order


def test_capacity_is_the_registered_slots_until_they_lapse(db: Store):
    assert db.pool_slots(Q) == 0
    db.register_slots(Q, "node-1", 2, ttl_s=1.5, headroom=0)
    db.register_slots(Q, "node-2", 3, ttl_s=60, headroom=0)
    assert db.pool_slots(Q) == 5
    released = join(db, "big", Share("bulk", None, 1.0, 1.0))
    assert len(released) == 5
    assert db.pool_of("big") == Q and db.pool_of("nothing") is None
    db.register_slots(Q, "node-2", 0, ttl_s=60, headroom=0)  # node-2 shuts down
    time.sleep(1.6)  # node-1 stops renewing (its registration lapses on Redis's clock)
    assert db.pool_slots(Q) == 0
    for chunk_id, _ in released[:4]:
        _, more = db.end_chunk(Q, "big", chunk_id, 0.1, 1, headroom=0)
        assert more == []  # one still out: the minimum capacity of 1 is taken
    _, more = db.end_chunk(Q, "big", released[4][0], 0.1, 1, headroom=0)
    assert len(more) == 1
    assert len(db.register_slots(Q, "node-3", 2, ttl_s=60, headroom=1)) == 2  # 2 + headroom 1


def test_a_cancelled_batch_gives_out_nothing_more(db: Store):
    db.register_slots(Q, "node-1", 2, ttl_s=60, headroom=0)
    first = join(db, "doomed", Share("interactive", None, 1.0, 1.0))
    join(db, "other", Share("bulk", None, 1.0, 1.0))
    assert [batch_of(c) for c in first] == ["doomed", "doomed"]
    db.set_status("doomed", "cancelled", "cancelled by user")
    _, more = db.end_chunk(Q, "doomed", first[0][0], 0.5, 1, headroom=0)
    # It left the pool with its window: its other chunk, still out, skips its units (the
    # batch is cancelled) and its place goes to the next batch's at once.
    assert [batch_of(c) for c in more] == ["other", "other"]
    assert db.waiting_chunk_ids("doomed") == set() and db.out_chunks("doomed") == []
    assert [e.batch_id for e in db.pool_batches(Q)] == ["other"]
    db.forget_pools()
    assert db.pool_batches(Q) == [] and db.pool_slots(Q) == 0
    assert not db.r.keys("arena:pool:*")


def test_the_queue_depth_counts_the_chunks_a_pool_holds_back(db: Store):
    """The broker's list holds a window only: what an autoscaler (KEDA reads one list's
    length) and arena_queue_depth see of the rest is the pool's backlog list."""
    db.register_slots(Q, "node-1", 2, ttl_s=60, headroom=0)
    first = join(db, "big", Share("bulk", None, 1.0, 1.0), count=100)
    join(db, "small", Share("scheduled", None, 1.0, 1.0), count=5)
    assert len(first) == 2  # given to the broker (not published here: the test is the worker)
    assert db.queue_lengths([Q]) == {Q: 98 + 5}
    assert db.r.llen(db.keys.pool_backlog(Q)) == 103
    _, given = db.end_chunk(Q, "big", first[0][0], 0.5, 1, headroom=0)
    assert [batch_of(c) for c in given] == ["small"] and db.queue_lengths([Q]) == {Q: 102}
    db.set_status("big", "cancelled", "cancelled by user")
    db.release_pool(Q, headroom=0)
    # The cancelled batch's chunks wait for nobody, and its place went to the small one's next.
    assert db.queue_lengths([Q]) == {Q: 3}


def test_a_chunk_ending_twice_frees_one_place(db: Store):
    """A second delivery's end finds the chunk out no more: the window never grows."""
    db.register_slots(Q, "node-1", 2, ttl_s=60, headroom=0)
    first = join(db, "b", Share("bulk", None, 1.0, 1.0))
    _, more = db.end_chunk(Q, "b", first[0][0], 0.5, 1, headroom=0)
    assert len(more) == 1
    _, again = db.end_chunk(Q, "b", first[0][0], 0.5, 1, headroom=0)
    assert again == [] and len(db.out_chunks("b")) == 2


def test_an_interactive_batch_too_big_is_refused_or_runs_as_scheduled():
    assert priority_of(None, "interactive", 1000, 1000) == "interactive"
    assert priority_of(None, "interactive", 1001, 1000) == "scheduled"
    assert priority_of("bulk", "interactive", 5000, 1000) == "bulk"
    with pytest.raises(InputError) as refused:
        priority_of("interactive", "scheduled", 1001, 1000)
    message = str(refused.value)
    assert message.startswith("priority:") and "1000" in message and "1001" in message
    assert "\n" not in message
