"""The batch commands: run, submit, status, batches, cancel, leaderboard, logs, report."""

from __future__ import annotations

from pathlib import Path

import click

from arena.cli import terminal
from arena.cli.terminal import JSON_HELP, OUTPUT_PATH, exit_for, print_json
from arena.service import batches, boards, cluster
from arena.service.episodes_export import batch_csv, board_csv
from arena.service.queue import place_line, place_of
from arena.service.reports import check_output_path, write_report
from arena.service.waiting import wait
from tasks.settings import load_settings
from tasks.spec import PRIORITIES
from tasks.store import FINISHED
from tasks.validation import InputError
from tasks.workloads.base import ValidatedBatch

CSV_HELP = "Print every episode (unit) as CSV, one per row, for pandas."

REPLAY_HELP = (
    "Rerun every unit with llm agents answered from the replay cache, never their endpoints "
    "(the batch must have run before)."
)
PRIORITY = click.option(
    "--priority",
    type=click.Choice(PRIORITIES),
    help="The batch's class in its pool, over the spec's (interactive goes first).",
)


def with_priority(batch: ValidatedBatch, priority: str | None) -> ValidatedBatch:
    """--priority over the spec's (a run option: the batch's identity stays)."""
    if priority is None:
        return batch
    return batch.model_copy(update={"spec": batch.spec.model_copy(update={"priority": priority})})


@click.command("run")
@click.argument("spec", metavar="SPEC")
@click.option("--fresh", is_flag=True, help="Rerun every unit, ignoring stored results.")
@click.option("--replay-cache", is_flag=True, help=REPLAY_HELP)
@click.option("--workers", type=click.IntRange(min=1, max=1024), help="Embedded workers.")
@click.option("--quiet", is_flag=True, help="No progress bar or table.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--run-id", help="A label to find this run again (arena status LABEL).")
@PRIORITY
@OUTPUT_PATH
@click.option(
    "--serve",
    "serve_port",
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="Serve the API and its page on 127.0.0.1:PORT meanwhile, and after the batch until "
    "Ctrl-C.",
)
def run_command(
    spec: str,
    fresh: bool,
    replay_cache: bool,
    workers: int | None,
    quiet: bool,
    as_json: bool,
    run_id: str | None,
    priority: str | None,
    output_path: Path | None,
    serve_port: int | None,
) -> None:
    """Run a batch and print its leaderboard (embedded cluster unless ARENA_REDIS_URL is set)."""
    load_settings()  # a bad setting is refused before anything starts
    batches.check_run_id(run_id)
    target = check_output_path(output_path) if output_path else None
    batch = with_priority(batches.load_batch(spec), priority)
    is_race = batch.spec.workload == "race"  # its table, not its board (arena race run's)
    finished = terminal.run_and_show(
        batch,
        fresh,
        workers,
        quiet or as_json,
        run_id=run_id,
        show_boards=not is_race,
        serve_port=serve_port,
        replay_cache=replay_cache,
    )
    if target:
        written = write_report(finished.report, target)
        if not (quiet or as_json):
            click.echo(f"report: {written}")
    if as_json:
        summary = finished.report.model_dump(mode="json", exclude={"units"})
        print_json({**summary, "submission": finished.submission.model_dump()})
    elif is_race and not quiet:
        exit_for(terminal.show_race(finished, as_json=False))
    exit_for(batches.report_errors(finished.report))


@click.command("submit")
@click.argument("spec", metavar="SPEC")
@click.option("--fresh", is_flag=True, help="Rerun every unit, ignoring stored results.")
@click.option("--run-id", help="A label to find this run again (arena status LABEL).")
@PRIORITY
def submit_command(spec: str, fresh: bool, run_id: str | None, priority: str | None) -> None:
    """Queue a batch on the cluster (no ARENA_REDIS_URL: the embedded cluster running on the
    data folder, e.g. `arena api`'s); prints the batch id."""
    settings = load_settings()
    batches.check_run_id(run_id)
    batch = with_priority(batches.load_batch(spec), priority)
    with cluster.open_store(settings, start=False) as db:
        sub = batches.submit_batch(db, settings, batch, fresh, run_id)
    click.echo(sub.batch_id)
    click.echo(
        f"{sub.state}: {sub.enqueued} units enqueued, {sub.reused} reused, "
        f"leaderboard {sub.leaderboard}",
        err=True,
    )


@click.command("status")
@click.argument("batch_ref", metavar="ID")
@click.option("--watch", is_flag=True, help="Follow with a progress bar until it finishes.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def status_command(batch_ref: str, watch: bool, as_json: bool) -> None:
    """A batch's state, progress and summary (ID: a batch id, a unique prefix, or a run id);
    while it runs, its class, team, share of its pool or place in line, and ETA. Exits 1 when
    the batch ended with errors, failed or was cancelled."""
    settings = load_settings()
    with cluster.open_store(settings) as db:
        info = batches.find_batch(db, batch_ref)
        if watch and info.status not in FINISHED:
            with terminal.ProgressBar(info.id, info.total, show=not as_json) as bar:
                info = wait(db, info.id, settings, bar)
        place = place_of(db, info.id) if info.status not in FINISHED else None
        if as_json:
            shared = place.model_dump(mode="json") if place else None
            print_json({**info.model_dump(mode="json"), "queue": shared})
        else:
            line = place_line(place)
            notes = batches.running_notes(db, info, settings)
            terminal.print_batch(info, [line, *notes] if line else notes)
            for board in boards.boards_made(db, info.boards) if info.status == "done" else []:
                terminal.print_board(board)
        if info.status in FINISHED:
            exit_for(batches.finished_errors(db, info))


@click.command("batches")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def batches_command(limit: int, as_json: bool) -> None:
    """Recent batches, newest first."""
    with cluster.open_store(load_settings()) as db:
        infos = batches.recent_batches(db, limit)
    if as_json:
        print_json([i.model_dump(mode="json", exclude={"spec"}) for i in infos])
    for info in [] if as_json else infos:
        click.echo(terminal.status_line(info))


@click.command("cancel")
@click.argument("batch_ref", metavar="ID")
def cancel_command(batch_ref: str) -> None:
    """Stop a running batch: queued units are skipped, the leaderboard is left as it was.
    Exits 1 if the batch had already ended."""
    with cluster.open_store(load_settings()) as db:
        batch_id, outcome = batches.cancel_batch(db, batch_ref)
    if outcome != "cancelled":
        click.echo(
            f"arena: batch {batch_id} already ended ({outcome}); nothing to cancel", err=True
        )
        raise SystemExit(1)
    click.echo(f"{batch_id}: cancelled")


@click.command("leaderboard")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--csv", "as_csv", is_flag=True, help=CSV_HELP)
def leaderboard_command(name: str | None, as_json: bool, as_csv: bool) -> None:
    """A leaderboard (no NAME: list them)."""
    with cluster.open_store(load_settings()) as db:
        if name is None:
            names = db.leaderboard_names()
            print_json(names) if as_json else click.echo("\n".join(names))
            return
        if as_csv:
            click.echo(board_csv(db, name), nl=False)
            return
        board = boards.read_board(db, name)
    if as_json:
        print_json({"name": name, "entries": board.payload()})
    else:
        terminal.print_board(board)


@click.command("logs")
@click.argument("batch_ref", metavar="ID")
@click.argument("agent", required=False)
def logs_command(batch_ref: str, agent: str | None) -> None:
    """What each unit of a batch printed (stdout and stderr), optionally one agent's units."""
    terminal.show_logs(batch_ref, agent)


@click.command("report")
@click.argument("batch_ref", metavar="ID")
@OUTPUT_PATH
@click.option("--csv", "as_csv", is_flag=True, help=CSV_HELP)
def report_command(batch_ref: str, output_path: Path | None, as_csv: bool) -> None:
    """A batch's report (JSON: config, versions, per-agent and per-unit results)."""
    settings = load_settings()
    target = check_output_path(output_path) if output_path else None
    if as_csv and target:
        raise InputError("--csv: prints to standard output, not with --output-path (> file.csv)")
    with cluster.open_store(settings) as db:
        if as_csv:  # the units only, one row each
            click.echo(batch_csv(db, db.resolve(batch_ref)), nl=False)
            return
        report = batches.stored_report(settings, db, db.resolve(batch_ref))
    if target:
        click.echo(str(write_report(report, target)))
    else:
        print_json(report.model_dump(mode="json"))


COMMANDS = [
    run_command,
    submit_command,
    status_command,
    batches_command,
    cancel_command,
    leaderboard_command,
    logs_command,
    report_command,
]
