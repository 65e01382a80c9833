"""Nightly benchmarks: cron entries that submit a batch spec, fired once per scheduled time
however many schedulers run (docs/schedules.md).

An entry is stored in Redis (`schedules` hash: name -> entry JSON). A scheduler (`arena beat`)
looks at every entry each tick: the latest scheduled time at or before now (within
`CATCH_UP_S`, so a scheduler that was down fires the missed run once when it returns, not a run
per missed night) is fired by whichever scheduler first sets its Redis key
`schedule:{name}:{slot}` (SET NX); the others skip it.

A firing is also idempotent on its own: the batch a slot submits carries the occasion
`name@slot` (part of its identity, not of its protocol), so the same slot always makes the same
batch identity. A second
firing for the same slot (a scheduler that died between the claim and the submission, an
operator's `arena schedule fire`) resumes that batch instead of duplicating it; a new night is
a new batch, so each night adds a point to every agent's history.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tasks.store import Store
from tasks.submit import Submission, submit
from tasks.validation import InputError, describe_validation_error
from tasks.workloads import validate_batch

log = logging.getLogger(__name__)
# How far back a scheduler still fires a scheduled time it finds unfired (a restart, a deploy).
CATCH_UP_S = 6 * 3600.0
# How long the claim of one scheduled time is kept (far longer than any catch-up window).
CLAIM_TTL_S = 14 * 24 * 3600


class ScheduleEntry(BaseModel):
    """One nightly benchmark: when (a cron expression, UTC) and what (a batch spec)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")]
    cron: str
    spec: dict[str, Any]
    enabled: bool = True

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, cron: str) -> str:
        if not croniter.is_valid(cron) or len(cron.split()) != 5:
            raise ValueError("a cron expression of five fields, e.g. '0 3 * * *' (03:00 UTC)")
        return cron

    def last_slot(self, now: datetime) -> datetime:
        """The latest scheduled time at or before `now`."""
        latest: datetime = croniter(self.cron, now + timedelta(seconds=1)).get_prev(datetime)
        return latest.astimezone(UTC)

    def next_slot(self, now: datetime) -> datetime:
        upcoming: datetime = croniter(self.cron, now).get_next(datetime)
        return upcoming.astimezone(UTC)


def slot_id(slot: datetime) -> str:
    return slot.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")


def spec_for_slot(entry: ScheduleEntry, slot: datetime) -> dict[str, Any]:
    """The entry's spec as this scheduled time's own run: the same protocol (seeds included, so
    nights compare like with like, on one board) under the occasion `name@slot`, which makes
    each night a new batch and the same night always the same one."""
    return {**entry.spec, "occasion": run_id(entry, slot)}


def run_id(entry: ScheduleEntry, slot: datetime) -> str:
    """The label a scheduled run is found by: `arena status nightly-mario@2026-11-26T03:00Z`."""
    return f"{entry.name}@{slot_id(slot)}"


def parse_entry(data: Any) -> ScheduleEntry:
    """An entry whose spec is a valid batch spec, or InputError naming the field."""
    try:
        entry = ScheduleEntry.model_validate(data)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc)) from None
    try:
        # Validated as `arena beat` will fire it, unattended: what it may name is a schedule's
        # (tasks/repo_policy.py), whoever adds it.
        validate_batch(spec_for_slot(entry, datetime.now(UTC)), asker="schedule")
    except InputError as exc:
        raise InputError(f"spec: {exc}") from None
    return entry


class Schedules:
    """The entries in Redis, and the claim of each scheduled time."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, entry: ScheduleEntry) -> None:
        self.store.put_schedule(entry.name, entry.model_dump_json())

    def remove(self, name: str) -> bool:
        return self.store.drop_schedule(name)

    def entries(self) -> list[ScheduleEntry]:
        raw = self.store.schedule_entries()
        return [ScheduleEntry.model_validate(json.loads(raw[name])) for name in sorted(raw)]

    def claim(self, entry: ScheduleEntry, slot: datetime) -> bool:
        """True for the one scheduler that fires this scheduled time."""
        return self.store.claim_schedule(entry.name, slot_id(slot), CLAIM_TTL_S)

    def fire(self, entry: ScheduleEntry, slot: datetime, **options: Any) -> Submission:
        """Submit (or resume) the batch of this scheduled time."""
        batch = validate_batch(spec_for_slot(entry, slot), asker="schedule")
        options.setdefault("default_priority", "scheduled")  # a nightly, not a person waiting
        return submit(self.store, batch, run_id=run_id(entry, slot), **options)

    def fire_due(self, now: datetime, **options: Any) -> list[tuple[str, Submission]]:
        """One tick: every enabled entry's latest scheduled time, if it is recent and no
        scheduler has claimed it yet. Returns (run id, submission) of what this call fired."""
        fired = []
        for entry in self.entries():
            slot = entry.last_slot(now)
            if not entry.enabled or (now - slot).total_seconds() > CATCH_UP_S:
                continue
            if not self.claim(entry, slot):
                continue
            try:
                fired.append((run_id(entry, slot), self.fire(entry, slot, **options)))
            except InputError as exc:  # an agent gone since the entry was added: said, skipped
                log.error("schedule %s at %s not submitted: %s", entry.name, slot_id(slot), exc)
        return fired
