"""The cluster end to end: real Redis, real Celery worker processes, the real `arena` CLI."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from arena.embedded import stop
from tasks.execute import execute_batch
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tests.integration.conftest import ARENA, ROOT, arena, bandit_spec, wait_finished

pytestmark = pytest.mark.integration


def in_process_leaderboard(spec: dict) -> dict[str, dict]:
    """The same units run in this process, no Celery: what the cluster must reproduce."""
    batch = validate_batch(spec)
    workload = get_workload("bandit")
    results = execute_batch(batch)
    # Through JSON, as the cluster stores it (tuples become lists).
    return json.loads(
        json.dumps({e.agent: e.stats for e in workload.reduce(batch, results).entries})
    )


def cluster_leaderboard(db: Store, name: str) -> dict[str, dict]:
    return {row.agent: row.stats for row in db.leaderboard(name)}


def submit(env, write_spec, spec: dict, *flags: str) -> str:
    result = arena("submit", str(write_spec(spec)), *flags, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_batch_of_200_units_fills_the_leaderboard(cluster_env, db, workers, write_spec):
    spec = bandit_spec()
    workers.start(cluster_env, concurrency=2)
    batch_id = submit(cluster_env, write_spec, spec)
    assert wait_finished(db, batch_id) == "done"
    info = db.batch(batch_id)
    assert (info.total, info.completed, info.errors) == (200, 200, 0)
    expected = in_process_leaderboard(spec)
    assert cluster_leaderboard(db, "it") == expected
    ranking = [row.agent for row in db.leaderboard("it")]
    assert ranking[-1] == "random"  # every strategy that learns beats random pulls
    assert info.summary["ranking"] == sorted(expected, key=lambda a: -expected[a]["mean_reward"])
    # The CLI reads the same board.
    shown = arena("leaderboard", "it", "--json", env=cluster_env)
    assert [e["agent"] for e in json.loads(shown.stdout)["entries"]] == ranking


def test_sigkill_mid_batch_loses_nothing(cluster_env, db, workers, write_spec):
    # Slower units so the kills land mid-batch. The broker's visibility timeout stays at its
    # default (2 h): the chunks a whole killed worker held come back through the heartbeat
    # watchdog of the surviving worker, here after 4 s of silence.
    env = {**cluster_env, "ARENA_LOST_WORKER_S": "4", "ARENA_HEARTBEAT_S": "0.5"}
    spec = bandit_spec(
        params={"pulls": 6000}, protocol={"episodes": 20, "seed": 5, "unit_time_limit_s": 3}
    )
    doomed = workers.start(env, concurrency=2)
    survivor = workers.start(env, concurrency=1)
    batch_id = submit(cluster_env, write_spec, spec)
    while db.progress(batch_id)[0] < 30:
        time.sleep(0.05)
    # 1. SIGKILL the pool processes running units (the worker's parent requeues their chunks).
    for child in workers.children(doomed):
        os.kill(child, 9)
    while db.progress(batch_id)[0] < 90:
        time.sleep(0.05)
    # 2. SIGKILL a whole worker (main process and children) holding unacknowledged chunks.
    workers.kill_group(doomed)
    killed_at = time.monotonic()
    assert wait_finished(db, batch_id, timeout=300) == "done"
    assert time.monotonic() - killed_at < 60  # not the visibility timeout's 2 hours
    assert survivor.poll() is None
    results = db.unit_results(batch_id)
    expected_ids = {u.id for u in get_workload("bandit").expand(validate_batch(spec))}
    assert set(results) == expected_ids  # every unit stored, once (one hash field per unit id)
    assert all(r.status == "ok" for r in results.values()), [
        r.reason for r in results.values() if r.status != "ok"
    ]
    assert cluster_leaderboard(db, "it") == in_process_leaderboard(spec)


def test_resubmitting_a_finished_spec_enqueues_nothing(cluster_env, db, workers, write_spec):
    spec = bandit_spec(protocol={"episodes": 4, "seed": 1})
    workers.start(cluster_env, concurrency=1)
    batch_id = submit(cluster_env, write_spec, spec)
    assert wait_finished(db, batch_id) == "done"
    history_before = db.history("it", "ucb1")
    again = arena("submit", str(write_spec(spec)), env=cluster_env)
    assert again.stdout.strip() == batch_id
    assert "already-done: 0 units enqueued, 40 reused" in again.stderr
    assert db.r.llen("cpu") == 0
    assert db.history("it", "ucb1") == history_before
    # A partly stored batch runs only what is missing ...
    lost = sorted(db.stored_unit_ids(batch_id))[:7]
    db.r.hdel(db.k_units(batch_id), *lost)
    db.set_status(batch_id, "failed", "simulated loss")
    partial = arena("submit", str(write_spec(spec)), env=cluster_env)
    assert "enqueued: 7 units enqueued, 33 reused" in partial.stderr
    assert wait_finished(db, batch_id) == "done"
    assert len(db.history("it", "ucb1")) == len(history_before) + 1
    # ... and --fresh reruns everything, to the same values.
    before = cluster_leaderboard(db, "it")
    fresh = arena("submit", str(write_spec(spec)), "--fresh", env=cluster_env)
    assert "enqueued: 40 units enqueued, 0 reused" in fresh.stderr
    assert wait_finished(db, batch_id) == "done"
    assert cluster_leaderboard(db, "it") == before


def test_agent_faults_become_error_results(cluster_env, db, workers, write_spec):
    agents = [
        "ucb1",
        {"name": "crasher", "entry_point": "tests.integration.agents:crashing"},
        {"name": "sleeper", "entry_point": "tests.integration.agents:sleepy"},
        {"name": "quitter", "entry_point": "tests.integration.agents:exiting"},
        {"name": "cheater", "entry_point": "tests.integration.agents:bad_arm"},
        # A declared version is taken on trust at submission: the worker finds nothing to run.
        {
            "name": "missing",
            "entry_point": "tests.integration.no_such_module:agent",
            "version": "1",
        },
    ]
    spec = bandit_spec(agents=agents, protocol={"episodes": 2, "seed": 3, "unit_time_limit_s": 1})
    workers.start(cluster_env, concurrency=2)
    batch_id = submit(cluster_env, write_spec, spec)
    assert wait_finished(db, batch_id, timeout=120) == "done"
    results = db.unit_results(batch_id)
    reasons = {r.agent: r.reason for r in results.values() if r.status == "error"}
    assert "ucb1" not in reasons
    assert "agent bug at pull 10" in reasons["crasher"]
    assert "time limit of 1s exceeded" in reasons["sleeper"]
    assert "SystemExit" in reasons["quitter"]
    assert "arm 99" in reasons["cheater"]
    assert "ModuleNotFoundError" in reasons["missing"]
    board = cluster_leaderboard(db, "it")
    assert board["sleeper"]["errors"] == 4 and board["sleeper"]["mean_reward"] == 0
    assert db.leaderboard("it")[0].agent == "ucb1"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"colour": "blue"}, "colour"),  # unknown key
        ({"protocol": {"episodes": "ten"}}, "protocol.episodes"),  # wrong type
        ({"workload": "chess"}, "workload"),  # unknown workload
        ({"protocol": {"episodes": 0}}, "protocol.episodes"),
        ({"agents": ["random", "alphago"]}, "agents[1]"),
        ({"items": [{"name": "x", "arms": [0.5, 1.5]}]}, "items[0].arms[1]"),
        ({"params": {"pulls": -1}}, "params.pulls"),
        ({"agents": ["ucb1", "ucb1"]}, "duplicate"),
        ({"leaderboard": "has space"}, "leaderboard"),
        # An entry point the submitter cannot find is refused at submission, not at run time.
        (
            {"agents": [{"name": "m", "entry_point": "tests.integration.no_such_module:agent"}]},
            "agents[0].entry_point: cannot find module 'tests.integration.no_such_module'",
        ),
    ],
)
def test_invalid_spec_is_refused_before_anything_is_enqueued(
    cluster_env, db, write_spec, change, field
):
    path = write_spec(bandit_spec(**change))
    for command in ("submit", "run"):
        result = arena(command, str(path), env=cluster_env)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("arena: error: ") and field in lines[0]
        assert "Traceback" not in result.stderr
    assert db.r.dbsize() == 0  # nothing stored, nothing queued


def test_a_board_keeps_one_protocol(cluster_env, db, workers, write_spec):
    workers.start(cluster_env, concurrency=1)
    # `arena run` with ARENA_REDIS_URL set: submits to the cluster, waits, prints the board.
    ran = arena(
        "run", str(write_spec(bandit_spec(protocol={"episodes": 2, "seed": 1}))), env=cluster_env
    )
    assert ran.returncode == 0, ran.stderr
    assert "done — 20/20 units, 0 errors" in ran.stdout and "Leaderboard: it" in ran.stdout
    other = arena(
        "submit", str(write_spec(bandit_spec(protocol={"episodes": 3, "seed": 1}))), env=cluster_env
    )
    assert other.returncode == 2
    assert "leaderboard: 'it' holds results of a different protocol" in other.stderr


def test_cancel_stops_a_batch_and_leaves_the_board(cluster_env, db, workers, write_spec):
    spec = bandit_spec(params={"pulls": 20000}, leaderboard="cancelled-board")
    workers.start(cluster_env, concurrency=1)
    batch_id = submit(cluster_env, write_spec, spec)
    while db.progress(batch_id)[0] < 5:
        time.sleep(0.05)
    result = arena("cancel", batch_id, env=cluster_env)
    assert result.stdout.strip() == f"{batch_id}: cancelled"
    time.sleep(3)
    assert db.status(batch_id) == "cancelled"
    assert db.progress(batch_id)[0] < 200
    assert db.leaderboard("cancelled-board") == []


def test_cluster_commands_without_a_redis_url_say_so(write_spec, tmp_path):
    """`arena submit` queues on the embedded cluster a command keeps running (arena api, a
    training run); with none running and no ARENA_REDIS_URL it says both ways, in one line."""
    env = {k: v for k, v in os.environ.items() if k != "ARENA_REDIS_URL"}
    env["ARENA_DATA_DIR"] = str(tmp_path / "data")
    result = arena("submit", str(write_spec(bandit_spec())), env=env)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "no embedded cluster runs on" in line and "set ARENA_REDIS_URL" in line, line


def test_arena_worker_consumes_only_its_queues(cluster_env, db, write_spec):
    def worker(queues: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [ARENA, "worker", "--queues", queues, "--concurrency", "1", "--loglevel", "WARNING"],
            env=cluster_env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    gpu_only = worker("gpu")
    cpu = None
    try:
        batch_id = submit(cluster_env, write_spec, bandit_spec(protocol={"episodes": 2}))
        time.sleep(4)
        assert db.progress(batch_id) == (0, "running")  # bandit units go to the cpu queue
        cpu = worker("cpu")
        watched = arena("status", batch_id, "--watch", "--json", env=cluster_env)
        assert json.loads(watched.stdout)["status"] == "done"
        assert json.loads(watched.stdout)["completed"] == 20
    finally:
        for process in filter(None, (gpu_only, cpu)):
            stop(process)
    bad = arena("worker", "--queues", "tpu", env=cluster_env)
    assert bad.returncode == 2 and "--queues: unknown queue 'tpu'" in bad.stderr


def test_two_protocols_submitted_back_to_back_cannot_share_a_board(cluster_env, db, write_spec):
    """The board's protocol is claimed at submission, not when a batch finishes."""
    first = arena(
        "submit", str(write_spec(bandit_spec(protocol={"episodes": 2, "seed": 1}))), env=cluster_env
    )
    assert first.returncode == 0, first.stderr
    second = arena(
        "submit", str(write_spec(bandit_spec(protocol={"episodes": 3, "seed": 1}))), env=cluster_env
    )
    assert second.returncode == 2
    assert "leaderboard: 'it' holds results of a different protocol" in second.stderr
    assert db.batch_ids() == [first.stdout.strip()]


def test_fresh_while_the_same_batch_runs_is_refused(cluster_env, db, write_spec):
    spec = write_spec(bandit_spec())
    batch_id = submit(cluster_env, write_spec, bandit_spec())  # no workers: it stays running
    queued = db.r.llen("cpu")
    again = arena("submit", str(spec), "--fresh", env=cluster_env)
    assert again.returncode == 2
    assert f"--fresh: batch {batch_id} is running; cancel it first" in again.stderr
    assert db.r.llen("cpu") == queued  # nothing enqueued twice


def test_batches_are_found_by_prefix_or_run_id_and_an_ended_one_cannot_be_cancelled(
    cluster_env, db, workers, write_spec
):
    workers.start(cluster_env, concurrency=1)
    first = arena(
        "submit",
        str(write_spec(bandit_spec(protocol={"episodes": 1}))),
        "--run-id",
        "monday",
        env=cluster_env,
    )
    second = submit(cluster_env, write_spec, bandit_spec(protocol={"episodes": 2}, leaderboard="b"))
    batch_id = first.stdout.strip()
    assert wait_finished(db, batch_id) == wait_finished(db, second) == "done"
    for ref in (batch_id[:6], "monday"):
        shown = arena("status", ref, env=cluster_env)
        assert shown.returncode == 0 and f"batch {batch_id}: done" in shown.stdout
    empty = arena("status", "", env=cluster_env)  # not a reference to anything
    assert empty.returncode == 2 and "no batch or run ''" in empty.stderr
    common = ""
    for a, b in zip(batch_id, second, strict=False):  # the ids' shared first digits
        if a != b:
            break
        common += a
    if common:  # one time in sixteen
        ambiguous = arena("status", common, env=cluster_env)
        assert ambiguous.returncode == 2 and "matches 2 batches" in ambiguous.stderr
    ended = arena("cancel", batch_id[:8], env=cluster_env)
    assert ended.returncode == 1
    assert (
        ended.stderr.strip() == f"arena: batch {batch_id} already ended (done); nothing to cancel"
    )
    assert db.status(batch_id) == "done"


def test_a_worker_whose_visibility_timeout_is_too_short_refuses_the_chunk(
    cluster_env, db, workers, write_spec
):
    """The check lives where it matters: on the worker. The submitter (default 2 h) accepts a
    chunk of 10 × 10 s; a worker that would let the broker redeliver it after 20 s refuses it."""
    workers.start({**cluster_env, "ARENA_VISIBILITY_TIMEOUT_S": "20"}, concurrency=1)
    spec = bandit_spec(protocol={"episodes": 1, "seed": 2, "unit_time_limit_s": 10})
    batch_id = submit(cluster_env, write_spec, spec)
    assert wait_finished(db, batch_id) == "incomplete"
    info = db.batch(batch_id)
    assert "ARENA_VISIBILITY_TIMEOUT_S" in info.reason and info.infrastructure_errors == 10
    assert db.leaderboard("it") == []
