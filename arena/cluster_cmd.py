"""The cluster commands: run, submit, status, batches, cancel, leaderboard, worker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
import redis
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from arena.embedded import embedded_cluster, embedded_redis, forget_broker_state
from tasks.settings import ArenaSettings
from tasks.spec import load_spec_file
from tasks.store import FINISHED, BatchInfo, Store, as_entries
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import UnitResult, ValidatedBatch

console = Console()
POLL_S = 0.2


def load_batch(path: str) -> ValidatedBatch:
    try:
        data = load_spec_file(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML/JSON ({' '.join(str(exc).split())})") from None
    return validate_batch(data)


def connect(settings: ArenaSettings) -> Store:
    from tasks.app import configure, store

    configure(settings)
    db = store(settings)
    try:
        db.r.ping()
    except (redis.ConnectionError, OSError) as exc:
        raise click.ClickException(f"cannot reach Redis at {settings.redis_url}: {exc}") from None
    return db


@contextmanager
def open_store(settings: ArenaSettings) -> Iterator[Store]:
    """The cluster's Redis, or (no ARENA_REDIS_URL) the embedded one, started to read it."""
    if settings.redis_url:
        yield connect(settings)
        return
    with embedded_redis(settings.data_dir) as url:
        yield connect(settings.model_copy(update={"redis_url": url}))


def wait(db: Store, batch_id: str, total: int, show: bool = True) -> BatchInfo:
    """Poll until the batch finishes, with a progress bar."""
    columns = (
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("units"), TimeElapsedColumn(),
    )  # fmt: skip
    with Progress(*columns, console=console, disable=not show, transient=False) as bar:
        task = bar.add_task(f"batch {batch_id}", total=total)
        while True:
            done, status = db.progress(batch_id)
            bar.update(task, completed=done)
            if status in FINISHED:
                break
            time.sleep(POLL_S)
    info = db.batch(batch_id)
    assert info is not None
    return info


STAT_COLUMNS = 6


def numeric_stats(stats: dict[str, Any]) -> dict[str, float]:
    """The numbers among an entry's stats, one level of nesting flattened (categories.strategic)."""
    flat: dict[str, float] = {}
    for key, value in stats.items():
        if isinstance(value, dict):
            flat |= {f"{key}.{k}": v for k, v in value.items() if isinstance(v, int | float)}
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[key] = value
    return flat


def leaderboard_table(db: Store, name: str) -> tuple[Table, list[dict[str, Any]]]:
    rows = db.leaderboard(name)
    batch = db.batch(rows[0].batch) if rows else None
    workload = get_workload(batch.workload) if batch else None
    ordered = workload.rank(as_entries(rows)) if workload else as_entries(rows)
    by_agent = {r.agent: r for r in rows}
    table = Table(title=f"Leaderboard: {name}")
    table.add_column("Rank", justify="right")
    table.add_column("Agent", no_wrap=True)
    table.add_column("Score", justify="right", no_wrap=True)
    # The first numbers of the workload's stats that do not repeat the score.
    columns = [
        k for k, v in numeric_stats(rows[0].stats).items() if rows and v != rows[0].score
    ][:STAT_COLUMNS] if rows else []  # fmt: skip
    for key in columns:
        table.add_column(key.split(".")[-1].replace("_", " "), justify="right")
    payload = []
    for rank, entry in enumerate(ordered, start=1):
        row = by_agent[entry.agent]
        stats = numeric_stats(row.stats)
        cells = [f"{stats[k]:,.4g}" if k in stats else "" for k in columns]
        table.add_row(str(rank), row.agent, f"{row.score:,.4f}", *cells)
        payload.append({"rank": rank, **row.model_dump()})
    return table, payload


def report(db: Store, info: BatchInfo, show: bool = True) -> None:
    if not show:
        return
    console.print(
        f"batch {info.id}: [bold]{info.status}[/] — {info.completed}/{info.total} units, "
        f"{info.errors} errors" + (f" ({info.reason})" if info.reason else ""),
        soft_wrap=True,
    )
    if info.status == "done":
        table, _ = leaderboard_table(db, info.leaderboard)
        console.print(table)


def run_batch(
    batch: ValidatedBatch, fresh: bool, workers: int | None, quiet: bool = False
) -> tuple[BatchInfo, list[UnitResult]]:
    """`arena run`: on the cluster when ARENA_REDIS_URL is set, else on the embedded default.

    Returns the finished batch and its unit results in unit order."""
    settings = ArenaSettings()
    if settings.redis_url:
        return _submit_and_wait(connect(settings), batch, fresh, settings, quiet)
    with embedded_cluster(settings.data_dir, workers or settings.workers) as url:
        forget_broker_state(url)  # whatever an interrupted run left queued is resumed below
        local = settings.model_copy(update={"redis_url": url})
        return _submit_and_wait(connect(local), batch, fresh, local, quiet, resume_running=True)


def _submit_and_wait(
    db: Store,
    batch: ValidatedBatch,
    fresh: bool,
    settings: ArenaSettings,
    quiet: bool,
    resume_running: bool = False,
) -> tuple[BatchInfo, list[UnitResult]]:
    from tasks.submit import submit  # Celery is imported only when a command needs it

    sub = submit(
        db, batch, fresh, resume_running, visibility_timeout_s=settings.visibility_timeout_s
    )
    if not quiet and sub.reused:
        console.print(
            f"resuming: {sub.reused} of {sub.total} unit results already stored", soft_wrap=True
        )
    info = wait(db, sub.batch_id, sub.total, show=not quiet)
    report(db, info, show=not quiet)
    stored = db.unit_results(sub.batch_id)
    units = get_workload(batch.spec.workload).expand(batch)
    return info, [stored[u.id] for u in units if u.id in stored]


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def status_line(info: BatchInfo) -> str:
    return (
        f"{info.id}  {info.status:<9} {info.workload:<9} {info.completed:>6}/{info.total:<6} "
        f"errors {info.errors:<4} leaderboard {info.leaderboard}"
    )
