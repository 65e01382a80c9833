"""The embedded cluster's host: one detached process per data folder that owns its Redis and its
worker pool while any `arena` command (a client, arena/embedded/attach.py) is attached, and a
while after (ARENA_EMBEDDED_LINGER_S). Started by the first client as
`python -m arena.embedded.host DATA_DIR --workers N`; docs/architecture.md, "The embedded
default".

Files in the data folder: `arena.lock` (held exclusively by the host: one Redis per append-only
file), `clients.lock` (each attached client holds it shared; the host stops once it can take it
exclusively for the linger), `host.json` (the state clients read: Redis's URL, the host's pid,
its generation), `workers.wanted` (a client that runs batches asks for the pool at once),
`host.log` (the host's own lines)."""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import IO

import redis
from pydantic import BaseModel

from arena.embedded import (
    DataDirInUse,
    KeptPool,
    _exclusive,
    _socket_path,
    forget_broker_state,
    start_redis,
    start_workers,
    stop,
)
from arena.embedded.redis_log import redis_stopped
from tasks.broker import QUEUES, queue_lengths
from tasks.keys import Keys
from tasks.settings import load_settings
from tasks.validation import InputError
from workers.fingerprint import engine_fingerprint

STATE, CLIENTS, WANTED, LOG = "host.json", "clients.lock", "workers.wanted", "host.log"
CHECK_S = 0.25  # how often the host looks for clients and for work
LOCK_WAIT_S = 30.0  # a host that just stopped may still hold the folder's lock this long


class HostState(BaseModel):
    """host.json: what a client needs to attach."""

    url: str
    pid: int
    generation: int
    workers: int
    engine: str  # Arena's code its workers run (workers/fingerprint.py), as of the pool's start
    redis_pid: int = 0  # its Redis: a client that loses it sees at once whether it is gone


def write_state(data_dir: Path, state: HostState) -> None:
    partial = data_dir / f".{STATE}.partial"
    partial.write_text(state.model_dump_json())
    os.replace(partial, data_dir / STATE)  # a client never reads half of it


def read_state(data_dir: Path) -> HostState | None:
    try:
        return HostState.model_validate_json((data_dir / STATE).read_text())
    except (OSError, ValueError):
        return None


def begin_generation(url: str, keys: Keys) -> int:
    """A host starts on a folder whose previous host is gone: what it left queued or in flight
    is forgotten (no worker of it is left), and the batches it left `running` are noted as
    orphans, which the next client to resubmit one resumes (attach.resume_orphan). The new
    generation's number."""
    forget_broker_state(url)
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        from tasks.store import Store  # (Celery-free) the sharing state is the Store's to forget

        db = Store(client, prefix=keys.prefix)
        forget_pools = getattr(db, "forget_pools", None)
        if forget_pools is not None:
            forget_pools()
        running = db.running_batch_ids()
        with client.pipeline() as pipe:
            pipe.delete(keys.embedded_orphans())
            if running:
                pipe.sadd(keys.embedded_orphans(), *sorted(running))
            pipe.incr(keys.embedded_generation())
            return int(pipe.execute()[-1])
    finally:
        client.close()


class Host:
    """Redis, then (when a client asks, or work is queued) the worker pool; stopped when no
    client has been attached for `linger_s`, or on SIGTERM/SIGINT."""

    def __init__(self, data_dir: Path, workers: int, linger_s: float, keys: Keys) -> None:
        self.data_dir, self.workers, self.linger_s, self.keys = data_dir, workers, linger_s, keys
        self.stopping = threading.Event()
        self.pool: KeptPool | None = None
        self.redis_exited = False  # its Redis died: the host ends (nothing restarts it)

    def run(self) -> None:
        with ExitStack() as stack:
            # The host before this one may still be stopping its Redis: wait for it.
            stack.enter_context(_exclusive(self.data_dir, LOCK_WAIT_S))
            clients = stack.enter_context(open(self.data_dir / CLIENTS, "a+"))
            sock = _socket_path(self.data_dir)
            sock.unlink(missing_ok=True)
            self.server = server = start_redis(self.data_dir, sock)
            stack.callback(stop, server)  # last: the workers stop first
            url = f"unix://{sock}"
            generation = begin_generation(url, self.keys)
            stack.callback(self._close_pool)
            stack.callback((self.data_dir / STATE).unlink, missing_ok=True)  # first of all
            self.state = HostState(
                url=url, pid=os.getpid(), generation=generation, workers=self.workers,
                engine=current_engine(), redis_pid=server.pid,
            )  # fmt: skip
            write_state(self.data_dir, self.state)
            say(f"generation {generation} on {url} (pid {os.getpid()})")
            self._serve(url, clients)

    def _serve(self, url: str, clients: IO[str]) -> None:
        broker = redis.Redis.from_url(url)
        idle_since: float | None = None
        while not self.stopping.wait(CHECK_S):
            if self.server.poll() is not None:
                self._redis_died()
                return
            if self.pool is None and self._work_wanted(broker):
                self.state = self.state.model_copy(update={"engine": current_engine()})
                write_state(self.data_dir, self.state)
                self.pool = KeptPool(self._start_pool(url), self._restarted)
            if not _alone(clients):
                idle_since = None
                continue
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since >= self.linger_s:
                # The clients' lock stays ours: a client arriving now waits, then starts a host.
                say(f"no client for {self.linger_s:g}s: stopping")
                return
            fcntl.flock(clients, fcntl.LOCK_UN)

    def _work_wanted(self, broker: redis.Redis) -> bool:
        wanted = self.data_dir / WANTED
        if wanted.exists():
            wanted.unlink(missing_ok=True)
            return True
        with suppress(redis.RedisError):
            return any(queue_lengths(broker, QUEUES).values())
        return False

    def _start_pool(self, url: str) -> Callable[[], subprocess.Popen[bytes]]:
        return lambda: start_workers(url, self.workers, self.data_dir)

    def _restarted(self, code: int) -> None:
        say(f"the worker pool exited (code {code}); starting it again (its log: worker.log)")

    def _redis_died(self) -> None:
        """Supervised like the pool, but not started again: a Redis that exited for a full
        disk or a broken append-only file would exit again. The clients attached see it gone
        (attach.redis_gone) and say why; the next command starts a host afresh."""
        self.redis_exited = True
        say(str(redis_stopped(self.data_dir)))

    def _close_pool(self) -> None:
        if self.pool is not None:
            # SIGTERM: the units running finish first, unless Redis is gone (nowhere to store)
            self.pool.close(timeout=2.0 if self.redis_exited else 15.0)


def current_engine() -> str:
    """The fingerprint of Arena's code as it is on disk now (not as it was first computed)."""
    engine_fingerprint.cache_clear()
    return engine_fingerprint()


def _alone(clients: IO[str]) -> bool:
    """No client attached: the clients' lock taken exclusively (kept; the caller releases it)."""
    try:
        fcntl.flock(clients, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def say(line: str) -> None:
    with suppress(OSError):  # host.log on a full disk: the clients say it instead
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} arena host: {line}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arena.embedded.host")
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--workers", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
        keys = Keys(settings.key_prefix)
        host = Host(args.data_dir.resolve(), max(args.workers, 1), settings.embedded_linger_s, keys)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: host.stopping.set())
        host.run()
        if host.redis_exited:
            return 1
    except (InputError, DataDirInUse, RuntimeError) as exc:
        # The client that started the host shows this last line as its own error.
        print(f"arena: error: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)
        return 2
    say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
