"""`arena queue`: the batches each pool is running and the ones waiting for a slot, by class and
team, in the order the scheduler serves them (arena/service/queue.py), and the workers whose
clock is off Redis's (tasks/clock.py)."""

from __future__ import annotations

import click
from rich.table import Table

from arena.cli.terminal import JSON_HELP, console, print_json
from arena.service import cluster
from arena.service.queue import PoolQueue, QueuedBatch, duration, read_queue
from tasks.clock import skewed_clocks
from tasks.redact import redact_raw
from tasks.settings import load_settings


@click.command("queue")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def queue_command(as_json: bool) -> None:
    """Running and waiting batches per pool, by class and team, with their share and ETA."""
    settings = load_settings()
    with cluster.open_store(settings) as db:
        view = read_queue(db)
        # Workers that checked within two sweeps' worth of ARENA_LOST_WORKER_S (tasks/clock.py)
        skewed = skewed_clocks(db, settings.clock_skew_warn_s, 2 * settings.lost_worker_s)
    if as_json:
        print_json(view.model_dump(mode="json"))
        return
    if not view.pools:
        click.echo("no batch is running or waiting")
    for pool in view.pools:
        console.print(pool_table(pool))
    for worker, skew in sorted(skewed.items()):
        click.echo(
            f"worker {worker}: clock {abs(skew):.1f}s {'ahead of' if skew > 0 else 'behind'} "
            f"Redis's (over ARENA_CLOCK_SKEW_WARN_S={settings.clock_skew_warn_s:g}s)"
        )


def pool_table(pool: PoolQueue) -> Table:
    running = sum(1 for b in pool.batches if b.state == "running")
    table = Table(
        title=f"pool {pool.pool}: {pool.slots} worker slot{'' if pool.slots == 1 else 's'}, "
        f"{running} running, "
        f"{len(pool.batches) - running} waiting",
        title_justify="left",
    )
    for name in ("class", "team", "batch", "state", "share", "done", "ETA"):
        table.add_column(name, justify="right" if name in ("share", "done", "ETA") else "left")
    for group in grouped(pool.batches):
        for index, place in enumerate(group):
            table.add_row(*row(place, index == 0), end_section=place is group[-1])
    return table


def grouped(batches: list[QueuedBatch]) -> list[list[QueuedBatch]]:
    """By class, then by team (teams and their batches in the order the scheduler serves
    them: a team comes where its first batch does)."""
    groups: dict[tuple[str, str | None], list[QueuedBatch]] = {}
    for place in batches:  # already in serving order, classes first
        groups.setdefault((place.priority, place.team), []).append(place)
    return list(groups.values())


def row(place: QueuedBatch, first_of_group: bool) -> list[str]:
    """A batch's cells; its class and team only on the first row of its group."""
    team = f"{place.team or '(none)'} ×{place.team_weight:g}"
    label = place.run_id or place.batch_id[:12]
    state = (
        f"running ({place.slots_held} out)"
        if place.state == "running"
        else f"waiting #{place.position}"
    )
    return [
        place.priority if first_of_group else "",
        redact_raw(team) if first_of_group else "",
        redact_raw(f"{label} ({place.workload}, weight {place.weight:g})"),
        state,
        f"{place.share:.0%}",
        f"{place.completed}/{place.total}",
        duration(place.eta_s),
    ]
