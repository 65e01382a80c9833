"""What every command prints the same way: JSON for machines, boards, a batch's progress bar and
its closing lines, and the exit status of a batch that did not end clean."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from arena.cli.tables import leaderboard_table
from arena.service import races as race_results
from arena.service.batches import report_errors, unit_logs
from arena.service.boards import Board
from arena.service.cluster import Finished, open_store, run_batch
from arena.web.serve import serving
from tasks.redact import redact_raw, redact_text, redact_value
from tasks.settings import load_settings
from tasks.store import BatchInfo
from tasks.workloads.base import ValidatedBatch
from tasks.workloads.race_view import format_results

if TYPE_CHECKING:
    from tasks.submit import Submission

console = Console()
err_console = Console(stderr=True)
JSON_HELP = "Print JSON for machines (no progress bar)."
OUTPUT_PATH = click.option(
    "--output-path",
    type=click.Path(path_type=Path),
    help="Write the batch's report (JSON): a FILE.json, or a folder for arena-<batch>.json.",
)


def print_json(data: Any) -> None:
    """JSON for machines, as every read prints it: redacted (tasks/redact.py)."""
    click.echo(redact_text(json.dumps(redact_value(data), indent=2, default=str)))


def print_board(board: Board) -> None:
    """A rubric's own table (text) is printed as it is: long lines, never wrapped or cut."""
    text = board.rubric_text()
    if text is not None:
        click.echo(redact_raw(text))
    else:
        console.print(leaderboard_table(board))


def print_batch(info: BatchInfo, notes: Sequence[str] = ()) -> None:
    """A batch's state in a line, and what holds it up while it runs."""
    reason = f" ({redact_raw(info.reason)})" if info.reason else ""
    console.print(
        f"batch {info.id}: [bold]{info.status}[/] — {info.completed}/{info.total} units, "
        f"{info.errors} errors{reason}",
        soft_wrap=True,
        highlight=False,
    )
    for note in notes:
        console.print(note, soft_wrap=True, highlight=False)


def status_line(info: BatchInfo) -> str:
    label = f" run {info.run_id}" if info.run_id else ""
    label += f" team {info.team}" if info.team else ""
    return redact_raw(
        f"{info.id}  {info.status:<9} {info.workload:<9} {info.completed:>6}/{info.total:<6} "
        f"errors {info.errors:<4} leaderboard {info.leaderboard}{label}"
    )


def follow(show: bool) -> Callable[[Submission], ProgressBar]:
    """How `arena run` follows the batch it submitted (service.cluster.Follow)."""

    def progress_bar(sub: Submission) -> ProgressBar:
        if show and sub.reused:
            console.print(
                f"resuming: {sub.reused} of {sub.total} unit results already stored",
                soft_wrap=True,
            )
        return ProgressBar(sub.batch_id, sub.total, show)

    return progress_bar


def exit_for(summary: str | None) -> None:
    """A batch with errors (or one that failed or was cancelled) ends with status 1."""
    if summary:
        click.echo(f"arena: {redact_raw(summary)}", err=True)
        raise SystemExit(1)


def run_and_show(
    batch: ValidatedBatch,
    fresh: bool,
    workers: int | None,
    quiet: bool,
    run_id: str | None = None,
    show_boards: bool = True,
    serve_port: int | None = None,
    replay_cache: bool = False,
) -> Finished:
    """Run a batch with a progress bar (none when `quiet`), then print how it ended and, when
    `show_boards`, its leaderboards. `serve_port`: the API and its page on that port meanwhile,
    and after the batch until Ctrl-C."""
    finished = run_batch(
        batch,
        fresh,
        workers,
        follow(show=not quiet),
        run_id=run_id,
        beside=(lambda settings: serving(settings, serve_port)) if serve_port else None,
        replay_cache=replay_cache,
    )
    if not quiet:
        print_batch(finished.info)
        for board in finished.boards if show_boards else []:
            print_board(board)
    return finished


def show_logs(batch_ref: str, agent: str | None) -> None:
    with open_store(load_settings()) as db:
        batch_id, logs = unit_logs(db, batch_ref, agent)
    for log in logs:
        click.echo(click.style(f"── {log.unit_id} ({log.status}) ", bold=True).ljust(72, "─"))
        click.echo(redact_raw(log.text.rstrip("\n")))
    if not logs:
        whose = f"agent {agent}" if agent else "any unit"
        click.echo(f"no output captured for {whose} in batch {batch_id}", err=True)


class ProgressBar:
    """A batch followed in the terminal (service.waiting.Watcher): a progress bar unless
    `show` is off; the lines about an outage go to stderr either way."""

    def __init__(self, batch_id: str, total: int, show: bool = True) -> None:
        self.batch_id, self.show = batch_id, show
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("units"),
            TimeElapsedColumn(),
        )
        self.bar = Progress(*columns, console=console, disable=not show, transient=False)
        self.task = self.bar.add_task(f"batch {batch_id}", total=total)

    def __enter__(self) -> ProgressBar:
        self.bar.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.bar.__exit__(kind, exc, tb)

    def progress(self, done: int, note: str | None) -> None:
        description = f"batch {self.batch_id}" + (f" — {note}" if note else "")
        self.bar.update(self.task, completed=done, description=description)

    def say(self, line: str) -> None:
        err_console.print(line, soft_wrap=True, highlight=False)


def show_race(finished: Finished, as_json: bool) -> str | None:
    """A race's table (or its JSON) once it ended, for `arena race run` and `arena run`; the
    line to exit 1 with: the race failed at the start (one line, not each unit) or units erred."""
    summary = finished.info.summary if finished.info.status == "done" else None
    if summary:
        if as_json:
            print_json(race_results.results_payload(finished.info))
        else:
            click.echo(format_results(summary, finished.info.id))
    failed = race_results.failed_line(finished.info.id, summary or {})
    return failed or report_errors(finished.report)
