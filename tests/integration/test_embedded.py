"""`arena run` on the embedded default: the data folder's Redis and workers (its host,
arena/embedded/host.py), a progress bar, a leaderboard, data that survives between runs, other
commands attached meanwhile, and nothing left running once the last command left (after the
linger), Ctrl-C included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import pytest
import redis

from arena import embedded
from arena.embedded.attach import attached
from tasks.store import Store
from tests.integration.conftest import ARENA, ROOT, arena, bandit_spec, wait_finished

pytestmark = pytest.mark.integration


LINGER_S = 1.0  # the host stops this long after its last client left (ARENA_EMBEDDED_LINGER_S)


def embedded_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return {
        **env,
        "ARENA_DATA_DIR": str(data_dir),
        "ARENA_WORKERS": "2",
        "ARENA_EMBEDDED_LINGER_S": str(LINGER_S),
    }


def leftovers(data_dir: Path) -> list[str]:
    """Processes still running that belong to the folder's embedded cluster: its host, its
    Redis (both name the folder) or its workers (their ARENA_REDIS_URL is the folder's socket)."""
    folder, found = str(data_dir.resolve()).encode(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        redis_url = next((e for e in environ if e.startswith(b"ARENA_REDIS_URL=")), b"")
        mine = folder in cmdline or folder in redis_url
        if mine and b"pytest" not in cmdline:
            found.append(f"{proc.name}: {cmdline[:120].decode(errors='replace')}")
    return found


def no_leftovers(data_dir: Path, timeout: float = 40) -> None:
    """The folder's cluster stops once its last client left (LINGER_S), workers first."""
    deadline = time.monotonic() + timeout
    while found := leftovers(data_dir):
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def test_arena_run_on_the_embedded_default(tmp_path: Path):
    env = embedded_env(tmp_path / "data")
    first = arena("run", "examples/bandit.yaml", env=env)
    assert first.returncode == 0, first.stderr + first.stdout
    assert "done — 200/200 units, 0 errors" in first.stdout
    assert "Leaderboard: bandit-demo" in first.stdout
    no_leftovers(tmp_path / "data")
    # The data folder keeps the board: readable without a cluster, and a rerun is a resume.
    board = json.loads(arena("leaderboard", "bandit-demo", "--json", env=env).stdout)
    assert [e["agent"] for e in board["entries"]][-1] == "random"
    second = arena("run", "examples/bandit.yaml", env=env)
    assert "resuming: 200 of 200 unit results already stored" in second.stdout
    again = json.loads(arena("leaderboard", "bandit-demo", "--json", env=env).stdout)
    assert [e["stats"] for e in again["entries"]] == [e["stats"] for e in board["entries"]]
    batches = arena("batches", env=env).stdout
    assert "done" in batches and "bandit-demo" in batches


def test_ctrl_c_leaves_no_stray_process_and_the_rerun_resumes(tmp_path: Path, write_spec):
    data = tmp_path / "data"
    spec = write_spec(bandit_spec(params={"pulls": 30000}, leaderboard="slow"))
    run = subprocess.Popen(
        [ARENA, "run", str(spec)],
        env=embedded_env(data),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (data / "worker.log").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(4)  # the workers are starting or running units: interrupt mid-batch
    # Meanwhile another command on the folder attaches to the same cluster and sees the batch.
    second = arena("batches", env=embedded_env(data))
    assert second.returncode == 0, second.stderr
    assert "running" in second.stdout and "slow" in second.stdout
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert err.strip().splitlines()[-1] == "arena: aborted"
    no_leftovers(data)
    rerun = arena("run", str(spec), env=embedded_env(data))
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming:" in rerun.stdout
    status = arena("batches", "--json", env=embedded_env(data)).stdout
    assert "done — 200/200 units, 0 errors" in rerun.stdout, status


def test_status_of_an_unknown_batch(tmp_path: Path):
    result = arena("status", "nope", env=embedded_env(tmp_path / "data"))
    assert result.returncode == 2
    assert result.stderr.strip() == "arena: error: batch: no batch or run 'nope'"


def pool_main(host_pid: int) -> int | None:
    """The Celery main process of the worker pool the host `host_pid` started, if any."""
    # Every thread's children: the pool is started again by the supervising thread.
    tasks = Path(f"/proc/{host_pid}/task").iterdir()
    children = [c for t in tasks for c in (t / "children").read_text().split()]
    for pid in children:
        with suppress(OSError):
            if b"celery" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
    return None


def test_a_worker_pool_that_dies_is_started_again(tmp_path: Path, monkeypatch, write_spec):
    """Nothing else runs an embedded batch's units: a pool whose main process dies (Celery's
    own "Unrecoverable error" after a Redis reconnect, the OOM killer) is started again by the
    folder's host. `arena submit` with no ARENA_REDIS_URL queues on the host running there."""
    env, spec = embedded_env(tmp_path / "data"), str(write_spec(bandit_spec()))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ARENA_REDIS_URL", raising=False)
    alone = arena("submit", spec, env=env)  # no host runs there: nothing to queue on
    assert alone.returncode == 2 and "no embedded cluster runs on" in alone.stderr, alone.stderr
    with attached(tmp_path / "data", 1, run_batches=True) as host:
        deadline = time.monotonic() + 30
        while (first := pool_main(host.pid)) is None:
            assert time.monotonic() < deadline, "no worker pool"
            time.sleep(0.1)
        time.sleep(embedded.POOL_MIN_LIFE_S + 0.5)  # a pool that ran: its exit is a crash
        os.killpg(first, signal.SIGKILL)
        while pool_main(host.pid) in (None, first):
            assert time.monotonic() < deadline + 30, "no new worker pool"
            time.sleep(0.1)
        submitted = arena("submit", spec, env=env)
        assert submitted.returncode == 0, submitted.stderr
        db = Store(redis.Redis.from_url(host.url, decode_responses=True))
        assert wait_finished(db, submitted.stdout.split()[0], timeout=120) == "done"
    assert "the worker pool exited" in (tmp_path / "data" / "host.log").read_text()
    no_leftovers(tmp_path / "data")


def test_the_readmes_main_command_plays_a_users_agent_from_its_sandbox(tmp_path: Path):
    """`arena run examples/mario.yaml`, as the README runs it: the built-ins and the user's own
    Python agent on the real emulator, every episode clean, one board row each. With
    ARENA_TRUST_AGENTS unset the user's agent can only have played from the agent sandbox
    (tests/security/test_hostile_agents.py shows what that sandbox holds)."""
    env = embedded_env(tmp_path / "data")
    assert "ARENA_TRUST_AGENTS" not in env
    ran = arena("run", "examples/mario.yaml", "--json", env=env, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:] + ran.stdout[-3000:]
    report = json.loads(ran.stdout)
    assert report["counts"]["errors"] == 0 and report["counts"]["completed"] == 64
    assert report["versions"]["agents"]["stuck-jumper"]["kind"] == "source"
    board = json.loads(arena("leaderboard", "mario-1-1", "--json", env=env).stdout)
    rows = {e["agent"]: e for e in board["entries"]}
    assert set(rows) == {"right", "jump-right", "random", "stuck-jumper"}
    assert all(row["stats"]["episodes"] == 16 for row in rows.values())
    no_leftovers(tmp_path / "data")
