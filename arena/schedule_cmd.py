"""`arena beat` (the scheduler of nightly benchmarks) and `arena schedule list|add|remove|fire`
(docs/schedules.md). Entries live in the cluster's Redis; any number of schedulers may run."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from arena import cluster_cmd
from arena.batch_cmds import cluster_settings
from tasks.spec import load_spec_file
from tasks.validation import InputError

log = logging.getLogger("arena.beat")


def _schedules() -> Any:
    from tasks.schedules import Schedules

    settings = cluster_settings("schedule")
    return Schedules(cluster_cmd.connect(settings)), settings


def load_schedule_file(path: str) -> list[Any]:
    """`entries: [{name, cron, spec: path-or-mapping, enabled}]`; a spec path is read relative
    to the schedule file."""
    from tasks.schedules import parse_entry

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
            entries.append(parse_entry(raw))
        except InputError as exc:
            raise InputError(f"{path}: entries[{index}].{exc}") from None
    return entries


@click.command("beat")
@click.option("--schedule-file", type=click.Path(dir_okay=False),
              help="Add (or replace) the file's entries in Redis first.")  # fmt: skip
@click.option("--tick", type=click.FloatRange(min=0.05), default=30.0, show_default=True,
              help="Seconds between looks at the schedule.")  # fmt: skip
@click.option("--ticks", type=click.IntRange(min=1), help="Stop after this many (tests).")
def beat_command(schedule_file: str | None, tick: float, ticks: int | None) -> None:
    """Run the scheduler: fire each entry's scheduled time once, across every scheduler."""
    schedules, settings = _schedules()
    if schedule_file:
        for entry in load_schedule_file(schedule_file):
            schedules.add(entry)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s beat: %(message)s")
    done = 0
    while ticks is None or done < ticks:
        now = datetime.now(UTC)
        for run, sub in schedules.fire_due(now, visibility_timeout_s=settings.visibility_timeout_s):
            log.info("fired %s: batch %s, %s (%d units enqueued, %d reused)",
                     run, sub.batch_id, sub.state, sub.enqueued, sub.reused)  # fmt: skip
        done += 1
        if ticks is None or done < ticks:
            time.sleep(tick)


@click.group("schedule")
def schedule_group() -> None:
    """Nightly benchmarks: cron entries that submit a batch spec (docs/schedules.md)."""


@schedule_group.command("list")
def list_command() -> None:
    """Every entry, with its next scheduled time (UTC)."""
    schedules, _ = _schedules()
    now = datetime.now(UTC)
    for entry in schedules.entries():
        state = "" if entry.enabled else "  (disabled)"
        upcoming = entry.next_slot(now).strftime("%Y-%m-%d %H:%M")
        click.echo(f"{entry.name:24} {entry.cron:16} next {upcoming} UTC  "
                   f"{entry.spec.get('workload')}{state}")  # fmt: skip


@schedule_group.command("add")
@click.argument("name")
@click.argument("spec", metavar="SPEC")
@click.option("--cron", required=True, help="Five fields, UTC, e.g. '0 3 * * *'.")
@click.option("--disabled", is_flag=True)
def add_command(name: str, spec: str, cron: str, disabled: bool) -> None:
    """Add (or replace) entry NAME: SPEC (a batch spec file) at CRON."""
    from tasks.schedules import parse_entry

    entry = parse_entry(
        {"name": name, "cron": cron, "spec": load_spec_file(spec), "enabled": not disabled}
    )
    schedules, _ = _schedules()
    schedules.add(entry)
    click.echo(f"{name}: next at {entry.next_slot(datetime.now(UTC)):%Y-%m-%d %H:%M} UTC")


@schedule_group.command("remove")
@click.argument("name")
def remove_command(name: str) -> None:
    """Remove entry NAME (its batches and history stay)."""
    schedules, _ = _schedules()
    if not schedules.remove(name):
        raise InputError(f"schedule: no entry {name!r}")
    click.echo(f"{name}: removed")


@schedule_group.command("fire")
@click.argument("name")
def fire_command(name: str) -> None:
    """Submit entry NAME's latest scheduled run now (a run already made is resumed)."""
    schedules, settings = _schedules()
    entry = next((e for e in schedules.entries() if e.name == name), None)
    if entry is None:
        raise InputError(f"schedule: no entry {name!r}")
    from tasks.schedules import run_id

    slot = entry.last_slot(datetime.now(UTC))
    sub = schedules.fire(entry, slot, visibility_timeout_s=settings.visibility_timeout_s)
    click.echo(f"{run_id(entry, slot)}: batch {sub.batch_id}, {sub.state} "
               f"({sub.enqueued} units enqueued, {sub.reused} reused)")  # fmt: skip
