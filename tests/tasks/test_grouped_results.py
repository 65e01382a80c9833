"""Results stored in groups (tasks/execute_chunk.py, issue 23): a chunk writes the results of
several units at once, and a worker killed before a group's write loses no result for good,
stores none twice, and blames exactly the unit that killed it. Each delivery of a chunk runs in
a process of its own that may SIGKILL itself, against a real Redis (append-only, fsync always).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
import redis

from arena.embedded import embedded_redis
from tasks import execute_chunk
from tasks.execute import UnitRun, error_result, unit_result
from tasks.execute_chunk import Record, run_in_groups
from tasks.refusal import refused_writes
from tasks.store import ChunkStart, GroupChange, Store
from tasks.workloads.base import Unit

pytestmark = pytest.mark.integration
BATCH, CHUNK = "b0", "chunk-0-b0:a:i:0"
MAX_ATTEMPTS = 2  # as ARENA_MAX_DELIVERIES


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    with embedded_redis(tmp_path / "redis") as url:
        yield url


@pytest.fixture
def db(url: str) -> Store:
    store = Store(redis.Redis.from_url(url, decode_responses=True))
    store.r.hset(store.k_batch(BATCH), mapping={"status": "running", "total": 10, "created_at": 1})
    return store


def units(n: int = 10) -> list[Unit]:
    return [
        Unit(
            id=f"{BATCH}:a:i:{i}",
            batch_id=BATCH,
            workload="bandit",
            agent="a",
            item="i",
            episode=i,
            env_seed=i,
            agent_seed=i,
            time_limit_s=10.0,
            payload={},
        )
        for i in range(n)
    ]


def ids(*episodes: int) -> list[str]:
    return [f"{BATCH}:a:i:{i}" for i in episodes]


Behaviour = Callable[[Unit, int, Record], None]  # before a unit's result: may kill the process


def deliver(
    url: str, tmp_path: Path, behaviour: Behaviour | None = None, size: int = 10
) -> list[str]:
    """One delivery of the chunk in a forked worker process: the units it ran, in order, with
    the attempts each was given ("id@n"; refused over MAX_ATTEMPTS, as tasks/units.py does)."""
    trail = tmp_path / "trail"
    trail.unlink(missing_ok=True)

    def run(unit: Unit, attempts: int, record: Record) -> UnitRun:
        with open(trail, "a") as out:
            out.write(f"{unit.id}@{attempts}\n")
        if attempts > MAX_ATTEMPTS:
            return UnitRun(error_result(unit, "worker lost", kind="infrastructure"), "")
        if behaviour is not None:
            behaviour(unit, attempts, record)
        done = unit_result(unit, status="ok", result={"episode": unit.episode})
        return UnitRun(done, f"log {unit.id}")

    def worker() -> None:
        db = Store(redis.Redis.from_url(url, decode_responses=True))
        run_in_groups(db, BATCH, CHUNK, units(size), 60.0, run, lambda unit, result: None)

    process = multiprocessing.get_context("fork").Process(target=worker)
    process.start()
    process.join(60)
    return trail.read_text().split() if trail.exists() else []


def killing(*episodes: int, times: int = 100) -> Behaviour:
    """SIGKILL the worker when it reaches one of `episodes`, `times` times in all."""
    kills = {e: 0 for e in episodes}

    def behave(unit: Unit, attempts: int, record: Record) -> None:
        if unit.episode in kills and kills[unit.episode] < times:
            os.kill(os.getpid(), signal.SIGKILL)

    return behave


def state(db: Store) -> tuple[set[str], dict[str, int], bool]:
    """(units with a result, attempts per unit, whether a group is still open)."""
    stored = db.result_unit_ids(BATCH)
    return stored, db.attempts(BATCH), bool(db.r.hlen(db.keys.groups(BATCH)))


def test_a_chunk_of_tiny_units_writes_its_results_once(db: Store, url: str, tmp_path: Path):
    db.r.config_resetstat()
    ran = deliver(url, tmp_path)
    assert ran == [f"{u}@1" for u in ids(*range(10))]
    stored, attempts, open_group = state(db)
    assert stored == set(ids(*range(10))) and attempts == dict.fromkeys(ids(*range(10)), 1)
    assert not open_group and db.logs(BATCH)[ids(3)[0]] == f"log {ids(3)[0]}"
    # Two writes: the registration (the first group's counts, one EVAL beside its beat, an
    # EVAL that stamps it with Redis's clock) and one MULTI storing the ten results (one EVAL
    # that fences them; the group closing and the chunk forgotten in it).
    calls = {k: v["calls"] for k, v in db.r.info("commandstats").items()}
    assert calls["cmdstat_exec"] == 1 and calls["cmdstat_eval"] == 3, calls
    assert deliver(url, tmp_path) == []  # delivered again: nothing runs, nothing is counted
    assert state(db)[1] == dict.fromkeys(ids(*range(10)), 1)


def test_a_unit_that_kills_its_worker_is_blamed_and_its_group_is_not(
    db: Store, url: str, tmp_path: Path
):
    """Units 0-3 finish, unit 4 kills the worker before the group's write: the four results
    die with it. They run again and are stored once; unit 4 is counted once per death and
    given up after MAX_ATTEMPTS; the units after it run once, blamed for nothing."""
    assert deliver(url, tmp_path, killing(4)) == [f"{u}@1" for u in ids(0, 1, 2, 3, 4)]
    stored, attempts, open_group = state(db)
    assert stored == set() and open_group  # the group's results were never written
    # The next delivery cannot tell which of 0-4 killed it: their counts are taken back and
    # they run one per group; unit 4 kills it alone, so the earlier crash is its too.
    assert deliver(url, tmp_path, killing(4)) == [f"{u}@1" for u in ids(0, 1, 2, 3, 4)]
    stored, attempts, _ = state(db)
    assert stored == set(ids(0, 1, 2, 3))
    assert deliver(url, tmp_path, killing(4)) == [f"{ids(4)[0]}@3"] + [
        f"{u}@1" for u in ids(5, 6, 7, 8, 9)
    ]
    stored, attempts, open_group = state(db)
    assert stored == set(ids(*range(10))) and not open_group
    assert attempts == {**dict.fromkeys(ids(*range(10)), 1), ids(4)[0]: 3}
    results = db.unit_results(BATCH)
    assert results[ids(4)[0]].error_kind == "infrastructure"
    assert all(results[u].status == "ok" for u in ids(0, 1, 2, 3, 5, 6, 7, 8, 9))
    assert db.r.smembers(db.k_infra(BATCH)) == set(ids(4))


def test_a_worker_killed_once_by_chance_blames_no_unit(db: Store, url: str, tmp_path: Path):
    """Killed once at unit 6 (not its doing): every unit runs again and lands once; no one is
    left owing the crash once its whole group ran."""
    deliver(url, tmp_path, killing(6, times=1))
    again = deliver(url, tmp_path, killing(6, times=0))
    assert again == [f"{u}@1" for u in ids(*range(10))]
    stored, attempts, open_group = state(db)
    assert stored == set(ids(*range(10))) and not open_group
    assert attempts == dict.fromkeys(ids(*range(10)), 1)


def test_a_unit_alone_in_its_group_is_blamed_at_once(
    db: Store, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Units slower than FLUSH_AFTER_S store their results one by one, as before groups: a
    unit that kills its worker is the only one of its group, so it is known at once."""
    monkeypatch.setattr(execute_chunk, "FLUSH_AFTER_S", 0.0)
    progress: list[int] = []

    def slow(unit: Unit, attempts: int, record: Record) -> None:
        progress.append(db.r.hlen(db.k_units(BATCH)))
        if unit.episode == 3:
            os.kill(os.getpid(), signal.SIGKILL)

    deliver(url, tmp_path, slow)
    stored, attempts, _ = state(db)
    assert stored == set(ids(0, 1, 2))  # each stored before the next one started
    # Unit 3 and the units after it in its group were counted; unit 3 was running.
    ran = deliver(url, tmp_path, killing(3))
    assert ran == [f"{ids(3)[0]}@2"]
    assert deliver(url, tmp_path, killing(3))[0] == f"{ids(3)[0]}@3"
    stored, attempts, open_group = state(db)
    assert stored == set(ids(*range(10))) and not open_group
    assert attempts == {**dict.fromkeys(ids(*range(10)), 1), ids(3)[0]: 3}


def test_a_unit_that_ignores_its_deadline_stores_the_group_before_its_process_ends(
    db: Store, url: str, tmp_path: Path
):
    """tasks/execute.py records the abandoned unit's error and ends the process: the results
    waiting in the group are stored with it, and the units after it owe nothing."""

    def abandon(unit: Unit, attempts: int, record: Record) -> None:
        if unit.episode == 5 and attempts == 1:
            record(UnitRun(error_result(unit, "time limit of 10s exceeded"), ""))
            os._exit(70)

    deliver(url, tmp_path, abandon)
    stored, attempts, open_group = state(db)
    assert stored == set(ids(0, 1, 2, 3, 4, 5)) and not open_group
    assert attempts == dict.fromkeys(ids(0, 1, 2, 3, 4, 5), 1)  # 6-9: counted, taken back
    assert deliver(url, tmp_path, abandon) == [f"{u}@1" for u in ids(6, 7, 8, 9)]
    assert db.unit_results(BATCH)[ids(5)[0]].reason == "time limit of 10s exceeded"


def test_what_an_earlier_run_of_the_batch_left_is_ignored(db: Store, url: str, tmp_path: Path):
    """A resubmission resets attempts (a new `created_at`): a group left open before it is
    not settled against the new counts."""
    deliver(url, tmp_path, killing(2))
    db.r.delete(db.k_attempts(BATCH))
    db.r.hset(db.k_batch(BATCH), "created_at", time.time())
    assert deliver(url, tmp_path) == [f"{u}@1" for u in ids(*range(10))]
    assert state(db)[1] == dict.fromkeys(ids(*range(10)), 1)


def test_a_cancelled_batch_stops_its_chunk_at_the_next_write(
    db: Store, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(execute_chunk, "FLUSH_AFTER_S", 0.0)

    def cancel(unit: Unit, attempts: int, record: Record) -> None:
        if unit.episode == 2:
            db.r.hset(db.k_batch(BATCH), "status", "cancelled")

    assert deliver(url, tmp_path, cancel) == [f"{u}@1" for u in ids(0, 1, 2)]
    stored, attempts, open_group = state(db)
    assert stored == set(ids(0, 1, 2)) and not open_group
    assert attempts == dict.fromkeys(ids(0, 1, 2), 1)  # the next unit's count taken back
    assert not db.r.hexists(db.keys.chunks(BATCH), CHUNK)  # the chunk forgot itself


def test_a_write_sent_again_changes_nothing(db: Store):
    """A write whose reply a Redis restart lost is sent again by the client's retry: the
    chunk's start and its next group count their attempts once, and no crash is found."""
    chunk = ids(*range(10))

    def start(write: str) -> ChunkStart:
        with db.r.pipeline(transaction=False) as pipe:
            db.read_chunk_start(pipe, BATCH, CHUNK, chunk, group=3, write=write)
            return ChunkStart.parse(pipe.execute()[0])

    first = start("t:0")
    assert start("t:0") == first and first.counts == [1, 1, 1] and first.debt == []
    done = [(unit_result(u, status="ok"), "") for u in units()[:3]]
    change = GroupChange(joining=ids(3, 4), leaving=[], group=ids(3, 4), debt=[], write="t:1")
    saved = [db.save_units(BATCH, done, (CHUNK, change)) for _ in range(2)]
    assert saved[0] == saved[1] and saved[0].counts == [1, 1]
    assert state(db)[1] == dict.fromkeys(ids(0, 1, 2, 3, 4), 1)
    assert db.r.scard(db.k_errors(BATCH)) == 0 and len(db.result_unit_ids(BATCH)) == 3


@pytest.mark.parametrize("write", ["start", "save"])
def test_a_refused_write_is_said_to_be_one(db: Store, write: str):
    """Redis out of memory refuses a chunk's writes with an error tasks/refusal.py knows, so
    the worker waits for it as for an outage (a script's own error, raised inside the script,
    would fail the chunk at once): each write leads with a plain write command."""
    db.r.set("ballast", "x" * 10_000)
    db.r.config_set("maxmemory", 1)
    try:
        with pytest.raises(redis.ResponseError) as refused:
            if write == "start":
                db.register_chunk(BATCH, CHUNK, {}, partial(start_read, db))
            else:
                change = GroupChange(joining=ids(1), leaving=[], group=ids(1), debt=[], write="w")
                db.save_units(BATCH, [(unit_result(units()[0], status="ok"), "")], (CHUNK, change))
    finally:
        db.r.config_set("maxmemory", 0)
    assert refused_writes(refused.value) is not None, refused.value
    assert state(db) == (set(), {}, False)  # nothing was written


def start_read(db: Store, pipe: object) -> None:
    db.read_chunk_start(pipe, BATCH, CHUNK, ids(*range(10)), group=10, write="w")


def test_a_one_unit_chunk_writes_as_before_groups(db: Store, url: str, tmp_path: Path):
    """A chunk of one unit (Mario, race) leaves no group behind: its count, taken before it
    runs, says all a crash needs; a unit that kills its worker is given up as before."""
    db.r.config_resetstat()
    assert deliver(url, tmp_path, killing(0), size=1) == [f"{ids(0)[0]}@1"]
    assert not db.r.exists(db.keys.groups(BATCH))
    assert deliver(url, tmp_path, killing(0), size=1) == [f"{ids(0)[0]}@2"]
    assert deliver(url, tmp_path, killing(0), size=1) == [f"{ids(0)[0]}@3"]  # given up
    stored, attempts, open_group = state(db)
    assert stored == set(ids(0)) and attempts == {ids(0)[0]: 3} and not open_group
    calls = {k: v["calls"] for k, v in db.r.info("commandstats").items()}
    assert calls["cmdstat_exec"] == 1  # the third delivery's one write stored its result


def test_a_late_duplicate_cannot_change_a_stored_result_or_an_ended_batch(db: Store):
    """A unit run twice (its message restored while its first worker still ran it) stores a
    second result. Before (c3f317a) it overwrote the first, also after the batch was `done`
    (the issue's probe: a stored result rewritten 14 s after the end). Now the first result
    stands; an infrastructure error gives way (a resubmission retries exactly those units);
    once the batch ended nothing lands (tasks/lua/store_results.lua)."""
    first, second, third = units(3)
    db.save_units(BATCH, [(unit_result(first, 1.0, status="ok"), "first run")])
    db.save_units(BATCH, [(error_result(first, "late duplicate"), "second run")])
    assert db.unit_results(BATCH)[first.id].duration_s == 1.0
    assert db.unit_log(BATCH, first.id) == "first run" and not db.r.scard(db.k_errors(BATCH))
    db.save_unit(BATCH, error_result(second, "unit lost", kind="infrastructure"))
    db.save_units(BATCH, [(unit_result(second, 2.0, status="ok"), "")])  # the retry lands
    assert db.unit_results(BATCH)[second.id].status == "ok"
    assert not db.r.scard(db.k_infra(BATCH)) and not db.r.scard(db.k_errors(BATCH))
    db.set_status(BATCH, "done")
    ended = db.r.hgetall(db.k_units(BATCH))
    reply = db.save_units(BATCH, [(unit_result(third, 3.0, status="ok"), "after the end")])
    assert db.r.hgetall(db.k_units(BATCH)) == ended and db.unit_log(BATCH, third.id) is None
    assert reply.status == "done"
