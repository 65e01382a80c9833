"""`arena race`: run a race, print its results, its checks' logs, and merge the winner."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from arena.cli.terminal import (
    JSON_HELP,
    OUTPUT_PATH,
    exit_for,
    print_json,
    run_and_show,
    show_logs,
    show_race,
)
from arena.service import batches, cluster, races
from arena.service.race_input import ScoringFlags
from arena.service.reports import check_output_path, write_report
from tasks.redact import redact_raw
from tasks.settings import load_settings
from tasks.store import BatchInfo
from tasks.validation import InputError
from tasks.workloads import validate_batch
from tasks.workloads.race_spec import BASELINE
from tasks.workloads.race_view import format_results


def scoring_options(command: Callable[..., None]) -> Callable[..., None]:
    """The scoring block as flags (over the spec's block or the base's hydra.toml)."""
    for option in reversed(
        (
            click.option("--build-command", metavar="CMD", help="The build command."),
            click.option("--test-command", metavar="CMD", help="The test command."),
            click.option("--lint-command", metavar="CMD", help="The lint command."),
            click.option(
                "--timeout", type=float, metavar="SECONDS", help="Each command's time limit."
            ),
            click.option(
                "--setup-command",
                metavar="CMD",
                help="Run once in the race's Python environment after its requirements.",
            ),
            click.option(
                "--weight",
                "weights",
                multiple=True,
                metavar="DIM=W",
                help="A dimension's weight (build, tests, lint, diff_size, speed).",
            ),
            click.option(
                "--duration",
                "durations",
                multiple=True,
                metavar="NAME=SECONDS",
                help="How long an agent took (speed: give one for every agent).",
            ),
            click.option(
                "--group",
                "groups",
                multiple=True,
                metavar="NAME",
                help="A dependency group or extra to install (default: those named test).",
            ),
            click.option(
                "--pin-tools",
                is_flag=True,
                help="Install declared tools that give no version at Arena's pins.",
            ),
        )
    ):
        command = option(command)
    return command


@click.command("run")
@click.argument("spec", metavar="[SPEC]", required=False)
@click.option(
    "--repo",
    help="The repository, relative to the current directory (its hydra.toml gives the scoring "
    "when SPEC has none; the flags below override either).",
)
@click.option("--task", help="What the agents were asked to do.")
@click.option("--base", help="The base ref (default: main).")
@click.option("--agent", "agents", multiple=True, metavar="NAME=BRANCH", help="An agent.")
@click.option("--fresh", is_flag=True, help="Check every branch again, ignoring stored results.")
@click.option("--workers", type=click.IntRange(min=1, max=1024), help="Embedded workers.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--run-id", help="A label to find this race again.")
@OUTPUT_PATH
@click.option(
    "--serve",
    "serve_port",
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="Serve the API and its page on 127.0.0.1:PORT meanwhile, and after the race until Ctrl-C.",
)
@scoring_options
def run_command(
    spec: str | None,
    repo: str | None,
    task: str | None,
    base: str | None,
    agents: tuple[str, ...],
    fresh: bool,
    workers: int | None,
    as_json: bool,
    run_id: str | None,
    output_path: Path | None,
    serve_port: int | None,
    **scoring: Any,
) -> None:
    """Check every agent's branch (and the base), score and rank them as the race scoring
    engine describes, and print the results."""
    load_settings()
    batches.check_run_id(run_id)
    target = check_output_path(output_path) if output_path else None
    if spec is None and repo is None:
        raise InputError("race: give a SPEC file or --repo PATH (with --task and --agent)")
    flags = ScoringFlags(**scoring)
    data = races.race_spec(spec, repo, task, base, list(agents), flags)
    batch = validate_batch(data, asker="operator")
    finished = run_and_show(
        batch, fresh, workers, as_json, run_id=run_id, show_boards=False, serve_port=serve_port
    )
    if target:
        written = write_report(finished.report, target)
        if not as_json:
            click.echo(f"report: {written}")
    exit_for(show_race(finished, as_json))


def finished_race(batch_ref: str) -> tuple[str, BatchInfo]:
    with cluster.open_store(load_settings()) as db:
        return races.race_info(db, batch_ref)


@click.command("results")
@click.argument("batch_ref", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def results_command(batch_ref: str, as_json: bool) -> None:
    """A race's ranking, winner and verdict (ID: a race's batch id, prefix or run id); exit 1
    when the race failed at the start (its base's environment could not be built)."""
    batch_id, info = finished_race(batch_ref)
    if as_json:
        print_json(races.results_payload(info))
    else:
        click.echo(redact_raw(format_results(info.summary or {}, batch_id)))
    exit_for(races.failed_line(batch_id, info.summary or {}))


@click.command("logs")
@click.argument("batch_ref", metavar="ID")
@click.argument("agent", required=False)
def logs_command(batch_ref: str, agent: str | None) -> None:
    """The full build, test and lint output of one agent's check ('baseline': the base's)."""
    show_logs(batch_ref, BASELINE if agent == "baseline" else agent)


@click.command("merge")
@click.argument("batch_ref", metavar="ID")
@click.option(
    "--force", is_flag=True, help="Merge though the verdict is not auto-merge or the base moved."
)
def merge_command(batch_ref: str, force: bool) -> None:
    """Merge the winner's scored commit into the base branch (a merge commit)."""
    batch_id, info = finished_race(batch_ref)
    click.echo(races.merge_winner(batch_id, info, force, asker="operator"))


@click.group("race")
def race_group() -> None:
    """Races of coding agents: score their branches (build, tests, lint, diff, speed)."""


for _command in (run_command, results_command, logs_command, merge_command):
    race_group.add_command(_command)
