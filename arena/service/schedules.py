"""Nightly benchmarks as the front doors handle them (docs/schedules.md): a schedule file read
into entries, and the schedules of the cluster's Redis.

tasks.schedules submits batches, so it brings Celery (and, through the unit tasks, the worker's
metrics): it is imported when a schedule command runs, not when the `arena` CLI starts (a
worker must set up its multiprocess metrics before they are created)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.service.cluster import cluster_settings, connect
from tasks.settings import ArenaSettings
from tasks.spec import load_spec_file
from tasks.validation import InputError

if TYPE_CHECKING:
    from tasks.schedules import ScheduleEntry, Schedules
    from tasks.submit import Submission


def open_schedules() -> tuple[Schedules, ArenaSettings]:
    """The schedules of the cluster's Redis (ARENA_REDIS_URL required)."""
    from tasks.schedules import Schedules  # see the module's docstring

    settings = cluster_settings("schedule")
    return Schedules(connect(settings)), settings


def parse(raw: Any) -> ScheduleEntry:
    from tasks.schedules import parse_entry  # see the module's docstring

    return parse_entry(raw)


def load_schedule_file(path: str) -> list[ScheduleEntry]:
    """`entries: [{name, cron, spec: path-or-mapping, enabled}]`; a spec path is read relative
    to the schedule file."""
    data = load_spec_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise InputError(f"{path}: expected a mapping with a list `entries`")
    entries = []
    for index, raw in enumerate(data["entries"]):
        if not isinstance(raw, dict):
            raise InputError(f"{path}: entries[{index}]: expected a mapping")
        if isinstance(raw.get("spec"), str):
            raw = {**raw, "spec": load_spec_file(str(Path(path).parent / raw["spec"]))}
        try:
            entries.append(parse(raw))
        except InputError as exc:
            raise InputError(f"{path}: entries[{index}].{exc}") from None
    return entries


def add_entry(name: str, spec_path: str, cron: str, enabled: bool) -> ScheduleEntry:
    """Add (or replace) entry NAME: a batch spec file at CRON."""
    entry = parse(
        {"name": name, "cron": cron, "spec": load_spec_file(spec_path), "enabled": enabled}
    )
    schedules, _ = open_schedules()
    schedules.add(entry)
    return entry


def remove_entry(name: str) -> None:
    schedules, _ = open_schedules()
    if not schedules.remove(name):
        raise InputError(f"schedule: no entry {name!r}")


def fire_now(name: str) -> tuple[str, Submission]:
    """Submit entry NAME's latest scheduled run now: its run id and the submission."""
    from tasks.schedules import run_id  # see the module's docstring

    schedules, settings = open_schedules()
    entry = next((e for e in schedules.entries() if e.name == name), None)
    if entry is None:
        raise InputError(f"schedule: no entry {name!r}")
    slot = entry.last_slot(datetime.now(UTC))
    sub = schedules.fire(entry, slot, visibility_timeout_s=settings.visibility_timeout_s)
    return run_id(entry, slot), sub
