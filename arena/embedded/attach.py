"""A command's side of the embedded cluster (arena/embedded/host.py): attach to the host running
on the data folder, or start one, and hold the folder's clients lock (shared) while attached.
A client that exits, however it exits, releases the lock; the host stops once none holds it for
ARENA_EMBEDDED_LINGER_S."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from arena.embedded import DataDirInUse, prepare_data_dir
from arena.embedded.host import CLIENTS, LOG, STATE, WANTED, HostState, read_state
from arena.embedded.redis_log import DataDiskFull, check_room, redis_stopped
from tasks.store import Store
from tasks.validation import InputError, RunFailed
from workers.fingerprint import engine_fingerprint

START = "host-start.lock"  # held while a client looks for the host and starts one: one host
HOST_START_S = 60.0
_hosts: list[subprocess.Popen[bytes]] = []  # the hosts this process started (reaped when ended)
ATTACHED: list[tuple[Path, HostState]] = []  # the hosts this process is attached to now


class NoHost(InputError):
    """No host runs on the folder, and the command does not start one."""


@contextmanager
def attached(
    data_dir: Path, workers: int, *, run_batches: bool = False, start: bool = True
) -> Iterator[HostState]:
    """Attached to the folder's host for the block (started if none runs, unless not `start`:
    NoHost). `run_batches`: the pool is started now, not when the first unit is queued."""
    data_dir = prepare_data_dir(data_dir)
    with open(data_dir / CLIENTS, "a+") as clients:
        with open(data_dir / START, "a+") as starting:
            fcntl.flock(starting, fcntl.LOCK_EX)
            # Shared: blocks while a host that found no client stops, then finds it gone.
            fcntl.flock(clients, fcntl.LOCK_SH)
            state = live_host(data_dir)
            if state is None and not start:
                raise NoHost(
                    f"no embedded cluster runs on {data_dir} (ARENA_DATA_DIR); `arena api` "
                    "keeps one running, or set ARENA_REDIS_URL"
                )
            if state is None:
                check_room(data_dir)  # a full disk: one line with its free space
                state = start_host(data_dir, workers)
        if run_batches:
            check_engine(data_dir, state)
            (data_dir / WANTED).touch()
        ATTACHED.append((data_dir, state))
        try:
            yield state
        except (redis.ConnectionError, redis.TimeoutError, RunFailed) as exc:
            # Lost mid-command: a Redis that exited is said with its reason, not as an outage.
            raise redis_gone(data_dir, state) or exc from None
        finally:
            ATTACHED.remove((data_dir, state))


def embedded_redis_gone() -> RunFailed | None:
    """Why the embedded Redis this process is attached to exited (RunFailed: say it and end,
    nothing will bring it back), or None (not attached, or it runs: a lost connection is an
    outage to wait out)."""
    return next(filter(None, (redis_gone(*host) for host in ATTACHED)), None)


def check_engine(data_dir: Path, state: HostState) -> None:
    """A batch submitted by other Arena code than the host's workers run would fail unit by
    unit (EngineMismatch): refused at once instead, saying what to do."""
    if state.engine != engine_fingerprint():
        raise InputError(
            f"ARENA_DATA_DIR: the embedded cluster on {data_dir} (pid {state.pid}) runs other "
            "Arena code than this command (Arena changed since it started); it stops once the "
            "commands using it end, or use another data folder"
        )


def live_host(data_dir: Path) -> HostState | None:
    """The host of host.json if it is alive and its Redis answers."""
    state = read_state(data_dir)
    if state is None:
        return None
    try:
        os.kill(state.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's: its Redis answers or not
    client = redis.Redis.from_url(state.url, socket_timeout=5, socket_connect_timeout=5)
    try:
        client.ping()
    except (redis.RedisError, OSError):
        return None
    finally:
        client.close()
    return state


def start_host(data_dir: Path, workers: int) -> HostState:
    """Start the folder's host (detached: its own session, outliving this process) and wait
    until its Redis answers. The host's own one-line error (e.g. the folder in use) as ours."""
    _hosts[:] = [h for h in _hosts if h.poll() is None]
    (data_dir / STATE).unlink(missing_ok=True)  # a dead host's
    with open(data_dir / LOG, "ab") as log:
        host = subprocess.Popen(
            [sys.executable, "-m", "arena.embedded.host", str(data_dir), "--workers", str(workers)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _hosts.append(host)
    deadline = time.monotonic() + HOST_START_S
    while True:
        state = read_state(data_dir)
        if state is not None and state.pid == host.pid:
            return state
        if host.poll() is not None:
            raise _host_failed(data_dir)
        if time.monotonic() > deadline:
            host.terminate()
            raise RunFailed(f"the embedded cluster did not start; see {data_dir / LOG}")
        time.sleep(0.02)


def _host_failed(data_dir: Path) -> Exception:
    """The host's own last line as the error; where it wrote none (its log on a full disk),
    why its Redis stopped."""
    lines = (data_dir / LOG).read_text(errors="replace").strip().splitlines() or [""]
    last = lines[-1].removeprefix("arena: error: ")
    if "is in use by arena" in last:
        return DataDirInUse(last)
    if not last or isinstance(redis_stopped(data_dir), DataDiskFull):
        return redis_stopped(data_dir, "the embedded cluster did not start")
    return RunFailed(f"the embedded cluster did not start: {last} (see {data_dir / LOG})")


def redis_gone(data_dir: Path, state: HostState) -> RunFailed | None:
    """Why the host's Redis is gone for good (its process, or its host, exited: nothing starts
    it again), or None while it runs (a client that cannot reach it then waits as for an
    outage). Asked by a client that lost its Redis."""
    _hosts[:] = [h for h in _hosts if h.poll() is None]  # a host this process started: reaped
    for pid in (state.redis_pid, state.pid):
        if pid and not _alive(pid):
            return redis_stopped(data_dir)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's, alive
    try:  # exited but not yet reaped by its parent (the host looks every CHECK_S): gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return True  # no /proc: alive as far as kill tells


def resume_orphan(db: Store, batch_id: str) -> bool:
    """Whether this client resumes the batch: one left `running` by an earlier host of the
    folder (no worker of it is left), claimed once, by one client. A batch running under the
    current host is another client's, left to run (submit: `already-running`)."""
    return bool(db.r.srem(db.keys.embedded_orphans(), batch_id))
