"""Chunks in flight, as the watchdog (tasks/watchdog.py) reads them: a heartbeat from the
worker process running each chunk, the plan of which units each chunk message carries, and the
broker's own record of delivered messages.

A chunk's message stays in the broker's `unacked` hash from delivery until its task ends
(acks_late). A message delivered more than `lost_after_s` ago whose chunk has no fresh heartbeat
is held by a worker that died (before or while running it): the watchdog puts it back at the
front of its queue, as kombu itself does after the visibility timeout.

One clock: every time compared here is Redis's (TIME in tasks/lua/, or a key's expiry), never
a worker's `time.time()`: the writer and the judge are different machines (docs/reliability.md,
"One clock").

The records are the Store's (tasks/store_flight.py, keys in tasks/keys.py); what the broker
holds is read through tasks/broker.py, the one module that knows kombu's layout.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from tasks import broker
from tasks.provenance import host_name
from tasks.store import Store

log = logging.getLogger(__name__)


class Beat:
    """A registered chunk: the replies read when it was registered, and a way to forget it in
    the round trip that stores its last result instead of one of its own."""

    def __init__(self, db: Store, batch_id: str, chunk_id: str, replies: list[Any]) -> None:
        self.db, self.batch_id, self.chunk_id, self.replies = db, batch_id, chunk_id, replies
        self.forgotten = False

    def forget_in(self, pipe: Any) -> None:
        """Add the commands that forget the chunk to `pipe`; after it ran, set `forgotten`."""
        _BEATER.discard((self.batch_id, self.chunk_id))  # no beat lands after the forgetting
        self.db.forget_chunk_in(pipe, self.batch_id, self.chunk_id)


@contextmanager
def heartbeat(
    db: Store,
    batch_id: str,
    chunk_id: str,
    unit_ids: list[str],
    queue: str,
    every_s: float,
    read: Callable[[Any], None] | None = None,
) -> Iterator[Beat]:
    """Beat every `every_s` seconds while the block runs; the chunk is forgotten after it.
    `read(pipeline)` adds commands to the round trip that registers the chunk; their replies
    are the Beat's `replies` (a worker reads the batch's status and stored units with it)."""
    info = {"units": unit_ids, "queue": queue, "worker": f"{host_name()}:{os.getpid()}"}
    beat = Beat(db, batch_id, chunk_id, db.register_chunk(batch_id, chunk_id, info, read))
    _BEATER.add((batch_id, chunk_id), partial(db.beat_chunk, batch_id, chunk_id), every_s)
    try:
        yield beat
    finally:
        if not beat.forgotten:  # forget_in also stops the beats
            _BEATER.discard((batch_id, chunk_id))
            db.forget_chunk(batch_id, chunk_id)


class _Beater:
    """One thread per process beats for every chunk the process is running: starting a thread
    per chunk cost a unit-sized task more than the unit itself (docs/performance.md)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.beats: dict[tuple[str, str], tuple[Callable[[], Any], float, float]] = {}
        self.wake = threading.Event()
        self.pid = 0  # the process whose thread runs (a forked child starts its own)

    def add(self, key: tuple[str, str], beat: Callable[[], Any], every_s: float) -> None:
        with self.lock:
            self.beats[key] = (beat, every_s, time.monotonic() + every_s)
            if self.pid != os.getpid():
                self.pid = os.getpid()
                threading.Thread(target=self._loop, name="arena-heartbeat", daemon=True).start()
        self.wake.set()

    def discard(self, key: tuple[str, str]) -> None:
        with self.lock:
            self.beats.pop(key, None)

    def _loop(self) -> None:
        while True:
            self.wake.clear()  # an add() from here on wakes the wait below
            # Beats run under the lock: discard() returns only once no beat of its chunk is
            # in flight, so none lands after the chunk is forgotten.
            with self.lock:
                due = [(k, b, e) for k, (b, e, at) in self.beats.items() if at <= time.monotonic()]
                for key, beat, every_s in due:
                    self.beats[key] = (beat, every_s, time.monotonic() + every_s)
                    with suppress(redis.RedisError):
                        beat()
                pending = [at for _, _, at in self.beats.values()]
            self.wake.wait(max(0.0, min(pending, default=time.monotonic() + 60) - time.monotonic()))


_BEATER = _Beater()


class _Later:
    """One daemon thread per process runs what a task leaves for after it returned: a chunk's
    end in its pool (two fsynced round trips) no longer delays the process's next chunk. A
    process that dies first leaves the chunk in its pool's window; the watchdog frees it
    (lost_out)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue[Callable[[], Any]] = queue.SimpleQueue()
        self.pid = 0  # the process whose thread runs (a forked child starts its own)

    def run(self, job: Callable[[], Any]) -> None:
        with self.lock:
            if self.pid != os.getpid():
                self.pid, self.jobs = os.getpid(), queue.SimpleQueue()
                thread = threading.Thread(target=self._loop, args=(self.jobs,), daemon=True)
                thread.start()
        self.jobs.put(job)

    @staticmethod
    def _loop(jobs: queue.SimpleQueue[Callable[[], Any]]) -> None:
        while True:
            job = jobs.get()
            try:
                job()
            except Exception:  # the thread outlives any one job (Redis gone past its retries)
                log.exception("a chunk's end in its pool failed (the watchdog frees its place)")


later = _Later().run


@contextmanager
def keep_alive(beat: Callable[[], None], every_s: float) -> Iterator[None]:
    """Call `beat` every `every_s` seconds while the block runs (a claim that expires unless
    renewed: held while its holder lives, free soon after it dies)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            with suppress(redis.RedisError):
                beat()

    thread = threading.Thread(target=loop, name="keep-alive", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(every_s + 1)


@dataclass
class Orphan:
    """A chunk's message delivered to a worker that is no longer running it."""

    tag: str  # the broker's delivery tag
    batch_id: str
    chunk_id: str
    units: int
    queue: str
    silent_s: float


def orphans(
    db: Store, lost_after_s: float, batch_id: str | None = None, note: bool = False
) -> list[Orphan]:
    """Chunk messages delivered over `lost_after_s` ago whose chunk has no fresh heartbeat,
    all on Redis's clock: a stale heartbeat (a chunk that ran), or, for a chunk that never
    started, `lost_after_s` since a watchdog first saw its message (kombu's own delivery
    stamp is the delivering worker's clock). `note`: a watchdog's sweep (it records what it
    sees first); otherwise a read-only look."""
    now, seen = db.deliveries(note)
    found = []
    for tag, first_seen in seen.items():
        chunk = broker.delivered_chunk(db.r, tag)
        if chunk is None or (batch_id is not None and chunk.batch_id != batch_id):
            continue
        beat = db.chunk_beat(chunk.batch_id, chunk.chunk_id)
        if beat is not None and now - beat < lost_after_s:
            continue  # its worker is alive and running it
        if beat is None and (first_seen is None or now - first_seen < lost_after_s):
            continue  # delivered just now, or not started yet
        quiet = now - max(first_seen or 0, beat or 0)
        found.append(Orphan(tag, chunk.batch_id, chunk.chunk_id, chunk.units, chunk.queue, quiet))
    return found


def lost_units(db: Store, batch_id: str, lost_after_s: float) -> list[str]:
    """Units of the batch with no result that no message anywhere carries: not waiting in its
    pool (tasks/fair_share.py), not just released, not queued, not delivered
    (unacknowledged), not running. Kombu's Redis transport loses a message whose
    worker is killed between taking it from the queue and recording it as delivered."""
    plan = db.plan(batch_id)
    stored = db.result_unit_ids(batch_id)
    pending = {c: [u for u in ids if u not in stored] for c, ids in plan.items()}
    pending = {c: ids for c, ids in pending.items() if ids}
    if not pending:
        return []
    # Read before the messages: a chunk released in between is in one or the other.
    carried = db.waiting_chunk_ids(batch_id)
    released = db.redis_time() - lost_after_s
    carried |= {o.chunk_id for o in db.out_chunks(batch_id) if o.released_at > released}
    carried |= broker.chunks_in_messages(db.r, batch_id) | _beating(db, batch_id, lost_after_s)
    return sorted(u for c, ids in pending.items() if c not in carried for u in ids)


def _beating(db: Store, batch_id: str, lost_after_s: float) -> set[str]:
    """The batch's chunks whose worker beat within `lost_after_s` (Redis's clock)."""
    now = db.redis_time()
    return {c for c, beat in db.chunk_beats(batch_id).items() if now - beat < lost_after_s}


def lost_out(db: Store, batch_id: str, lost_after_s: float) -> dict[str, list[str]]:
    """Pool -> the batch's chunks given to the broker over `lost_after_s` ago (Redis's clock)
    that no message carries and no worker runs: their place in the pool's window is lost
    (a publisher that died, a message lost in delivery, a chunk whose end was never told)."""
    cutoff = db.redis_time() - lost_after_s
    old = [o for o in db.out_chunks(batch_id) if o.released_at <= cutoff]
    if not old:
        return {}
    running = _beating(db, batch_id, lost_after_s)
    old = [o for o in old if o.chunk_id not in running]
    if not old:
        return {}
    carried = broker.chunks_in_messages(db.r, batch_id)
    lost: dict[str, list[str]] = {}
    for chunk in old:
        if chunk.chunk_id not in carried:
            lost.setdefault(chunk.queue, []).append(chunk.chunk_id)
    return lost


def waiting_on_lost_workers(db: Store, batch_id: str, lost_after_s: float) -> str | None:
    """What `arena status` says while a dead worker's units wait to be given out again."""
    lost = orphans(db, lost_after_s, batch_id)
    if not lost:
        return None
    units = sum(o.units for o in lost)
    silent = max(o.silent_s for o in lost)
    return (
        f"waiting for {units} units held by a lost worker (silent {silent:.0f}s; a live "
        "worker gives them out again)"
    )
