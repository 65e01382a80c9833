"""What a waiting user sees (`arena queue`, `arena status`, the batch page, GET /queue): for each
batch a pool is sharing (tasks/fair_share.py), its class, team, weight, whether it holds worker
slots now (running) or none yet (waiting), its share of the pool, its place in the order the
scheduler serves waiting batches, its progress and an estimate of when it ends."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from tasks.broker import QUEUES
from tasks.fair_share import PoolEntry, class_rank
from tasks.records import BatchInfo
from tasks.store import Store

QueueState = Literal["running", "waiting"]


class QueuedBatch(BaseModel):
    """One batch as the pool shares it."""

    batch_id: str
    run_id: str | None = None
    workload: str
    pool: str  # the queue whose worker processes it shares (cpu, gpu)
    priority: str  # its class: interactive, scheduled, bulk
    team: str | None
    team_weight: float
    weight: float
    state: QueueState  # running: it holds worker slots now; waiting: none yet
    slots_held: int  # its chunks out: on a worker, or next in the broker's queue
    share: float  # slots_held over the pool's slots (or its chunks out, when more): 0 to 1
    position: int | None  # 1 = served next among the waiting batches; None while running
    completed: int
    total: int
    seconds_per_unit: float | None  # the mean of its units that ended; None before one did
    eta_s: float | None  # seconds until it ends at today's share; None: unknown
    submitted_at: float


class PoolQueue(BaseModel):
    pool: str
    slots: int  # worker processes registered on the pool
    batches: list[QueuedBatch]  # in the order the scheduler serves them (class first)


class QueueView(BaseModel):
    at: float  # unix time of the reading
    pools: list[PoolQueue]


def read_queue(db: Store, pools: Sequence[str] = QUEUES) -> QueueView:
    """Every pool's running and waiting batches (a pool with neither is left out)."""
    now = time.time()
    shown = []
    for pool in pools:
        entries = db.pool_batches(pool)
        if entries:
            slots = db.pool_slots(pool)
            placed = _placed(db, pool, entries, slots)
            shown.append(PoolQueue(pool=pool, slots=slots, batches=placed))
    return QueueView(at=now, pools=shown)


def place_of(db: Store, batch_id: str) -> QueuedBatch | None:
    """The batch's place in its pool; None when no pool holds it (it ended, or never waited)."""
    pool = db.pool_of(batch_id)
    if pool is None:
        return None
    entries = db.pool_batches(pool)
    placed = _placed(db, pool, entries, db.pool_slots(pool))
    return next((b for b in placed if b.batch_id == batch_id), None)


def _placed(db: Store, pool: str, entries: Sequence[PoolEntry], slots: int) -> list[QueuedBatch]:
    """`entries` placed in the scheduler's order (class, team pass, batch pass, then arrival,
    as tasks/lua/pool.lua picks): a batch with no chunk out is waiting, numbered in that order.
    """
    # The broker may hold a little more than the slots (ARENA_QUEUE_HEADROOM): shares are of
    # whichever is larger, so they never add up past the whole pool.
    room = max(slots, sum(e.out_chunks for e in entries))
    infos = {e.batch_id: db.batch(e.batch_id) for e in entries}
    running = [(e, i) for e in entries if (i := infos[e.batch_id]) and i.status == "running"]
    # Ties of passes go to the batch that came first (the scheduler's arrival order).
    running.sort(key=lambda pair: serve_key(*pair))
    placed, waiting = [], 0
    for entry, info in running:  # a batch that ended is dropped by the pool's next release
        holds = entry.out_chunks > 0
        waiting += 0 if holds else 1
        share = entry.out_chunks / room if room else 0.0
        where = Where(pool, slots, share, None if holds else waiting)
        placed.append(_queued(db, entry, info, where))
    return placed


def serve_key(entry: PoolEntry, info: BatchInfo) -> tuple[int, float, float, float]:
    return class_rank(entry.priority), entry.team_pass, entry.batch_pass, info.created_at


@dataclass(frozen=True)
class Where:
    pool: str
    slots: int  # the pool's live worker slots
    share: float  # of the pool, 0 to 1
    position: int | None  # among the waiting batches; None: running


def _queued(db: Store, entry: PoolEntry, info: BatchInfo, where: Where) -> QueuedBatch:
    per_unit = seconds_per_unit(db, info)
    return QueuedBatch(
        batch_id=info.id,
        run_id=info.run_id,
        workload=info.workload,
        pool=where.pool,
        priority=entry.priority,
        team=entry.team,
        team_weight=entry.team_weight,
        weight=entry.weight,
        state="running" if where.position is None else "waiting",
        slots_held=entry.out_chunks,
        share=round(where.share, 4),
        position=where.position,
        completed=info.completed,
        total=info.total,
        seconds_per_unit=per_unit,
        eta_s=eta_s(info.total - info.completed, per_unit, where.share * where.slots),
        submitted_at=info.created_at,
    )


def seconds_per_unit(db: Store, info: BatchInfo) -> float | None:
    """The mean duration of the batch's units that ended (None before one did). It reads every
    stored result: a display's cost, paid per reading, never by the workers."""
    if info.completed == 0:
        return None
    durations = [r.duration_s for r in db.unit_results(info.id).values()]
    return sum(durations) / len(durations) if durations else None


def eta_s(remaining: int, per_unit: float | None, slots_used: float) -> float | None:
    """Remaining units × seconds per unit ÷ the worker slots it has now (its share of the
    pool's): unknown before a unit ended, and while it has none (it waits for the batches
    ahead, or no worker is there)."""
    if per_unit is None or slots_used <= 0:
        return None
    return round(remaining * per_unit / slots_used, 1)


def duration(seconds: float | None) -> str:
    """An estimate for people: 'unknown', '40s', '12m', '3h05m'."""
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours}h{minutes:02d}m"


def place_line(place: QueuedBatch | None) -> str | None:
    """The one line `arena status` and the batch page show (None: not in a pool)."""
    if place is None:
        return None
    team = place.team or "no team"
    where = (
        f"running, {place.share:.0%} of the {place.pool} pool ({place.slots_held} chunks out)"
        if place.state == "running"
        else f"waiting, #{place.position} in the {place.pool} pool"
    )
    return (
        f"{place.priority} · team {team} (weight {place.team_weight:g}) · batch weight "
        f"{place.weight:g} · {where} · ends in {duration(place.eta_s)}"
    )
