"""A batch as its page shows it (docs/api.md, "The web page"): every unit in the batch's unit
order with what its stored result says (status, duration, worker, error kind and reason,
whether it printed anything: GET /batches/{id}/logs/{unit} has it), units with no result yet
as `waiting`, and the timeline picture's numbers (when each unit ran, on which worker)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from tasks.store import BatchInfo, Store
from tasks.workloads import stored_units
from tasks.workloads.base import ErrorKind, UnitResult

UnitStatus = Literal["ok", "error", "waiting"]


class UnitRow(BaseModel):
    unit_id: str
    agent: str
    item: str
    episode: int
    status: UnitStatus
    duration_s: float | None = None
    host: str | None = None
    error_kind: ErrorKind | None = None
    reason: str | None = None
    logged: bool = False  # it printed something: its log is at /batches/{id}/logs/{unit}


class Span(BaseModel):
    """One unit on the timeline: seconds since the batch was created."""

    unit_id: str
    agent: str
    host: str
    status: Literal["ok", "error"]
    start_s: float
    end_s: float


class TimelinePicture(BaseModel):
    batch_id: str
    status: str
    total: int
    completed: int
    errors: int
    spans: list[Span]  # units that ran, by start time


def unit_rows(db: Store, info: BatchInfo) -> list[UnitRow]:
    """Every unit of the batch in unit order (a resubmission's units are the same ids)."""
    stored = db.unit_results(info.id)
    _, units = stored_units(info.spec, info.identity)
    rows = []
    for unit in units:
        result = stored.get(unit.id)
        if result is None:
            rows.append(
                UnitRow(
                    unit_id=unit.id,
                    agent=unit.agent,
                    item=unit.item,
                    episode=unit.episode,
                    status="waiting",
                )
            )
        else:
            rows.append(row_of(result))
    return rows


def row_of(result: UnitResult) -> UnitRow:
    return UnitRow(
        unit_id=result.unit_id,
        agent=result.agent,
        item=result.item,
        episode=result.episode,
        status=result.status,
        duration_s=result.duration_s,
        host=result.host,
        error_kind=result.error_kind,
        reason=result.reason,
        logged=bool(result.log_tail),
    )


def seconds(stamp: str | None) -> float | None:
    """An ISO 8601 UTC time (utc_iso) as a unix time."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def timeline(db: Store, info: BatchInfo) -> TimelinePicture:
    """When each stored unit ran and where, from its result's provenance."""
    spans = []
    for result in db.unit_results(info.id).values():
        start, end = seconds(result.started_at), seconds(result.finished_at)
        if start is None or end is None:
            continue
        spans.append(
            Span(
                unit_id=result.unit_id,
                agent=result.agent,
                host=result.host or "unknown",
                status=result.status,
                start_s=round(start - info.created_at, 3),
                end_s=round(max(end, start) - info.created_at, 3),
            )
        )
    spans.sort(key=lambda s: (s.start_s, s.unit_id))
    return TimelinePicture(
        batch_id=info.id,
        status=info.status,
        total=info.total,
        completed=info.completed,
        errors=info.errors,
        spans=spans,
    )
