"""The `arena` command line."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import click
import redis

from arena.cli.batches import COMMANDS
from arena.cli.compare import compare_command
from arena.cli.games import benchmark_command
from arena.cli.mario import mario_group
from arena.cli.queue import queue_command
from arena.cli.races import race_group
from arena.cli.schedules import beat_command, schedule_group
from arena.cli.teams import team_group
from arena.embedded import DataDirInUse
from arena.service.cluster import cluster_settings, on_embedded
from arena.service.inputs import read_json
from arena.service.scores import SCORERS, score
from tasks.provenance import version_line
from tasks.refusal import refused_writes
from tasks.settings import load_settings
from tasks.validation import ClusterUnreachable, InputError, RunFailed

# The rubric worked examples, shipped inside the package (scored by `arena demo`); the
# repository's examples/scoring/ is a link to this folder.
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples" / "scoring"


def _print_version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_line())
        ctx.exit()


# Every status a command ends with (docs/reliability.md, "Exit statuses"): a script retries 3.
EXIT_STATUSES = (
    "Exit statuses: 0 done; 1 failed (a unit's error, a batch failed or cancelled, Redis "
    "refusing writes for too long); 2 bad input (nothing was stored: do not retry as is); 3 the "
    "cluster's Redis could not be reached for ARENA_REDIS_RETRY_S (retry later); 130 "
    "interrupted."
)
EXIT_UNREACHABLE = 3


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_STATUSES)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Arena's version and git commit.",
)
def cli() -> None:
    """Arena: fair, reproducible evaluation of agents at scale."""


for _command in COMMANDS:
    cli.add_command(_command)


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


@cli.command("worker")
@click.option("--queues", default="cpu,gpu", show_default=True)
@click.option(
    "--concurrency", type=click.IntRange(min=1, max=1024), help="Processes (default: cores)."
)
@click.option("--loglevel", default="INFO", show_default=True)
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve Prometheus /metrics.")
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address for /metrics (0.0.0.0 inside a container).",
)
def worker_command(
    queues: str, concurrency: int | None, loglevel: str, metrics_port: int | None, metrics_host: str
) -> None:
    """Consume units from the cluster's queues (ARENA_REDIS_URL)."""
    unknown = sorted(set(queues.split(",")) - {"cpu", "gpu"})
    if unknown:
        raise InputError(f"--queues: unknown queue {unknown[0]!r} (queues: cpu, gpu)")
    settings = cluster_settings("worker")
    if metrics_port:
        prepare_multiprocess_metrics()  # before the tasks (and their metrics) are imported
    # Celery and the tasks' metrics only now: after the multiprocess metrics folder is set.
    from tasks.app import QUEUES, app, configure, store
    from tasks.metrics import serve_metrics

    configure(settings)
    if metrics_port:
        db = store(settings)
        serve_metrics(metrics_port, metrics_host, lambda: db.queue_lengths(QUEUES))
    argv = ["worker", "--queues", queues, "--loglevel", loglevel, "--without-gossip"]
    app.worker_main(argv + (["--concurrency", str(concurrency)] if concurrency else []))


@cli.command("api")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0 inside a container).",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
def api_command(host: str, port: int) -> None:
    """Serve the HTTP API and its page (docs/api.md) on the cluster's Redis (ARENA_REDIS_URL),
    or with none set on the data folder's embedded cluster: the one running, else started, and
    kept while this serves (its workers start when a batch is submitted)."""
    settings = load_settings()
    import uvicorn  # the server and the app (FastAPI) only for `arena api`

    from arena.web.app import create_app

    if settings.redis_url:
        uvicorn.run(create_app(settings), host=host, port=port)
        return
    with on_embedded(settings) as local:
        click.echo(
            f"serving http://{host}:{port}/ on the embedded cluster in "
            f"{settings.data_dir.resolve()} until Ctrl-C",
            err=True,
        )
        uvicorn.run(create_app(local), host=host, port=port)


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
cli.add_command(compare_command)
cli.add_command(mario_group)
cli.add_command(queue_command)
cli.add_command(race_group)
cli.add_command(beat_command)
cli.add_command(schedule_group)
cli.add_command(team_group)


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input ends with one line on stderr and exit status 2, a cluster whose
    Redis cannot be reached with status 3 (EXIT_STATUSES), never a traceback; a command group
    given nothing to do prints its help."""
    try:
        cli.main(args=argv, prog_name="arena", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else cli.get_help(click.Context(cli)))
        sys.exit(0)
    except (InputError, DataDirInUse, click.ClickException) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        click.echo(f"arena: error: {' '.join(message.split())}", err=True)
        sys.exit(2)
    except ClusterUnreachable as exc:
        click.echo(f"arena: {' '.join(str(exc).split())}", err=True)
        sys.exit(EXIT_UNREACHABLE)
    except RunFailed as exc:
        click.echo(f"arena: {' '.join(str(exc).split())}", err=True)
        sys.exit(1)
    except (redis.ConnectionError, redis.TimeoutError) as exc:  # gone mid-command, once reached
        click.echo(f"arena: lost Redis: {' '.join(str(exc).split())}", err=True)
        sys.exit(EXIT_UNREACHABLE)
    except redis.ResponseError as exc:
        refused = refused_writes(exc)  # up, but out of memory, a replica, or its disk failing
        if refused is None:
            raise
        click.echo(f"arena: {refused}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:
        click.echo("arena: aborted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
