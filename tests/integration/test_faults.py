"""The fault-injection suite (docs/reliability.md): real Redis, real worker processes, real
kills and outages. Each fault ends with every stored unit result and the leaderboard equal to
an undisturbed run's, or with the batch ended and the reason stated — within a stated time.

Run apart with `pytest -m faults`; CI runs it with everything else. Set ARENA_FAULT_FIGURES to a
file to collect the recovery times the docs quote.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import redis

from tasks.execute import execute_batch
from tasks.liveness import orphans
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tests.integration.conftest import (
    ARENA,
    ROOT,
    RestartableRedis,
    WorkerPools,
    arena,
    bandit_spec,
    broker_state,
    wait_finished,
)
from tests.integration.test_cluster import cluster_leaderboard, in_process_leaderboard, submit
from tests.workers.jails import NO_BWRAP

pytestmark = [pytest.mark.integration, pytest.mark.faults]

# Heartbeats fast enough that a lost worker is noticed within the test (defaults: 5 s / 30 s).
QUICK_LIVENESS = {"ARENA_HEARTBEAT_S": "0.5", "ARENA_LOST_WORKER_S": "4"}


def figure(name: str, seconds: float, outcome: str) -> None:
    """One row of docs/reliability.md's table, appended where ARENA_FAULT_FIGURES says."""
    target = os.environ.get("ARENA_FAULT_FIGURES")
    print(f"FAULT {name}: {outcome} in {seconds:.1f}s")
    if target:
        with open(target, "a") as out:
            out.write(
                json.dumps({"fault": name, "seconds": round(seconds, 1), "outcome": outcome}) + "\n"
            )


def slow_spec(**overrides: object) -> dict:
    """400 units of ~20-40 ms: long enough for faults to land mid-batch."""
    spec = bandit_spec(
        params={"pulls": 6000}, protocol={"episodes": 40, "seed": 8, "unit_time_limit_s": 30}
    )
    spec.update(overrides)
    return spec


def assert_equal_to_undisturbed(db: Store, batch_id: str, spec: dict, board: str = "it") -> None:
    results = db.unit_results(batch_id)
    expected = {u.id for u in get_workload("bandit").expand(validate_batch(spec))}
    assert set(results) == expected  # every unit stored, once (one hash field per unit id)
    assert [r.reason for r in results.values() if r.status != "ok"] == []
    assert cluster_leaderboard(db, board) == in_process_leaderboard(spec)
    for agent in in_process_leaderboard(spec):
        assert len(db.history(board, agent)) == 1  # one evaluation, one history point


def wait_stored(db: Store, batch_id: str, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while db.progress(batch_id)[0] < count:
        assert time.monotonic() < deadline, f"fewer than {count} units stored in {timeout}s"
        time.sleep(0.02)


def test_pool_processes_killed_in_a_loop(cluster_env, db, workers, write_spec):
    """Kills land anywhere, the reducer included: its claim lapses and the watchdog restarts it."""
    spec = slow_spec()
    # Random kills every 0.3 s can hit one chunk 3 times running on a slow machine, and then
    # ARENA_MAX_DELIVERIES (3) rightly gives its units up (tests/integration/test_cluster.py
    # checks that); here every unit must come through, so the limit is out of reach.
    env = {**cluster_env, **QUICK_LIVENESS, "ARENA_MAX_DELIVERIES": "12"}
    pool = workers.start(env, concurrency=2)
    batch_id = submit(cluster_env, write_spec, spec)
    started, kills, rng = time.monotonic(), 0, random.Random(1)
    wait_stored(db, batch_id, 20)
    while db.status(batch_id) == "running" and kills < 30:
        children = workers.children(pool)
        if children:
            os.kill(rng.choice(children), signal.SIGKILL)
            kills += 1
        time.sleep(0.3)
    assert wait_finished(db, batch_id, timeout=300) == "done"
    assert kills >= 10
    assert_equal_to_undisturbed(db, batch_id, spec)
    figure(
        "pool processes SIGKILLed in a loop",
        time.monotonic() - started,
        f"{kills} kills, identical results",
    )


def test_a_whole_worker_killed_and_a_fresh_one_started(cluster_env, db, workers, write_spec):
    env = {**cluster_env, **QUICK_LIVENESS}
    spec = slow_spec()
    doomed = workers.start(env, concurrency=2)
    batch_id = submit(cluster_env, write_spec, spec)
    wait_stored(db, batch_id, 120)
    workers.kill_group(doomed)  # main process and pool: nothing acknowledges its chunks
    killed = time.monotonic()
    workers.start(env, concurrency=2)
    assert wait_finished(db, batch_id, timeout=120) == "done"
    recovery = time.monotonic() - killed
    assert recovery < 60  # the heartbeat watchdog, not the 2-hour visibility timeout
    assert_equal_to_undisturbed(db, batch_id, spec)
    figure(
        "whole worker SIGKILLed, fresh one started",
        recovery,
        "identical results (visibility timeout left at 2 h)",
    )


def test_status_says_when_units_wait_for_a_lost_worker(cluster_env, db, workers, write_spec):
    env = {**cluster_env, **QUICK_LIVENESS}
    doomed = workers.start(env, concurrency=1)
    batch_id = submit(cluster_env, write_spec, slow_spec())
    # Killed in the middle of a chunk (10 units of 20-40 ms), which it then holds (delivered,
    # unacknowledged): a worker killed between two chunks holds nothing, and nothing waits on it.
    deadline = time.monotonic() + 60
    while not (db.progress(batch_id)[0] % 10 and orphans(db, 0.0, batch_id)):
        assert time.monotonic() < deadline, "the worker never held a chunk"
        time.sleep(0.002)
    workers.kill_group(doomed)
    time.sleep(5)
    shown = arena("status", batch_id, env=env)
    assert "held by a lost worker" in shown.stdout, shown.stdout
    workers.start(env, concurrency=2)
    assert wait_finished(db, batch_id, timeout=120) == "done"


def on_restartable(server: RestartableRedis, tmp_path: Path) -> tuple[dict[str, str], Store]:
    """The environment for `arena` and workers on `server`, and a Store on it."""
    env = {
        **os.environ,
        "ARENA_REDIS_URL": server.url,
        "PYTHONPATH": str(ROOT),
        "ARENA_DATA_DIR": str(tmp_path / "data"),
    }
    return env, Store(redis.Redis.from_url(server.url, decode_responses=True))


def test_redis_killed_and_restarted_mid_batch(
    restartable_redis: RestartableRedis, tmp_path: Path, workers: WorkerPools, write_spec
):
    env, db = on_restartable(restartable_redis, tmp_path)
    spec = slow_spec()
    workers.start(env, concurrency=2, restart=True)
    batch_id = submit(env, write_spec, spec)
    wait_stored(db, batch_id, 120)
    restartable_redis.kill()  # kill -9: no shutdown save, the append-only file is all there is
    time.sleep(3)
    restartable_redis.start()
    back = time.monotonic()
    db = Store(redis.Redis.from_url(restartable_redis.url, decode_responses=True))
    assert wait_finished(db, batch_id, timeout=180) == "done", workers.log_tail()
    assert_equal_to_undisturbed(db, batch_id, spec)
    # The worker says it in two lines of its own, not Celery's ERROR line every few seconds
    # and a deprecation block (issue 20, item 5).
    log = (tmp_path / "worker.log").read_text()
    assert "Cannot connect to" not in log and "CPendingDeprecationWarning" not in log, log
    assert log.count("lost Redis (") >= 1, log
    if workers.restarts == 0:
        assert log.count("lost Redis (") == log.count("Redis is back after") == 1, log
    else:
        # kombu's Redis transport can crash a consumer on its way to reconnect (restoring
        # unacked messages on a connection already closed: "'NoneType' object has no attribute
        # 'hostname'", seen once in ci on 07815af); its supervisor starts a new worker, which
        # never lost Redis. The batch is still whole, checked above.
        assert "Unrecoverable error" in log, log
    figure(
        "Redis kill -9, restarted 3 s later (AOF)",
        time.monotonic() - back,
        "identical results, no unit lost",
    )


def test_units_that_hang_end_at_their_time_limit(cluster_env, db, workers, write_spec):
    """In the worker's own process (no jail on this worker, agents trusted), where an agent can
    swallow the deadline's interrupts; a sandboxed one cannot (tests/workers/test_agent_sandbox)."""
    env = {**cluster_env, "ARENA_TRUST_AGENTS": "true", **NO_BWRAP}
    agents = [
        "ucb1",
        {"name": "sleeper", "entry_point": "tests.integration.agents:sleepy"},
        {"name": "stubborn", "entry_point": "tests.integration.agents:swallowing_sleeper"},
    ]
    spec = bandit_spec(agents=agents, protocol={"episodes": 2, "seed": 3, "unit_time_limit_s": 1})
    workers.start(env, concurrency=2)
    started = time.monotonic()
    batch_id = submit(cluster_env, write_spec, spec)
    assert wait_finished(db, batch_id, timeout=120) == "done"
    took = time.monotonic() - started
    results = db.unit_results(batch_id)
    assert len(results) == 12
    reasons = {r.agent: r.reason or "" for r in results.values() if r.status == "error"}
    assert set(reasons) == {"sleeper", "stubborn"}
    assert reasons["sleeper"] == "time limit of 1s exceeded"
    assert "ignored it" in reasons["stubborn"]
    assert all(r.error_kind == "agent" for r in results.values() if r.status == "error")
    assert took < 60
    figure(
        "units that hang (one swallows every interrupt)",
        took,
        "agent errors at the time limit, batch done",
    )


def test_a_unit_that_eats_memory_is_an_agent_error(cluster_env, db, workers, write_spec):
    env = {**cluster_env, "ARENA_UNIT_MEMORY_MB": "2048"}
    agents = ["ucb1", {"name": "glutton", "entry_point": "tests.integration.agents:memory_eater"}]
    spec = bandit_spec(agents=agents, protocol={"episodes": 2, "seed": 3})
    pool = workers.start(env, concurrency=1)
    started = time.monotonic()
    batch_id = submit(cluster_env, write_spec, spec)
    assert wait_finished(db, batch_id, timeout=120) == "done"
    results = db.unit_results(batch_id)
    eaten = [r for r in results.values() if r.agent == "glutton"]
    assert len(eaten) == 4 and all("MemoryError" in (r.reason or "") for r in eaten)
    assert {r.status for r in results.values() if r.agent == "ucb1"} == {"ok"}
    assert pool.poll() is None  # the worker lives on
    figure(
        "a unit that eats memory (8 GiB, limit 2 GiB)",
        time.monotonic() - started,
        "MemoryError as an agent error, worker alive",
    )


def test_the_same_chunk_delivered_twice_lands_once(cluster_env, db, workers, write_spec):
    spec = bandit_spec(protocol={"episodes": 10, "seed": 6})
    batch_id = submit(cluster_env, write_spec, spec)  # no worker yet: the messages wait
    queued = db.r.lrange("cpu", 0, -1)
    assert queued
    db.r.rpush("cpu", *queued)  # every chunk delivered twice, as a broker redelivery would
    started = time.monotonic()
    workers.start(cluster_env, concurrency=2)
    assert wait_finished(db, batch_id, timeout=120) == "done"
    time.sleep(2)  # let the duplicates run too
    assert_equal_to_undisturbed(db, batch_id, spec)
    figure(
        "every chunk delivered twice",
        time.monotonic() - started,
        "each unit stored once, one history point",
    )


def test_a_chunk_delivered_again_counts_no_attempt_for_its_stored_units(
    cluster_env, db, workers, write_spec
):
    """Issue 20, item 4: each delivery of a chunk counted an attempt of its first unit even
    when that unit already had a result (25 attempts against a limit of 3). One worker process,
    so no two deliveries run at once: every unit ran once and has one attempt."""
    spec = bandit_spec(protocol={"episodes": 4, "seed": 6})
    batch_id = submit(cluster_env, write_spec, spec)  # no worker yet: the messages wait
    queued = db.r.lrange("cpu", 0, -1)
    assert queued
    for _ in range(5):
        db.r.rpush("cpu", *queued)  # every chunk delivered six times
    workers.start(cluster_env, concurrency=1)
    assert wait_finished(db, batch_id, timeout=120) == "done"
    deadline = time.monotonic() + 60
    while db.r.llen("cpu") and time.monotonic() < deadline:  # the redeliveries, run too
        time.sleep(0.2)
    time.sleep(1)
    attempts = db.r.hgetall(db.k_attempts(batch_id))
    assert set(attempts) == set(db.unit_results(batch_id))
    assert set(attempts.values()) == {"1"}, attempts


def test_a_message_lost_in_delivery_is_sent_again(cluster_env, db, workers, write_spec):
    """Kombu's Redis transport takes a message off the queue (BRPOP) before it records it as
    delivered: a worker killed in between loses it. Here one message simply disappears."""
    spec = bandit_spec(protocol={"episodes": 10, "seed": 6})
    batch_id = submit(cluster_env, write_spec, spec)  # no worker yet: the messages wait
    assert db.r.rpop("cpu") is not None  # the next message to be delivered: gone
    started = time.monotonic()
    workers.start({**cluster_env, **QUICK_LIVENESS}, concurrency=2)
    assert wait_finished(db, batch_id, timeout=120) == "done"
    assert_equal_to_undisturbed(db, batch_id, spec)
    figure(
        "a chunk message lost in delivery",
        time.monotonic() - started,
        "its units, carried by no message, sent again; identical results",
    )


def test_a_client_that_loses_redis_while_waiting(
    restartable_redis: RestartableRedis, tmp_path: Path, workers: WorkerPools, write_spec
):
    env, db = on_restartable(restartable_redis, tmp_path)
    spec = slow_spec()
    workers.start(env, concurrency=2, restart=True)
    client = subprocess.Popen(
        [ARENA, "run", str(write_spec(spec)), "--json"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not db.batch_ids() or db.progress(db.batch_ids()[0])[0] < 60:
        assert time.monotonic() < deadline and client.poll() is None
        time.sleep(0.05)
    restartable_redis.kill()
    time.sleep(3)
    restartable_redis.start()
    back = time.monotonic()
    try:
        out, err = client.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        client.kill()
        pytest.fail(f"the batch did not end 180 s after Redis came back; {workers.log_tail()}")
    assert client.returncode == 0, err
    assert "lost Redis" in err and "Redis is back" in err and "Traceback" not in err
    assert json.loads(out)["counts"] == {"total": 400, "completed": 400, "errors": 0}
    figure("client loses Redis while waiting (3 s)", time.monotonic() - back, "reconnects, exit 0")


@contextmanager
def writes_refused(db: Store, why: str) -> Iterator[None]:
    """Redis refusing writes for the block: out of memory (`maxmemory` 1 byte, noeviction), or
    MISCONF (snapshots configured and the last one failed: its file's name is a directory)."""
    if why == "oom":
        db.r.config_set("maxmemory", 1)
        try:
            yield
        finally:
            db.r.config_set("maxmemory", 0)
        return
    blocker = Path(db.r.config_get("dir")["dir"]) / db.r.config_get("dbfilename")["dbfilename"]
    (blocker / "x").mkdir(parents=True)  # the snapshot's rename onto it fails
    db.r.config_set("save", "3600 1")
    try:
        _snapshot(db, "err")
        yield
    finally:
        (blocker / "x").rmdir()
        blocker.rmdir()
        _snapshot(db, "ok")
        db.r.config_set("save", "")


def _snapshot(db: Store, expected: str) -> None:
    db.r.bgsave()
    deadline = time.monotonic() + 30
    while db.r.info("persistence")["rdb_last_bgsave_status"] != expected:
        assert time.monotonic() < deadline, f"BGSAVE did not end {expected}"
        time.sleep(0.05)


@pytest.mark.parametrize("why", ["oom", "misconf"])
def test_redis_that_refuses_writes_mid_batch_loses_nothing(
    cluster_env, db, workers, write_spec, tmp_path: Path, why: str
):
    """Writes refused for 5 s at 60/400 units: every refused write waits and lands once Redis
    accepts writes again (results equal to an undisturbed run's); each worker process says so in
    one line when it starts and one when it ends, not kombu's traceback every second. Before
    (issue 20, item 5), the chunk failed on the refused write and the batch stalled for good."""
    spec = slow_spec()
    workers.start(cluster_env, concurrency=2, restart=True)
    batch_id = submit(cluster_env, write_spec, spec)
    wait_stored(db, batch_id, 60)
    with writes_refused(db, why):
        time.sleep(5)
    assert wait_finished(db, batch_id, timeout=120) == "done", workers.log_tail()
    assert_equal_to_undisturbed(db, batch_id, spec)
    log = (tmp_path / "worker.log").read_text()
    refused, accepted = log.count("Redis refuses writes ("), log.count("Redis accepts writes again")
    assert 1 <= refused == accepted, log
    assert ("maxmemory" if why == "oom" else "MISCONF") in log, log
    assert "maybe_refresh_binding_expiry" not in log, log  # kombu's traceback every second


def test_redis_that_refuses_writes_is_said_in_one_line(cluster_env, db, workers, write_spec):
    """Redis up but out of memory (maxmemory, noeviction): reads pass, writes (and the reads
    of a MULTI) are refused, so a batch stalls while reading as running (issue 20, item 5).
    `arena status` says why under the status line; `--watch` says it once, waits, and says
    when Redis accepts writes again."""
    batch_id = submit(cluster_env, write_spec, bandit_spec(protocol={"episodes": 4, "seed": 6}))
    watcher = subprocess.Popen(
        [ARENA, "status", batch_id, "--watch"],
        env=cluster_env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1)
    db.r.config_set("maxmemory", 1)
    try:
        shown = arena("status", batch_id, env=cluster_env)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
        status, *_, note = shown.stdout.strip().splitlines()  # between: its place in its pool
        assert status.startswith(f"batch {batch_id}: running"), shown.stdout
        assert note.startswith("Redis refuses writes (") and "maxmemory" in note, note
        time.sleep(3)
    finally:
        db.r.config_set("maxmemory", 0)
    workers.start(cluster_env, concurrency=2)
    _, err = watcher.communicate(timeout=120)
    assert watcher.returncode == 0 and "Traceback" not in err, err
    said = err.strip().splitlines()
    assert said[0].startswith("Redis refuses writes (") and "waiting for up to" in said[0], err
    assert said[1].startswith("Redis accepts writes again after"), err
    assert db.status(batch_id) == "done"


def test_a_batch_that_vanishes_ends_the_wait(cluster_env, db, write_spec):
    batch_id = submit(cluster_env, write_spec, slow_spec())  # no workers: it stays running
    watcher = subprocess.Popen(
        [ARENA, "status", batch_id, "--watch"],
        env=cluster_env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2)
    db.r.flushdb()
    _, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 1
    assert err.strip().splitlines()[-1] == (
        f"arena: batch {batch_id} vanished from Redis (its keys were deleted or flushed)"
    )


def embedded_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return {**env, "ARENA_DATA_DIR": str(data_dir), "ARENA_WORKERS": "2"}


@pytest.mark.parametrize("where", ["in-process", "cluster"])
def test_an_alympics_agent_that_hangs_ends_at_the_time_limit(tmp_path: Path, where: str):
    """Its match sets end at the unit's limit (the game loop's fault handling cannot swallow
    it); the others are played; the benchmark ends with status 1 and the reason."""
    flags = ["--cluster"] if where == "cluster" else []
    started = time.monotonic()
    result = arena(
        "game",
        "benchmark",
        "--agent",
        "tests.integration.agents:alympics_sleeper",
        "--episodes",
        "1",
        "--unit-time-limit",
        "1",
        *flags,
        env=embedded_env(tmp_path / "data"),
    )
    took = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert "2 of 13 units failed" in result.stderr  # the two Prisoner's Dilemma match sets
    assert "time limit of 1s exceeded" in result.stderr
    assert took < 40
    figure(
        f"an Alympics agent that hangs ({where})",
        took,
        "its match sets end at the 1 s limit, the rest played",
    )


class Silent(BaseHTTPRequestHandler):
    """An endpoint that accepts the connection and never answers."""

    def do_POST(self) -> None:
        time.sleep(3600)

    def log_message(self, *args: object) -> None:
        pass


def test_an_http_agent_that_never_answers_costs_seconds(tmp_path: Path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Silent)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/act"
    try:
        started = time.monotonic()
        result = arena(
            "game",
            "benchmark",
            "--agent",
            url,
            "--episodes",
            "1",
            "--move-timeout",
            "0.2",
            env=embedded_env(tmp_path / "data"),
        )
        took = time.monotonic() - started
    finally:
        httpd.shutdown()
    assert result.returncode == 1
    assert "13 of 13 units failed" in result.stderr and "no answer within 0.2s" in result.stderr
    assert "scored 0/100" in result.stdout
    assert took < 40
    figure(
        "an HTTP agent that never answers (0.2 s per move)",
        took,
        "every match set forfeit, benchmark ends",
    )


PUBLISH_BROKEN_CHUNK = """
import json, sys
from tasks.units import chunk_signature
from tasks.workloads import get_workload, validate_batch
batch_id, spec = sys.argv[1], json.loads(sys.argv[2])
unit = get_workload("bandit").expand(validate_batch(spec))[0]
broken = chunk_signature(batch_id, "broken", [unit])  # its options: the error callback
broken.args = (batch_id, "broken", [{"not": "a unit"}])  # run_chunk raises on this
broken.apply_async()
"""


def test_a_chunk_task_that_fails_outright_starts_the_reducer(
    cluster_env, db, workers, write_spec, tmp_path: Path
):
    """No chord waits on the chunks: a chunk task that fails as a whole (Celery's hard time
    limit does this) starts the reducer through its error callback."""
    spec = bandit_spec(protocol={"episodes": 2, "seed": 8})
    batch_id = submit(cluster_env, write_spec, spec)  # no worker yet: the messages wait
    db.r.delete("cpu")  # the batch's own chunk messages: gone
    # Sent from a process of its own: configuring this one's Celery app would outlive the test.
    subprocess.run(
        [sys.executable, "-c", PUBLISH_BROKEN_CHUNK, batch_id, json.dumps(spec)],
        env=cluster_env,
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    workers.start(cluster_env, concurrency=1)
    log, deadline = tmp_path / "worker.log", time.monotonic() + 60
    while f"batch {batch_id}: chunk task" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)
    assert "reducing with error results" in log.read_text()
    assert db.status(batch_id) == "running"  # the reducer waits for units no chunk will store


# -- several batches of two teams interleaved (issue 32): the pool's window under faults --------

SUBMIT_AS_TEAM = """
import json, sys
from tasks.app import configure, store
from tasks.settings import ArenaSettings
from tasks.submit import submit
from tasks.workloads import validate_batch
spec, team, weight = json.loads(sys.argv[1])
configure(ArenaSettings())
batch = validate_batch(spec, asker="operator")
print(submit(store(), batch, team=team, team_weight=weight, visibility_timeout_s=7200).batch_id)
"""
# (board, team, team weight, class, units): two teams, three classes, submitted in this order.
SHARED = (
    ("alpha-bulk", "alpha", 3.0, "bulk", 160),
    ("beta-bulk", "beta", 1.0, "bulk", 120),
    ("beta-nightly", "beta", 1.0, "scheduled", 80),
    ("alpha-check", "alpha", 3.0, "interactive", 40),
)


def shared_spec(board: str, priority: str, units: int) -> dict:
    """`units` units of ~20-40 ms, each batch its own seeds and board."""
    return slow_spec(
        leaderboard=board,
        agents=["greedy", "ucb1", "thompson", "epsilon-greedy"],
        items=[{"name": "easy", "arms": [0.2, 0.5, 0.8]}],
        protocol={"episodes": units // 4, "seed": len(board), "unit_time_limit_s": 30},
        priority=priority,
    )


@cache
def undisturbed(spec_json: str) -> dict[str, tuple[str, str]]:
    """Unit id -> (status, result) of the batch run in this process, no Celery."""
    results = execute_batch(validate_batch(json.loads(spec_json)))
    return {r.unit_id: (r.status, json.dumps(r.result, sort_keys=True)) for r in results}


def submit_shared(env: dict[str, str], db: Store, gap_units: int) -> list[tuple[str, dict]]:
    """The SHARED batches, each submitted once the one before has `gap_units` units stored."""
    submitted: list[tuple[str, dict]] = []
    for board, team, weight, priority, units in SHARED:
        if submitted:
            try:
                wait_stored(db, submitted[-1][0], gap_units)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{pool_state(db, submitted)}") from None
        spec = shared_spec(board, priority, units)
        out = subprocess.run(
            [sys.executable, "-c", SUBMIT_AS_TEAM, json.dumps([spec, team, weight])],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        submitted.append((out.stdout.strip(), spec))
    return submitted


def pool_state(db: Store, submitted: list[tuple[str, dict]]) -> str:
    """What a stuck pool looks like (printed when a test times out)."""
    lines = [f"slots={db.pool_slots('cpu')} entries={db.pool_batches('cpu')}"]
    for batch_id, _ in submitted:
        lines.append(f"{batch_id} {db.status(batch_id)} out={db.out_chunks(batch_id)}")
        lines.append(broker_state(db, batch_id))
    return "\n".join(lines)


def assert_each_equal_to_undisturbed(
    db: Store, submitted: list[tuple[str, dict]], workers_lost: int, timeout: float = 240
) -> None:
    """Every batch done, its units equal to an undisturbed run's unit by unit, its leaderboard
    too; one attempt at each unit, plus at most one for each worker process that died under
    it (the unit it was running: tasks/execute_chunk.py)."""
    extra = 0
    for (batch_id, spec), (board, team, _, priority, _) in zip(submitted, SHARED, strict=True):
        assert wait_finished(db, batch_id, timeout=timeout) == "done", db.batch(batch_id)
        results = db.unit_results(batch_id)
        stored = {u: (r.status, json.dumps(r.result, sort_keys=True)) for u, r in results.items()}
        assert stored == undisturbed(json.dumps(spec)), board
        assert cluster_leaderboard(db, board) == in_process_leaderboard(spec)
        info = db.batch(batch_id)
        assert info is not None and (info.team, info.priority) == (team, priority)
        attempts = db.attempts(batch_id)
        assert set(attempts) == set(results) and min(attempts.values()) >= 1, board
        extra += sum(attempts.values()) - len(attempts)
    assert extra <= workers_lost, extra
    assert all(db.pool_of(b) is None for b, _ in submitted)  # each left its pool


def test_shared_batches_with_pool_processes_killed_mid_chunk(cluster_env, db, workers):
    env = {**cluster_env, **QUICK_LIVENESS}
    pool = workers.start(env, concurrency=2)
    done, kills = threading.Event(), []

    def killer() -> None:  # a pool process every second while the batches come and run
        rng = random.Random(3)
        while not done.wait(1.0) and len(kills) < 4:
            children = workers.children(pool)
            if children:
                os.kill(rng.choice(children), signal.SIGKILL)
                kills.append(time.monotonic())

    deadline = time.monotonic() + 60
    while db.pool_slots("cpu") < 2:  # the worker is ready (a kill while it starts ends it)
        assert time.monotonic() < deadline, workers.log_tail()
        time.sleep(0.1)
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        submitted = submit_shared(env, db, gap_units=20)
        for batch_id, _ in submitted:
            wait_finished(db, batch_id, timeout=240)
    finally:
        done.set()
        thread.join(5)
    assert len(kills) >= 2
    assert_each_equal_to_undisturbed(db, submitted, workers_lost=len(kills))


def test_shared_batches_through_a_redis_kill_and_restart(
    restartable_redis: RestartableRedis, tmp_path: Path, workers: WorkerPools
):
    env, db = on_restartable(restartable_redis, tmp_path)
    env = {**env, **QUICK_LIVENESS}
    workers.start(env, concurrency=2, restart=True)
    submitted = submit_shared(env, db, gap_units=20)
    wait_stored(db, submitted[-1][0], 10)
    restartable_redis.kill()  # no shutdown save: the append-only file (fsync always) is all
    time.sleep(3)
    restartable_redis.start()
    db = Store(redis.Redis.from_url(restartable_redis.url, decode_responses=True))
    # A worker's supervisor may start a new one (test_redis_killed_and_restarted_mid_batch):
    # its two processes' units are then given out again.
    assert_each_equal_to_undisturbed(db, submitted, workers_lost=2 * workers.restarts)


def test_shared_batches_while_the_only_worker_is_gone_for_a_minute(cluster_env, db, workers):
    env = {**cluster_env, **QUICK_LIVENESS}
    doomed = workers.start(env, concurrency=2)
    submitted = submit_shared(env, db, gap_units=20)
    wait_stored(db, submitted[-1][0], 10)
    workers.kill_group(doomed)  # main process and pool: its slots lapse, its chunks stay out
    running = [b for b, _ in submitted if db.status(b) == "running"]
    assert len(running) >= 2
    time.sleep(60)
    assert [db.status(b) for b in running] == ["running"] * len(running)
    assert db.pool_slots("cpu") == 0
    workers.start(env, concurrency=2)
    assert_each_equal_to_undisturbed(db, submitted, workers_lost=2)
