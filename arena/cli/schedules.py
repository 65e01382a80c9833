"""`arena beat` (the scheduler of nightly benchmarks) and `arena schedule list|add|remove|fire`
(docs/schedules.md). Entries live in the cluster's Redis; any number of schedulers may run."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import click

from arena.service import schedules as service

log = logging.getLogger("arena.beat")


@click.command("beat")
@click.option(
    "--schedule-file",
    type=click.Path(dir_okay=False),
    help="Add (or replace) the file's entries in Redis first.",
)
@click.option(
    "--tick",
    type=click.FloatRange(min=0.05),
    default=30.0,
    show_default=True,
    help="Seconds between looks at the schedule.",
)
@click.option("--ticks", type=click.IntRange(min=1), help="Stop after this many (tests).")
def beat_command(schedule_file: str | None, tick: float, ticks: int | None) -> None:
    """Run the scheduler: fire each entry's scheduled time once, across every scheduler."""
    schedules, settings = service.open_schedules()
    if schedule_file:
        for entry in service.load_schedule_file(schedule_file):
            schedules.add(entry)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s beat: %(message)s")
    done = 0
    while ticks is None or done < ticks:
        now = datetime.now(UTC)
        for run, sub in schedules.fire_due(now, visibility_timeout_s=settings.visibility_timeout_s):
            log.info(
                "fired %s: batch %s, %s (%d units enqueued, %d reused)",
                run,
                sub.batch_id,
                sub.state,
                sub.enqueued,
                sub.reused,
            )
        done += 1
        if ticks is None or done < ticks:
            time.sleep(tick)


@click.group("schedule")
def schedule_group() -> None:
    """Nightly benchmarks: cron entries that submit a batch spec (docs/schedules.md)."""


@schedule_group.command("list")
def list_command() -> None:
    """Every entry, with its next scheduled time (UTC)."""
    schedules, _ = service.open_schedules()
    now = datetime.now(UTC)
    for entry in schedules.entries():
        state = "" if entry.enabled else "  (disabled)"
        upcoming = entry.next_slot(now).strftime("%Y-%m-%d %H:%M")
        click.echo(
            f"{entry.name:24} {entry.cron:16} next {upcoming} UTC  "
            f"{entry.spec.get('workload')}{state}"
        )


@schedule_group.command("add")
@click.argument("name")
@click.argument("spec", metavar="SPEC")
@click.option("--cron", required=True, help="Five fields, UTC, e.g. '0 3 * * *'.")
@click.option("--disabled", is_flag=True)
def add_command(name: str, spec: str, cron: str, disabled: bool) -> None:
    """Add (or replace) entry NAME: SPEC (a batch spec file) at CRON."""
    entry = service.add_entry(name, spec, cron, enabled=not disabled)
    click.echo(f"{name}: next at {entry.next_slot(datetime.now(UTC)):%Y-%m-%d %H:%M} UTC")


@schedule_group.command("remove")
@click.argument("name")
def remove_command(name: str) -> None:
    """Remove entry NAME (its batches and history stay)."""
    service.remove_entry(name)
    click.echo(f"{name}: removed")


@schedule_group.command("fire")
@click.argument("name")
def fire_command(name: str) -> None:
    """Submit entry NAME's latest scheduled run now (a run already made is resumed)."""
    run, sub = service.fire_now(name)
    click.echo(
        f"{run}: batch {sub.batch_id}, {sub.state} ({sub.enqueued} units enqueued, "
        f"{sub.reused} reused)"
    )
