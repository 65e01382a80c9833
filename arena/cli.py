"""The `arena` command line."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import click

from arena import cluster_cmd
from arena.embedded import DataDirInUse
from arena.errors import InputError
from arena.game_cmd import benchmark_command
from arena.inputs import read_json
from arena.score_cmd import SCORERS, score
from tasks.settings import ArenaSettings
from tasks.store import FINISHED

# The rubric worked examples shipped with the repository (scored by `arena demo`).
EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples" / "scoring"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Arena: fair, reproducible evaluation of agents at scale."""


@cli.command("score")
@click.argument("workload", type=click.Choice(sorted(SCORERS)))
@click.argument("file", metavar="FILE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
def score_command(workload: str, file: str, as_json: bool) -> None:
    """Score results produced elsewhere: FILE is JSON (see docs/scoring.md); '-' reads stdin."""
    text, payload = score(workload, read_json(file))
    click.echo(json.dumps(payload, indent=2) if as_json else text)


@cli.command("demo")
@click.option(
    "--examples",
    "examples_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=EXAMPLES_DIR,
    show_default=True,
    help="Folder of <workload>-*.json inputs.",
)
def demo_command(examples_dir: Path) -> None:
    """Score every worked example of the three rubrics (the embedded default job, for now)."""
    files = sorted(examples_dir.glob("*.json"))
    if not files:
        raise InputError(f"{examples_dir}: no example *.json files")
    for path in files:
        workload = path.name.split("-", 1)[0]
        if workload not in SCORERS:
            raise InputError(f"{path}: name must start with one of {sorted(SCORERS)}")
        text, _ = score(workload, read_json(str(path)))
        click.echo(click.style(f"── {workload}: {path.name} ", bold=True).ljust(72, "─"))
        click.echo(text + "\n")


@cli.command("run")
@click.argument("spec", metavar="SPEC")
@click.option("--fresh", is_flag=True, help="Rerun every unit, ignoring stored results.")
@click.option("--workers", type=click.IntRange(min=1), help="Embedded worker processes.")
@click.option("--quiet", is_flag=True, help="No progress bar or table.")
def run_command(spec: str, fresh: bool, workers: int | None, quiet: bool) -> None:
    """Run a batch and print its leaderboard (embedded cluster unless ARENA_REDIS_URL is set)."""
    batch = cluster_cmd.load_batch(spec)  # refuse a bad spec before starting anything
    info, _ = cluster_cmd.run_batch(batch, fresh, workers, quiet)
    if info.status != "done":
        raise SystemExit(1)


def _cluster_settings(command: str) -> ArenaSettings:
    settings = ArenaSettings()
    if not settings.redis_url:
        raise InputError(
            f"ARENA_REDIS_URL is not set: `arena {command}` talks to a cluster "
            "(`arena run` uses the embedded default)"
        )
    return settings


@cli.command("submit")
@click.argument("spec", metavar="SPEC")
@click.option("--fresh", is_flag=True, help="Rerun every unit, ignoring stored results.")
def submit_command(spec: str, fresh: bool) -> None:
    """Queue a batch on the cluster; prints the batch id."""
    from tasks.submit import submit

    batch = cluster_cmd.load_batch(spec)
    settings = _cluster_settings("submit")
    sub = submit(cluster_cmd.connect(settings), batch, fresh,
                 visibility_timeout_s=settings.visibility_timeout_s)  # fmt: skip
    click.echo(sub.batch_id)
    click.echo(
        f"{sub.state}: {sub.enqueued} units enqueued, {sub.reused} reused, "
        f"leaderboard {sub.leaderboard}",
        err=True,
    )


@cli.command("status")
@click.argument("batch_id", metavar="ID")
@click.option("--watch", is_flag=True, help="Follow with a progress bar until it finishes.")
@click.option("--json", "as_json", is_flag=True)
def status_command(batch_id: str, watch: bool, as_json: bool) -> None:
    """A batch's state, progress and summary."""
    with cluster_cmd.open_store(ArenaSettings()) as db:
        info = db.batch(batch_id)
        if info is None:
            raise InputError(f"batch: no batch {batch_id!r}")
        if watch and info.status not in FINISHED:
            info = cluster_cmd.wait(db, batch_id, info.total, show=not as_json)
        if as_json:
            cluster_cmd.print_json(info.model_dump(mode="json"))
        else:
            cluster_cmd.report(db, info)


@cli.command("batches")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def batches_command(limit: int, as_json: bool) -> None:
    """Recent batches, newest first."""
    with cluster_cmd.open_store(ArenaSettings()) as db:
        infos = [i for i in (db.batch(b) for b in db.batch_ids(limit)) if i is not None]
        if as_json:
            cluster_cmd.print_json([i.model_dump(mode="json", exclude={"spec"}) for i in infos])
        for info in [] if as_json else infos:
            click.echo(cluster_cmd.status_line(info))


@cli.command("cancel")
@click.argument("batch_id", metavar="ID")
def cancel_command(batch_id: str) -> None:
    """Stop a running batch: queued units are skipped, the leaderboard is left as it was."""
    from tasks.submit import cancel

    with cluster_cmd.open_store(ArenaSettings()) as db:
        click.echo(f"{batch_id}: {cancel(db, batch_id)}")


@cli.command("leaderboard")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True)
def leaderboard_command(name: str | None, as_json: bool) -> None:
    """A leaderboard (no NAME: list them)."""
    with cluster_cmd.open_store(ArenaSettings()) as db:
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
            cluster_cmd.console.print(table)


@cli.command("worker")
@click.option("--queues", default="cpu,gpu", show_default=True)
@click.option("--concurrency", type=click.IntRange(min=1), help="Processes (default: cores).")
@click.option("--loglevel", default="INFO", show_default=True)
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve Prometheus /metrics.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True,
              help="Address for /metrics (0.0.0.0 inside a container).")  # fmt: skip
def worker_command(
    queues: str, concurrency: int | None, loglevel: str, metrics_port: int | None, metrics_host: str
) -> None:
    """Consume units from the cluster's queues (ARENA_REDIS_URL)."""
    unknown = sorted(set(queues.split(",")) - {"cpu", "gpu"})
    if unknown:
        raise InputError(f"--queues: unknown queue {unknown[0]!r} (queues: cpu, gpu)")
    settings = _cluster_settings("worker")
    if metrics_port:
        prepare_multiprocess_metrics()  # before the tasks (and their metrics) are imported
    from tasks.app import QUEUES, app, configure, store

    configure(settings)
    if metrics_port:
        from tasks.metrics import serve_metrics

        db = store(settings)
        serve_metrics(metrics_port, metrics_host, lambda: {q: db.r.llen(q) for q in QUEUES})
    argv = ["worker", "--queues", queues, "--loglevel", loglevel, "--without-gossip"]
    app.worker_main(argv + (["--concurrency", str(concurrency)] if concurrency else []))


def prepare_multiprocess_metrics() -> None:
    """prometheus_client's multiprocess mode: one folder of value files shared by the pool."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.mkdtemp(prefix="arena-metrics-")
    shutil.rmtree(folder, ignore_errors=True)  # values of an earlier worker must not count
    os.makedirs(folder)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder


@cli.group("game")
def game_group() -> None:
    """The Alympics game-theory benchmark."""


game_group.add_command(benchmark_command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input ends with one line on stderr and exit status 2, never a traceback."""
    try:
        cli.main(args=argv, prog_name="arena", standalone_mode=False)
    except (InputError, DataDirInUse, click.ClickException) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        click.echo(f"arena: error: {' '.join(message.split())}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("arena: aborted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
