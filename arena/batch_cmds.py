"""The batch commands: run, submit, status, batches, cancel, leaderboard, logs, report."""

from __future__ import annotations

import re
from pathlib import Path

import click

from arena import cluster_cmd
from arena.report import Report, check_output_path, report_from_store, write_report
from tasks.redact import redact_text
from tasks.settings import ArenaSettings, load_settings
from tasks.spec import NAME_PATTERN
from tasks.store import FINISHED, Store
from tasks.validation import InputError

JSON_HELP = "Print JSON for machines (no progress bar)."


def check_run_id(run_id: str | None) -> str | None:
    if run_id is not None and not re.match(NAME_PATTERN, run_id):
        raise InputError(
            f"--run-id: {run_id!r} is not a name (letters, digits, '.', '_', '-'; at most 64)"
        )
    return run_id


OUTPUT_PATH = click.option(
    "--output-path", type=click.Path(path_type=Path),
    help="Write the batch's report (JSON): a FILE.json, or a folder for arena-<batch>.json.",
)  # fmt: skip


def exit_for(summary: str | None) -> None:
    """A batch with errors (or one that failed or was cancelled) ends with status 1."""
    if summary:
        click.echo(f"arena: {redact_text(summary)}", err=True)
        raise SystemExit(1)


@click.command("run")
@click.argument("spec", metavar="SPEC")
@click.option("--fresh", is_flag=True, help="Rerun every unit, ignoring stored results.")
@click.option("--workers", type=click.IntRange(min=1, max=1024), help="Embedded workers.")
@click.option("--quiet", is_flag=True, help="No progress bar or table.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--run-id", help="A label to find this run again (arena status LABEL).")
@OUTPUT_PATH
@click.option("--serve", "serve_port", type=click.IntRange(1, 65535), metavar="PORT",
              help="Serve the API and its page on 127.0.0.1:PORT meanwhile, and after the "
              "batch until Ctrl-C.")  # fmt: skip
def run_command(
    spec: str, fresh: bool, workers: int | None, quiet: bool, as_json: bool, run_id: str | None,
    output_path: Path | None, serve_port: int | None,
) -> None:  # fmt: skip
    """Run a batch and print its leaderboard (embedded cluster unless ARENA_REDIS_URL is set)."""
    load_settings()  # a bad setting is refused before anything starts
    check_run_id(run_id)
    target = check_output_path(output_path) if output_path else None
    batch = cluster_cmd.load_batch(spec)
    finished = cluster_cmd.run_batch(
        batch, fresh, workers, quiet or as_json, run_id=run_id, serve_port=serve_port
    )
    if target:
        written = write_report(finished.report, target)
        if not (quiet or as_json):
            click.echo(f"report: {written}")
    if as_json:
        summary = finished.report.model_dump(mode="json", exclude={"units"})
        cluster_cmd.print_json({**summary, "submission": finished.submission.model_dump()})
    exit_for(cluster_cmd.report_errors(finished.report))


def cluster_settings(command: str) -> ArenaSettings:
    settings = load_settings()
    if not settings.redis_url:
        raise InputError(
            f"ARENA_REDIS_URL is not set: `arena {command}` talks to a cluster "
            "(`arena run` uses the embedded default)"
        )
    return settings


@click.command("submit")
@click.argument("spec", metavar="SPEC")
@click.option("--fresh", is_flag=True, help="Rerun every unit, ignoring stored results.")
@click.option("--run-id", help="A label to find this run again (arena status LABEL).")
def submit_command(spec: str, fresh: bool, run_id: str | None) -> None:
    """Queue a batch on the cluster; prints the batch id."""
    settings = cluster_settings("submit")  # before Celery is imported: bad settings are 1 line
    from tasks.submit import submit

    check_run_id(run_id)
    batch = cluster_cmd.load_batch(spec)
    sub = submit(cluster_cmd.connect(settings), batch, fresh,
                 visibility_timeout_s=settings.visibility_timeout_s, run_id=run_id)  # fmt: skip
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
    """A batch's state, progress and summary (ID: a batch id, a unique prefix, or a run id).
    Exits 1 when the batch ended with errors, failed or was cancelled."""
    with cluster_cmd.open_store(load_settings()) as db:
        batch_id = db.resolve(batch_ref)
        info = db.batch(batch_id)
        if info is None:
            raise InputError(f"batch: no batch {batch_ref!r}")
        if watch and info.status not in FINISHED:
            info = cluster_cmd.wait(db, batch_id, info.total, show=not as_json)
        if as_json:
            cluster_cmd.print_json(info.model_dump(mode="json"))
        else:
            cluster_cmd.report(db, info)
        if info.status in FINISHED:
            results = list(db.unit_results(batch_id).values()) if info.errors else []
            exit_for(
                cluster_cmd.error_summary(info.id, info.status, info.reason, info.total, results)
            )


@click.command("batches")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def batches_command(limit: int, as_json: bool) -> None:
    """Recent batches, newest first."""
    with cluster_cmd.open_store(load_settings()) as db:
        infos = [i for i in (db.batch(b) for b in db.batch_ids(limit)) if i is not None]
        if as_json:
            cluster_cmd.print_json([i.model_dump(mode="json", exclude={"spec"}) for i in infos])
        for info in [] if as_json else infos:
            click.echo(cluster_cmd.status_line(info))


@click.command("cancel")
@click.argument("batch_ref", metavar="ID")
def cancel_command(batch_ref: str) -> None:
    """Stop a running batch: queued units are skipped, the leaderboard is left as it was.
    Exits 1 if the batch had already ended."""
    from tasks.submit import cancel

    with cluster_cmd.open_store(load_settings()) as db:
        batch_id = db.resolve(batch_ref)
        outcome = cancel(db, batch_id)
        if outcome != "cancelled":
            click.echo(f"arena: batch {batch_id} already ended ({outcome}); nothing to cancel",
                       err=True)  # fmt: skip
            raise SystemExit(1)
        click.echo(f"{batch_id}: cancelled")


@click.command("leaderboard")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def leaderboard_command(name: str | None, as_json: bool) -> None:
    """A leaderboard (no NAME: list them)."""
    with cluster_cmd.open_store(load_settings()) as db:
        if name is None:
            names = db.leaderboard_names()
            cluster_cmd.print_json(names) if as_json else click.echo("\n".join(names))
            return
        if name not in db.leaderboard_names():
            raise InputError(f"leaderboard: no leaderboard {name!r}")
        table, payload = cluster_cmd.leaderboard_table(db, name)
        if as_json:
            cluster_cmd.print_json({"name": name, "entries": payload})
        else:
            cluster_cmd.print_board(table)


@click.command("logs")
@click.argument("batch_ref", metavar="ID")
@click.argument("agent", required=False)
def logs_command(batch_ref: str, agent: str | None) -> None:
    """What each unit of a batch printed (stdout and stderr), optionally one agent's units."""
    show_logs(batch_ref, agent)


def show_logs(batch_ref: str, agent: str | None) -> None:
    with cluster_cmd.open_store(load_settings()) as db:
        batch_id = db.resolve(batch_ref)
        info = db.batch(batch_id)
        assert info is not None
        agents = set(info.identity.agents)
        if agent is not None and agent not in agents:
            raise InputError(f"agent: no agent {agent!r} in batch {batch_id} ({sorted(agents)})")
        results, logs = db.unit_results(batch_id), db.logs(batch_id)
        shown = 0
        for unit_id in sorted(u for u in logs if u in results):
            result = results[unit_id]
            if agent is not None and result.agent != agent:
                continue
            click.echo(click.style(f"── {unit_id} ({result.status}) ", bold=True).ljust(72, "─"))
            click.echo(redact_text(logs[unit_id].rstrip("\n")))
            shown += 1
        if not shown:
            whose = f"agent {agent}" if agent else "any unit"
            click.echo(f"no output captured for {whose} in batch {batch_id}", err=True)


@click.command("report")
@click.argument("batch_ref", metavar="ID")
@OUTPUT_PATH
def report_command(batch_ref: str, output_path: Path | None) -> None:
    """A batch's report (JSON: config, versions, per-agent and per-unit results)."""
    settings = load_settings()
    target = check_output_path(output_path) if output_path else None
    with cluster_cmd.open_store(settings) as db:
        report = stored_report(settings, db, db.resolve(batch_ref))
    if target:
        click.echo(str(write_report(report, target)))
    else:
        cluster_cmd.print_json(report.model_dump(mode="json"))


def stored_report(settings: ArenaSettings, db: Store, batch_id: str) -> Report:
    """`arena report` and GET /batches/{id}: the batch's report, with its log folder if any."""
    log_dir = cluster_cmd.log_folder(settings, batch_id)
    return report_from_store(db, batch_id, log_dir if log_dir.is_dir() else None)


COMMANDS = [
    run_command, submit_command, status_command, batches_command, cancel_command,
    leaderboard_command, logs_command, report_command,
]  # fmt: skip
