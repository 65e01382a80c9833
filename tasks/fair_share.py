"""Fair share of a pool between its running batches (docs/architecture.md, "Sharing").

Each batch's chunk messages wait in Redis (the Store's `pool:{queue}:waiting:{batch}`) instead
of the broker's queue; a bounded window of them is given to the broker (`out`): at most the
pool's live worker slots plus ARENA_QUEUE_HEADROOM. Each chunk that ends releases the next,
picked by stride scheduling: the highest class with work waiting first (interactive, scheduled,
bulk), in it the team with the lowest pass, in that team the batch with the lowest pass; the
pick's passes grow by its chunk's estimated seconds over the team's and the batch's weight, and
are set right with the chunk's real seconds when it ends. The picking is one Lua script
(tasks/lua/), atomic in Redis; the caller publishes what it popped.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tasks.spec import PRIORITIES, Priority
from tasks.validation import SpecRefused

# What a unit is assumed to take before the batch's first chunk ended (then: its EWMA).
DEFAULT_UNIT_S = 1.0


class Share(NamedTuple):
    """What a batch joins its pools with."""

    priority: Priority
    team: str | None
    team_weight: float
    weight: float


class PoolEntry(NamedTuple):
    """One running batch of a pool as the display reads it (Store.pool_batches)."""

    batch_id: str
    priority: Priority
    team: str | None
    team_weight: float
    weight: float
    waiting_chunks: int  # in Redis, not yet given to the broker
    waiting_units: int
    out_chunks: int  # given to the broker (queued, delivered or running) and not finished
    est_chunk_s: float  # one chunk's estimated seconds (an EWMA of its finished chunks)
    team_pass: float  # stride scheduling: the lowest goes next (within its class)
    batch_pass: float  # within its team and class


def priority_of(
    asked: Priority | None, default: Priority, units: int, interactive_max: int
) -> Priority:
    """The class a batch runs in. An interactive batch of more than `interactive_max` units is
    refused when its spec asked for it, and runs as `scheduled` when interactive was only the
    front door's default."""
    chosen = asked or default
    if chosen == "interactive" and units > interactive_max:
        if asked == "interactive":
            raise SpecRefused(
                f"priority: interactive batches have at most {interactive_max} units "
                f"(ARENA_INTERACTIVE_MAX_UNITS); this one has {units}: use scheduled or bulk"
            )
        return "scheduled"
    return chosen


def entry_from(batch_id: str, stored: dict[str, Any], counts: tuple[int, int, int]) -> PoolEntry:
    """A PoolEntry from the JSON the scripts keep and (waiting chunks, waiting units, out)."""
    team_pass = float(stored.get("tp", 0.0))
    return PoolEntry(
        batch_id=batch_id,
        priority=as_priority(stored.get("p")),
        team=stored.get("t") or None,
        team_weight=float(stored["tw"]),
        weight=float(stored["w"]),
        waiting_chunks=counts[0],
        waiting_units=counts[1],
        out_chunks=counts[2],
        est_chunk_s=float(stored["u"]) * int(stored["cs"]),
        team_pass=team_pass,
        batch_pass=float(stored["pass"]),
    )


def as_priority(value: object) -> Priority:
    """A stored class read back (anything else: the default, scheduled)."""
    return next((p for p in PRIORITIES if p == value), "scheduled")


def class_rank(priority: str) -> int:
    return PRIORITIES.index(priority) if priority in PRIORITIES else len(PRIORITIES)
