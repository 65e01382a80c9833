"""The cluster commands: run, submit, status, batches, cancel, leaderboard, worker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import redis
import yaml
from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from arena.embedded import embedded_cluster, embedded_redis, forget_broker_state
from arena.report import Report, report_from_store, write_logs
from arena.tables import leaderboard_view
from tasks.liveness import waiting_on_lost_workers
from tasks.redact import redact_text
from tasks.refusal import probe_writes, refused_writes
from tasks.settings import ArenaSettings, load_settings
from tasks.spec import load_spec_file
from tasks.store import FINISHED, BatchInfo, Store, as_entries
from tasks.validation import InputError, RunFailed
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import UnitResult, ValidatedBatch

if TYPE_CHECKING:
    from tasks.submit import Submission

console = Console()
err_console = Console(stderr=True)
POLL_S = 0.2
PROBE_S = 2.0  # how often a waiting client checks that Redis accepts writes


def load_batch(path: str) -> ValidatedBatch:
    try:
        data = load_spec_file(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML/JSON ({' '.join(str(exc).split())})") from None
    return validate_batch(data, asker="operator")  # the CLI's user is the operator


def connect(settings: ArenaSettings) -> Store:
    from tasks.app import configure, store

    configure(settings)
    db = store(settings, retry_s=0)
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


def wait(
    db: Store, batch_id: str, total: int, show: bool = True, settings: ArenaSettings | None = None
) -> BatchInfo:
    """Poll until the batch finishes, with a progress bar. A lost Redis, or one refusing writes,
    is waited for (one line says so) up to ARENA_REDIS_RETRY_S; a batch whose keys vanish ends
    the wait (RunFailed)."""
    settings = settings or load_settings()
    columns = (
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("units"), TimeElapsedColumn(),
    )  # fmt: skip
    outage = Outage(settings.redis_retry_s, batch_id)
    probed = time.monotonic()
    with Progress(*columns, console=console, disable=not show, transient=False) as bar:
        task = bar.add_task(f"batch {batch_id}", total=total)
        while True:
            try:
                done, status = db.progress(batch_id)
                note = waiting_on_lost_workers(db, batch_id, settings.lost_worker_s)
                # Reads pass where writes are refused: probe now and then, and at every poll
                # while refused (only a write tells when it is over).
                if (outage.refused and outage.since) or time.monotonic() - probed > PROBE_S:
                    probed = time.monotonic()
                    refused = probe_writes(db.r, db.p)
                    if refused:
                        outage.lost(refused, err_console, refused=True)
                        continue
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                outage.lost(f"lost Redis ({' '.join(str(exc).split())})", err_console)
                continue
            except redis.ResponseError as exc:
                refused = refused_writes(exc)  # up, but refusing: waited for like an outage
                if refused is None:
                    raise
                outage.lost(refused, err_console, refused=True)
                continue
            outage.back(err_console)
            if status is None:
                raise RunFailed(
                    f"batch {batch_id} vanished from Redis (its keys were deleted or flushed)"
                )
            description = f"batch {batch_id}" + (f" — {note}" if note else "")
            bar.update(task, completed=done, description=description)
            if status in FINISHED:
                break
            time.sleep(POLL_S)
    info = db.batch(batch_id)
    if info is None:
        raise RunFailed(f"batch {batch_id} vanished from Redis (its keys were deleted or flushed)")
    return info


class Outage:
    """A client's view of a Redis outage: one line when it starts, one when it ends, and a
    clear failure when it lasts too long."""

    def __init__(self, limit_s: float, batch_id: str) -> None:
        self.limit_s, self.batch_id = limit_s, batch_id
        self.since: float | None = None
        self.refused = False  # Redis up but refusing writes (tasks/refusal.py), not gone

    def lost(self, why: str, out: Console | None, refused: bool = False) -> None:
        """`why`: "lost Redis (…)", or the refusal's line (tasks/refusal.py)."""
        now = time.monotonic()
        if self.since is None:
            self.since, self.refused = now, refused
            if out:
                out.print(f"{why}; {'waiting' if refused else 'reconnecting'} for up to "
                          f"{self.limit_s:g}s", soft_wrap=True, highlight=False)  # fmt: skip
        if now - self.since > self.limit_s:
            raise RunFailed(
                f"{why} for over {self.limit_s:g}s; the batch goes on where Redis is: arena "
                f"status {self.batch_id}"
            )
        time.sleep(1.0)

    def back(self, out: Console | None) -> None:
        if self.since is not None and out:
            what = "Redis accepts writes again" if self.refused else "Redis is back"
            out.print(f"{what} after {time.monotonic() - self.since:.0f}s",
                      highlight=False)  # fmt: skip
        self.since = None


def leaderboard_table(db: Store, name: str) -> tuple[RenderableType, list[dict[str, Any]]]:
    """The board as its workload prints it (its rubric's table, or the generic one from the
    columns it declares: arena/tables.py) and as JSON."""
    rows = db.leaderboard(name)
    batch = db.batch(rows[0].batch) if rows else None
    workload = get_workload(batch.workload) if batch else None
    table, payload = leaderboard_view(name, rows, workload)
    text = workload.format_board(name, as_entries(rows)) if workload and rows else None
    return (text or table), payload


def print_board(board: RenderableType) -> None:
    """A rubric's own table (text) is printed as it is: long lines, never wrapped or cut."""
    if isinstance(board, str):
        click.echo(redact_text(board))
    else:
        console.print(board)


def error_summary(
    batch_id: str, status: str, reason: str | None, total: int, results: list[UnitResult]
) -> str | None:
    """One line for a batch that did not end clean: how many units failed and the first reasons
    (None when it is done with no errors)."""
    failed = [r for r in results if r.status == "error"]
    if status == "done" and not failed:
        return None
    reasons = list(dict.fromkeys(r.reason or "error" for r in failed))[:3]
    line = f"batch {batch_id} {status}" + (f" ({reason})" if reason else "")
    if failed:
        line += f": {len(failed)} of {total} units failed; first: " + " | ".join(
            r[:300] for r in reasons
        )
    return line


def report_errors(report: Report) -> str | None:
    return error_summary(
        report.batch_id, report.status, report.reason, report.counts.total, report.units
    )


def report(db: Store, info: BatchInfo, show: bool = True, boards: bool = True) -> None:
    if not show:
        return
    console.print(
        f"batch {info.id}: [bold]{info.status}[/] — {info.completed}/{info.total} units, "
        f"{info.errors} errors" + (f" ({redact_text(info.reason)})" if info.reason else ""),
        soft_wrap=True, highlight=False,
    )  # fmt: skip
    if info.status == "running":
        notes = [waiting_on_lost_workers(db, info.id, load_settings().lost_worker_s),
                 probe_writes(db.r, db.p)]  # fmt: skip
        for note in filter(None, notes):
            console.print(note, soft_wrap=True, highlight=False)
    if info.status == "done" and boards:
        for board in info.boards:
            table, _ = leaderboard_table(db, board)
            print_board(table)


@dataclass
class Finished:
    """A batch that ended, read back before the (maybe embedded) Redis goes away."""

    info: BatchInfo
    results: list[UnitResult]  # in unit order
    report: Report
    log_dir: Path | None
    submission: Submission  # what the submission found stored and what it enqueued


def run_batch(
    batch: ValidatedBatch,
    fresh: bool,
    workers: int | None,
    quiet: bool = False,
    run_id: str | None = None,
    boards: bool = True,
    serve_port: int | None = None,
) -> Finished:
    """`arena run`: on the cluster when ARENA_REDIS_URL is set, else on the embedded default.
    `boards`: print the leaderboards at the end (a race prints its own results instead).
    `serve_port`: the API and its page on that port meanwhile, and after, until Ctrl-C."""
    from arena.serve import serving

    settings = load_settings()
    if settings.redis_url:
        with serving(settings, serve_port):
            return _submit_and_wait(
                connect(settings), batch, fresh, settings, quiet, run_id=run_id, boards=boards
            )
    with embedded_cluster(settings.data_dir, workers or settings.workers) as url:
        forget_broker_state(url)  # whatever an interrupted run left queued is resumed below
        local = settings.model_copy(update={"redis_url": url})
        with serving(local, serve_port):
            return _submit_and_wait(
                connect(local), batch, fresh, local, quiet, resume_running=True, run_id=run_id,
                boards=boards,
            )  # fmt: skip


def _submit_and_wait(
    db: Store,
    batch: ValidatedBatch,
    fresh: bool,
    settings: ArenaSettings,
    quiet: bool,
    resume_running: bool = False,
    run_id: str | None = None,
    boards: bool = True,
) -> Finished:
    from tasks.submit import submit  # Celery is imported only when a command needs it

    sub = submit(
        db, batch, fresh, resume_running, visibility_timeout_s=settings.visibility_timeout_s,
        run_id=run_id,
    )  # fmt: skip
    if not quiet and sub.reused:
        console.print(
            f"resuming: {sub.reused} of {sub.total} unit results already stored", soft_wrap=True
        )
    info = wait(db, sub.batch_id, sub.total, show=not quiet, settings=settings)
    report(db, info, show=not quiet, boards=boards)
    stored = db.unit_results(sub.batch_id)
    units = get_workload(batch.spec.workload).expand(batch)
    results = [stored[u.id] for u in units if u.id in stored]
    log_dir = write_logs(log_folder(settings, sub.batch_id), db.logs(sub.batch_id), results)
    return Finished(info, results, report_from_store(db, sub.batch_id, log_dir), log_dir, sub)


def log_folder(settings: ArenaSettings, batch_id: str) -> Path:
    return settings.data_dir.resolve() / "logs" / batch_id


def print_json(data: Any) -> None:
    """JSON for machines, as every read prints it: redacted (tasks/redact.py)."""
    click.echo(redact_text(json.dumps(data, indent=2, default=str)))


def status_line(info: BatchInfo) -> str:
    label = f" run {info.run_id}" if info.run_id else ""
    return redact_text(
        f"{info.id}  {info.status:<9} {info.workload:<9} {info.completed:>6}/{info.total:<6} "
        f"errors {info.errors:<4} leaderboard {info.leaderboard}{label}"
    )
