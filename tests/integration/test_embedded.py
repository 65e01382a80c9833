"""`arena run` on the embedded default: its own Redis and workers, a progress bar, a leaderboard,
data that survives between runs, and nothing left running afterwards, Ctrl-C included."""

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
from tasks.store import Store
from tests.integration.conftest import ARENA, ROOT, arena, bandit_spec, wait_finished

pytestmark = pytest.mark.integration


def embedded_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return {**env, "ARENA_DATA_DIR": str(data_dir), "ARENA_WORKERS": "2"}


def leftovers(data_dir: Path, arena_pid: int | None = None) -> list[str]:
    """Processes still running that belong to that embedded run (its Redis or its workers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        mine = str(data_dir.resolve()) in cmdline or (
            arena_pid is not None and f"arena-{arena_pid}-" in cmdline
        )
        if mine and "pytest" not in cmdline:
            found.append(f"{proc.name}: {cmdline[:120]}")
    return found


def test_arena_run_on_the_embedded_default(tmp_path: Path):
    env = embedded_env(tmp_path / "data")
    first = arena("run", "examples/bandit.yaml", env=env)
    assert first.returncode == 0, first.stderr + first.stdout
    assert "done — 200/200 units, 0 errors" in first.stdout
    assert "Leaderboard: bandit-demo" in first.stdout
    assert leftovers(tmp_path / "data") == []
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
    # Meanwhile the data folder is this run's alone: a second embedded Redis would share its files.
    second = arena("batches", env=embedded_env(data))
    assert second.returncode == 2
    assert f"is in use by arena (pid {run.pid})" in second.stderr
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert err.strip().splitlines()[-1] == "arena: aborted"
    assert leftovers(data, run.pid) == []
    rerun = arena("run", str(spec), env=embedded_env(data))
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming:" in rerun.stdout
    status = arena("batches", "--json", env=embedded_env(data)).stdout
    assert "done — 200/200 units, 0 errors" in rerun.stdout, status


def test_status_of_an_unknown_batch(tmp_path: Path):
    result = arena("status", "nope", env=embedded_env(tmp_path / "data"))
    assert result.returncode == 2
    assert result.stderr.strip() == "arena: error: batch: no batch or run 'nope'"


def pool_main(arena_pid: int) -> int | None:
    """The Celery main process of the embedded worker pool started by `arena_pid`, if any."""
    # Every thread's children: the pool is started again by the supervising thread.
    tasks = Path(f"/proc/{arena_pid}/task").iterdir()
    children = [c for t in tasks for c in (t / "children").read_text().split()]
    for pid in children:
        with suppress(OSError):
            if b"celery" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
    return None


def test_a_worker_pool_that_dies_is_started_again(tmp_path: Path, monkeypatch, write_spec):
    """Nothing else runs an embedded batch's units: a pool whose main process dies (Celery's
    own "Unrecoverable error" after a Redis reconnect, the OOM killer) is started again."""
    monkeypatch.setattr(embedded, "POOL_MIN_LIFE_S", 0.0)
    with embedded.embedded_cluster(tmp_path / "data", 1) as url:
        first = pool_main(os.getpid())
        assert first is not None
        os.killpg(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while pool_main(os.getpid()) in (None, first):
            assert time.monotonic() < deadline, "no new worker pool"
            time.sleep(0.1)
        env = {**embedded_env(tmp_path / "data"), "ARENA_REDIS_URL": url}
        submitted = arena("submit", str(write_spec(bandit_spec())), env=env)
        assert submitted.returncode == 0, submitted.stderr
        db = Store(redis.Redis.from_url(url, decode_responses=True))
        assert wait_finished(db, submitted.stdout.split()[0], timeout=120) == "done"


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
    assert leftovers(tmp_path / "data") == []
