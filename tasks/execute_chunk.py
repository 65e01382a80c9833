"""One delivery of a chunk: its units run in order, their results stored in groups — one fsynced
write for the results of several units (issue 23) — while a unit that kills its worker is still
the one blamed (docs/reliability.md).

Groups. Before a group of units runs, one write counts an attempt at each of them and records
them as the chunk's open group (`batch:{id}:groups`); that write is the one storing the previous
group's results, or the chunk's registration for the first. A group closes when all of it ran,
when FLUSH_AFTER_S passed since it opened, or when the chunk ends (its last write also forgets
the chunk). The next one is as many units as ran in FLUSH_AFTER_S in the last (at most
GROUP_MAX), so units of 50 ms or more are counted and stored one by one, as before groups. A
chunk of ten tiny units writes twice: its start and its ten results.

A worker that dies leaves its open group, units without results, to the chunk's next delivery
(tasks/store_results.py, CHUNK_START). One unit in it: that unit was running, and its count
stands, exactly as when each unit was counted alone. Several: one of them was running, the
others finished and their results died unstored, so they run again (results are keyed by unit
id: stored once, never twice). Which one killed the worker is not known, so their counts are
taken back and the crash is owed by the group: its units run one per group from then on, each
counted alone before it runs, and the first of them to kill its worker alone pays the owed
crash too. The first group after any crash is one unit. A unit that kills its worker every time
is blamed for every death, as before; units that shared its group are blamed for none. A worker
killed once by chance blames no one (before groups, the unit it was running got the count).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial

from tasks import liveness
from tasks.execute import UnitRun
from tasks.store import ChunkStart, GroupChange, Store
from tasks.trusted_deaths import blamed_on_agent
from tasks.workloads.base import Unit, UnitResult

# A group's results wait at most this long after it opened: what a worker that dies loses (the
# units then run again) and how late progress shows. Units of 50 ms or more go one by one.
FLUSH_AFTER_S = 0.05
GROUP_MAX = 10  # units counted ahead in one group

Record = Callable[[UnitRun], None]
# (unit, attempts at it counting this one, a way to store its result before its process ends)
RunUnit = Callable[[Unit, int, Record], UnitRun]
Counted = Callable[[Unit, UnitResult], None]


@dataclass
class ChunkEnd:
    skipped: bool  # the batch is gone or cancelled: nothing ran
    todo: int  # units that had no result when the chunk started
    all_stored: bool  # its last write found every unit of the batch stored


def run_in_groups(
    db: Store,
    batch_id: str,
    chunk_id: str,
    units: list[Unit],
    heartbeat_s: float,
    run: RunUnit,
    counted: Counted,
) -> ChunkEnd:
    """Run the chunk's units that have no result yet, beating while it runs; see the module."""
    ids = [u.id for u in units]
    token = os.urandom(6).hex()  # this delivery's: its writes are {token}:0, {token}:1, ...
    read = partial(db.read_chunk_start, batch_id=batch_id, chunk_id=chunk_id, unit_ids=ids)
    read = partial(read, group=GROUP_MAX, write=f"{token}:0")
    beat = liveness.heartbeat(db, batch_id, chunk_id, ids, units[0].queue, heartbeat_s, read)
    with beat as registered:
        start = ChunkStart.parse(registered.replies[0])
        if start.status in (None, "cancelled"):
            return ChunkEnd(skipped=True, todo=0, all_stored=False)
        todo = [u for u, stored in zip(units, start.stored, strict=True) if not stored]
        chunk = Groups(db, batch_id, chunk_id, registered, todo, start, token)
        chunk.run(run, counted)
    return ChunkEnd(skipped=False, todo=len(todo), all_stored=chunk.all_stored)


@dataclass
class Groups:
    """The chunk's units without results (`todo`), run in order. todo[first:counted] is the
    open group, counted before it ran; todo[next:counted] has not run yet, and the results of
    todo[first:next] wait in `pending`."""

    db: Store
    batch_id: str
    chunk_id: str
    beat: liveness.Beat
    todo: list[Unit]
    start: ChunkStart
    token: str
    writes: int = 0
    next: int = 0
    counted: int = 0
    first: int = 0  # where the open group started
    attempts: dict[str, int] = field(default_factory=dict)
    owed: set[str] = field(default_factory=set)  # units owing a dead worker's crash
    pending: list[UnitRun] = field(default_factory=list)
    opened: float = field(default_factory=time.monotonic)
    status: str | None = None
    all_stored: bool = False
    writing: bool = False
    marked: bool = True  # the chunk's open group is recorded in Redis

    def __post_init__(self) -> None:
        self.status = self.start.status
        self.counted = len(self.start.counts)
        self.marked = self.counted > 1 or bool(self.start.debt)  # CHUNK_START's rule
        self.attempts = {u.id: n for u, n in zip(self.todo, self.start.counts, strict=False)}
        self.owed = set(self.start.debt)

    def run(self, run: RunUnit, counted: Counted) -> None:
        try:
            while self.next < len(self.todo):
                unit, attempts = self.todo[self.next], self.attempts[self.todo[self.next].id]
                # A trusted agent that ended its worker in-process is blamed before it runs again.
                done = blamed_on_agent(self.db, unit, attempts) or run(unit, attempts, self.record)
                self.pending.append(done)
                self.next += 1
                counted(unit, done.result)
                if self.next == len(self.todo):
                    self.write(size=0, forget=True)
                elif self.next == self.counted or time.monotonic() - self.opened >= FLUSH_AFTER_S:
                    self.write(size=self.next_size())
                    if self.status == "cancelled":
                        self.write(size=0, forget=True)  # the rest unrun, their counts back
                        return
        except BaseException:
            # A unit's shutdown, a time limit: what finished is stored; the open group stays
            # open (the unit that was running and the rest) for the next delivery to settle.
            if self.pending and not self.writing:
                with suppress(Exception):
                    self.write(size=self.counted - self.next)
            raise

    def next_size(self) -> int:
        """As many units as ran in FLUSH_AFTER_S in the group just closed (at most GROUP_MAX):
        units that slow are counted and stored one by one. One for a unit owing a crash."""
        if self.todo[self.next].id in self.owed:
            return 1
        each = (time.monotonic() - self.opened) / (self.next - self.first)
        return max(1, min(GROUP_MAX, int(FLUSH_AFTER_S / each) if each > 0 else GROUP_MAX))

    def record(self, run: UnitRun) -> None:
        """The running unit ignored its deadline and its process ends: its error result and
        those waiting are stored now; the rest of the group is not owed by anyone."""
        self.pending.append(run)
        self.next += 1
        self.write(size=0)

    def write(self, size: int, forget: bool = False) -> None:
        """Store the pending results; the open group becomes the next `size` units (counted
        now where they were not yet, taken back where they leave it unrun)."""
        ids = [u.id for u in self.todo]
        end = min(self.next + size, len(ids))
        owed = [u for u in ids[self.next :] if u in self.owed]
        change = GroupChange(
            joining=ids[self.counted : end],
            leaving=ids[end : self.counted],
            group=ids[self.next : end],
            debt=owed if end > self.next else [],
            write=f"{self.token}:{self.writes + 1}",
        )
        runs = [(r.result, r.log) for r in self.pending]
        also = self.beat.forget_in if forget else None
        unmarked = not self.marked and not (change.group or change.leaving)
        chunk = None if unmarked else (self.chunk_id, change)  # no mark to change
        self.writing = True
        reply = self.db.save_units(self.batch_id, runs, chunk, also)
        self.marked = bool(change.group)  # NEXT_GROUP records a group, or drops the mark
        self.writing = False
        self.writes += 1
        self.beat.forgotten = self.beat.forgotten or forget
        self.attempts.update(zip(change.joining, reply.counts, strict=True))
        self.pending, self.counted, self.first, self.opened = [], end, self.next, time.monotonic()
        self.status, self.all_stored = reply.status, reply.all_stored
