"""Chunks in flight, as the watchdog (tasks/watchdog.py) reads them: a heartbeat from the
worker process running each chunk, the plan of which units each chunk message carries, and the
broker's own record of delivered messages.

A chunk's message stays in the broker's `unacked` hash from delivery until its task ends
(acks_late). A message delivered more than `lost_after_s` ago whose chunk has no fresh heartbeat
is held by a worker that died (before or while running it): the watchdog puts it back at the
front of its queue, as kombu itself does after the visibility timeout.

Keys (prefix omitted): `running` set of running batch ids (tasks/store.py); `batch:{id}:chunks`
hash chunk id -> {"units": [...], "queue", "worker"}; `batch:{id}:beats` hash chunk id -> last
heartbeat (unix s). Kombu's own: `unacked`, `unacked_index`.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import redis

from tasks.provenance import host_name
from tasks.store import Store

UNACKED, UNACKED_INDEX = "unacked", "unacked_index"  # kombu's redis transport defaults
QUEUES = ("cpu", "gpu")  # tasks.app.QUEUES (not imported: this module has no Celery)
CHUNK_TASK = "arena.run_chunk"


def k_chunks(db: Store, batch_id: str) -> str:
    return f"{db.k_batch(batch_id)}:chunks"


def k_beats(db: Store, batch_id: str) -> str:
    return f"{db.k_batch(batch_id)}:beats"


class Beat:
    """A registered chunk: the replies read when it was registered, and a way to forget it in
    the round trip that stores its last result instead of one of its own."""

    def __init__(self, db: Store, batch_id: str, chunk_id: str, replies: list[Any]) -> None:
        self.db, self.batch_id, self.chunk_id, self.replies = db, batch_id, chunk_id, replies
        self.forgotten = False

    def forget_in(self, pipe: Any) -> None:
        """Add the commands that forget the chunk to `pipe`; after it ran, set `forgotten`."""
        _BEATER.discard((self.batch_id, self.chunk_id))  # no beat lands after the forgetting
        pipe.hdel(k_chunks(self.db, self.batch_id), self.chunk_id)
        pipe.hdel(k_beats(self.db, self.batch_id), self.chunk_id)


@contextmanager
def heartbeat(
    db: Store, batch_id: str, chunk_id: str, unit_ids: list[str], queue: str, every_s: float,
    read: Callable[[Any], None] | None = None,
) -> Iterator[Beat]:  # fmt: skip
    """Beat every `every_s` seconds while the block runs; the chunk is forgotten after it.
    `read(pipeline)` adds commands to the round trip that registers the chunk; their replies
    are the Beat's `replies` (a worker reads the batch's status and stored units with it)."""
    info = {"units": unit_ids, "queue": queue, "worker": f"{host_name()}:{os.getpid()}"}
    with db.r.pipeline(transaction=False) as pipe:
        pipe.hset(k_chunks(db, batch_id), chunk_id, json.dumps(info))
        pipe.hset(k_beats(db, batch_id), chunk_id, time.time())
        if read is not None:
            read(pipe)
        beat = Beat(db, batch_id, chunk_id, pipe.execute()[2:])
    _BEATER.add(
        (batch_id, chunk_id), lambda: db.r.hset(k_beats(db, batch_id), chunk_id, time.time()),
        every_s,
    )  # fmt: skip
    try:
        yield beat
    finally:
        if not beat.forgotten:  # forget_in also stops the beats
            with db.r.pipeline(transaction=False) as pipe:
                beat.forget_in(pipe)
                pipe.execute()


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


def orphans(db: Store, lost_after_s: float, batch_id: str | None = None) -> list[Orphan]:
    """Chunk messages delivered over `lost_after_s` ago whose chunk has no fresh heartbeat."""
    now = time.time()
    tags = db.r.zrangebyscore(UNACKED_INDEX, "-inf", now - lost_after_s, withscores=True)
    found = []
    for tag, delivered in tags:
        chunk = _chunk_of(db.r.hget(UNACKED, tag))
        if chunk is None or (batch_id is not None and chunk[0] != batch_id):
            continue
        beat = db.r.hget(k_beats(db, chunk[0]), chunk[1])
        if beat is not None and now - float(beat) < lost_after_s:
            continue  # its worker is alive and running it
        quiet = now - max(float(delivered), float(beat or 0))
        found.append(Orphan(tag, chunk[0], chunk[1], chunk[2], chunk[3], quiet))
    return found


def _chunk_of(raw: str | None) -> tuple[str, str, int, str] | None:
    """(batch, chunk, number of units, queue) of an unacked run_chunk message, else None."""
    if raw is None:
        return None
    try:
        message, _, routing_key = json.loads(raw)
    except (ValueError, TypeError):
        return None
    args = chunk_args(message)
    return (args[0], args[1], args[2], str(routing_key)) if args else None


def chunk_args(message: Any) -> tuple[str, str, int] | None:
    """(batch, chunk, number of units) of a run_chunk message as kombu stores it, else None."""
    try:
        if message.get("headers", {}).get("task") != CHUNK_TASK:
            return None
        args = json.loads(base64.b64decode(message["body"]))[0]  # protocol 2: [args, kwargs, …]
        return str(args[0]), str(args[1]), len(args[2])
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None  # not a message of ours, or another kombu format: left to kombu


def k_plan(db: Store, batch_id: str) -> str:
    return f"{db.k_batch(batch_id)}:plan"


def record_plan(
    db: Store, batch_id: str, plan: dict[str, list[str]], replace: bool = False
) -> None:
    """Which units each chunk message carries (the watchdog's map for finding lost ones);
    `replace` when a submission sends every unit still missing."""
    with db.r.pipeline(transaction=True) as pipe:
        if replace:
            pipe.delete(k_plan(db, batch_id))
        if plan:
            pipe.hset(k_plan(db, batch_id), mapping={c: json.dumps(u) for c, u in plan.items()})
        pipe.execute()


def lost_units(db: Store, batch_id: str, lost_after_s: float) -> list[str]:
    """Units of the batch with no result that no message anywhere carries: not queued, not
    delivered (unacknowledged), not running. Kombu's Redis transport loses a message whose
    worker is killed between taking it from the queue and recording it as delivered."""
    plan = {c: json.loads(v) for c, v in db.r.hgetall(k_plan(db, batch_id)).items()}
    stored = set(db.r.hkeys(db.k_units(batch_id)))
    pending = {c: [u for u in ids if u not in stored] for c, ids in plan.items()}
    pending = {c: ids for c, ids in pending.items() if ids}
    if not pending:
        return []
    carried = _chunks_in_messages(db, batch_id)
    now = time.time()
    for chunk_id, beat in db.r.hgetall(k_beats(db, batch_id)).items():
        if now - float(beat) < lost_after_s:
            carried.add(chunk_id)
    return sorted(u for c, ids in pending.items() if c not in carried for u in ids)


def _chunks_in_messages(db: Store, batch_id: str) -> set[str]:
    found = set()
    for raw in db.r.hvals(UNACKED):
        chunk = _chunk_of(raw)
        if chunk and chunk[0] == batch_id:
            found.add(chunk[1])
    for queue in QUEUES:
        for raw in db.r.lrange(queue, 0, -1):
            with suppress(ValueError, TypeError):
                args = chunk_args(json.loads(raw))
                if args and args[0] == batch_id:
                    found.add(args[1])
    return found


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


def forget_chunks(db: Store, batch_id: str) -> dict[str, Any]:
    """Drop a batch's in-flight records (an embedded run that was interrupted starts over)."""
    removed = db.r.hgetall(k_chunks(db, batch_id))
    db.r.delete(k_chunks(db, batch_id), k_beats(db, batch_id), k_plan(db, batch_id))
    return dict(removed)
