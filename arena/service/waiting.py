"""Waiting for a batch to finish, through Redis outages and refused writes, with nothing of the
terminal in it: a `Watcher` (the CLI's progress bar, or nothing) is told the progress and the
lines worth saying."""

from __future__ import annotations

import sys
import time
from typing import Protocol

import redis

from arena.embedded.attach import embedded_redis_gone
from tasks.liveness import waiting_on_lost_workers
from tasks.refusal import probe_writes, refused_writes
from tasks.settings import ArenaSettings
from tasks.store import FINISHED, BatchInfo, Store
from tasks.validation import ClusterUnreachable, RunFailed

POLL_S = 0.2
PROBE_S = 2.0  # how often a waiting client checks that Redis accepts writes


class Watcher(Protocol):
    """Who follows a wait: `progress` at every poll, `say` for a line about an outage."""

    def progress(self, done: int, note: str | None) -> None: ...

    def say(self, line: str) -> None: ...


class Unwatched:
    """A wait nobody follows."""

    def progress(self, done: int, note: str | None) -> None:
        pass

    def say(self, line: str) -> None:
        pass


class SaidOnStderr(Unwatched):
    """A wait with no progress to show (a command connecting, a training loop's callback):
    its lines on stderr, where the CLI's own outage lines go."""

    def say(self, line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def vanished(batch_id: str) -> RunFailed:
    return RunFailed(f"batch {batch_id} vanished from Redis (its keys were deleted or flushed)")


def wait(db: Store, batch_id: str, settings: ArenaSettings, watcher: Watcher) -> BatchInfo:
    """Poll until the batch finishes. A lost Redis, or one refusing writes, is waited for (one
    line says so) up to ARENA_REDIS_RETRY_S; a batch whose keys vanish ends the wait
    (RunFailed)."""
    outage = Outage(settings.redis_retry_s, batch_id, watcher)
    probed = time.monotonic()
    while True:
        try:
            done, status = db.progress(batch_id)
            note = waiting_on_lost_workers(db, batch_id, settings.lost_worker_s)
            # Reads pass where writes are refused: probe now and then, and at every poll while
            # refused (only a write tells when it is over).
            if (outage.refused and outage.since) or time.monotonic() - probed > PROBE_S:
                probed = time.monotonic()
                refused = probe_writes(db)
                if refused:
                    outage.lost(refused, refused=True)
                    continue
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if (gone := embedded_redis_gone()) is not None:
                raise gone from None  # the embedded Redis exited: nothing will restart it
            outage.lost(f"lost Redis ({' '.join(str(exc).split())})")
            continue
        except redis.ResponseError as exc:
            refused = refused_writes(exc)  # up, but refusing: waited for like an outage
            if refused is None:
                raise
            outage.lost(refused, refused=True)
            continue
        outage.back()
        if status is None:
            raise vanished(batch_id)
        watcher.progress(done, note)
        if status in FINISHED:
            break
        time.sleep(POLL_S)
    info = db.batch(batch_id)
    if info is None:
        raise vanished(batch_id)
    return info


class Outage:
    """A client's view of a Redis outage: one line when it starts, one when it ends, and a
    clear failure when it lasts too long: ClusterUnreachable (exit status 3) for a Redis that
    does not answer, RunFailed for one that refuses writes. `batch_id`: the batch a wait
    follows (None: a command connecting)."""

    def __init__(self, limit_s: float, batch_id: str | None, watcher: Watcher) -> None:
        self.limit_s, self.batch_id, self.watcher = limit_s, batch_id, watcher
        self.since: float | None = None
        self.refused = False  # Redis up but refusing writes (tasks/refusal.py), not gone

    def lost(self, why: str, refused: bool = False) -> None:
        """`why`: "lost Redis (…)", "cannot reach Redis at …", or the refusal's line
        (tasks/refusal.py)."""
        now = time.monotonic()
        if self.since is None:
            self.since, self.refused = now, refused
            if self.limit_s > 0:  # ARENA_REDIS_RETRY_S=0: no wait, so nothing to announce
                doing = "reconnecting" if self.batch_id and not refused else "waiting"
                self.watcher.say(f"{why}; {doing} for up to {self.limit_s:g}s")
        if now - self.since >= self.limit_s:
            raise self.gave_up(why)
        time.sleep(min(1.0, self.since + self.limit_s - now))

    def gave_up(self, why: str) -> RunFailed:
        waited = f"{why} for {self.limit_s:g}s (ARENA_REDIS_RETRY_S)" if self.limit_s else why
        if self.batch_id:
            waited += f"; the batch goes on where Redis is: arena status {self.batch_id}"
        return RunFailed(waited) if self.refused else ClusterUnreachable(waited)

    def back(self) -> None:
        if self.since is not None:
            what = "Redis accepts writes again" if self.refused else "Redis is back"
            self.watcher.say(f"{what} after {time.monotonic() - self.since:.0f}s")
        self.since = None
