"""`arena race`: run a race, print its results, its checks' logs, and merge the winner."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from arena import cluster_cmd
from arena.batch_cmds import JSON_HELP, OUTPUT_PATH, check_run_id, exit_for, show_logs
from arena.report import check_output_path, write_report
from tasks.redact import redact_text
from tasks.settings import load_settings
from tasks.spec import load_spec_file
from tasks.store import BatchInfo, Store
from tasks.validation import InputError, RunFailed
from tasks.workloads import validate_batch
from tasks.workloads.race import BASELINE
from tasks.workloads.race_view import format_results

if TYPE_CHECKING:
    from tasks.repo_policy import Asker


def race_spec(
    spec: str | None, repo: str | None, task: str | None, base: str | None, agents: list[str]
) -> dict[str, Any]:
    """A spec file, with --repo/--task/--base/--agent given on the command line on top."""
    data: dict[str, Any] = {"workload": "race"}
    if spec is not None:
        loaded = load_spec_file(spec)
        if not isinstance(loaded, dict):
            raise InputError(f"{spec}: expected a mapping (workload, task, repo, agents, ...)")
        data = loaded
    if data.get("workload", "race") != "race":
        raise InputError(f"workload: {spec} is a {data.get('workload')!r} spec, not a race")
    for key, value in (("repo", repo), ("task", task), ("base", base)):
        if value is not None:
            data[key] = value
    for given in agents:
        name, sep, branch = given.partition("=")
        if not sep or not name or not branch:
            raise InputError(f"--agent: {given!r} is not NAME=BRANCH")
        data.setdefault("agents", []).append({"name": name, "branch": branch})
    data.setdefault("workload", "race")
    return data


def results_payload(info: BatchInfo) -> dict[str, Any]:
    summary = dict(info.summary or {})
    return {"batch_id": info.id, **summary}


def finished_race(batch_ref: str) -> tuple[str, BatchInfo]:
    with cluster_cmd.open_store(load_settings()) as db:
        return race_info(db, batch_ref)


def race_info(db: Store, batch_ref: str) -> tuple[str, BatchInfo]:
    """A race that ended and was reduced (`arena race results`, GET /races/{id})."""
    batch_id = db.resolve(batch_ref)
    info = db.batch(batch_id)
    if info is None:
        raise InputError(f"race: no race {batch_ref!r}")
    if info.workload != "race":
        raise InputError(f"race: {batch_id} is a {info.workload} batch, not a race")
    if info.status != "done" or not info.summary:
        raise InputError(f"race: {batch_id} is {info.status}, not reduced yet "
                         f"(arena status {batch_id} --watch)")  # fmt: skip
    return batch_id, info


@click.command("run")
@click.argument("spec", metavar="[SPEC]", required=False)
@click.option(
    "--repo", help="The repository (its hydra.toml gives the scoring when SPEC has none)."
)
@click.option("--task", help="What the agents were asked to do.")
@click.option("--base", help="The base ref (default: main).")
@click.option("--agent", "agents", multiple=True, metavar="NAME=BRANCH", help="An agent.")
@click.option("--fresh", is_flag=True, help="Check every branch again, ignoring stored results.")
@click.option("--workers", type=click.IntRange(min=1, max=1024), help="Embedded workers.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--run-id", help="A label to find this race again.")
@OUTPUT_PATH
def run_command(
    spec: str | None, repo: str | None, task: str | None, base: str | None,
    agents: tuple[str, ...], fresh: bool, workers: int | None, as_json: bool,
    run_id: str | None, output_path: Path | None,
) -> None:  # fmt: skip
    """Check every agent's branch (and the base), score and rank them as the race scoring
    engine describes, and print the results."""
    load_settings()
    check_run_id(run_id)
    target = check_output_path(output_path) if output_path else None
    if spec is None and repo is None:
        raise InputError("race: give a SPEC file or --repo PATH (with --task and --agent)")
    batch = validate_batch(race_spec(spec, repo, task, base, list(agents)), asker="operator")
    finished = cluster_cmd.run_batch(batch, fresh, workers, as_json, run_id=run_id, boards=False)
    if target:
        written = write_report(finished.report, target)
        if not as_json:
            click.echo(f"report: {written}")
    if finished.info.status == "done" and finished.info.summary:
        if as_json:
            cluster_cmd.print_json(results_payload(finished.info))
        else:
            click.echo(format_results(finished.info.summary, finished.info.id))
    exit_for(cluster_cmd.report_errors(finished.report))


@click.command("results")
@click.argument("batch_ref", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def results_command(batch_ref: str, as_json: bool) -> None:
    """A race's ranking, winner and verdict (ID: a race's batch id, prefix or run id)."""
    batch_id, info = finished_race(batch_ref)
    if as_json:
        cluster_cmd.print_json(results_payload(info))
    else:
        click.echo(redact_text(format_results(info.summary or {}, batch_id)))


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
    click.echo(merge_winner(batch_id, info, force, asker="operator"))


def _merge_target(batch_id: str, summary: dict[str, Any], asker: Asker) -> tuple[Path, str]:
    """The repository and base branch a race's winner would be merged into, if `asker` may
    write there (under ARENA_REPO_ROOTS; with none set, only the operator's own CLI)."""
    from tasks.workloads.race import checked_ref, repo_policy

    try:
        repo = repo_policy(asker).admit_local(str(summary["repo"]))
        base = checked_ref(summary["base"], "base")
    except InputError as exc:
        raise RunFailed(f"race {batch_id}: {exc}") from None
    return repo, base


def merge_winner(batch_id: str, info: BatchInfo, force: bool, asker: Asker = "token-holder") -> str:
    """Merge a race's winner (`arena race merge`, POST /races/{id}/merge); the line to show.
    RunFailed when there is nothing to merge or it may not be merged. `asker`: who asks (the
    default, a token holder of the HTTP API, is the strictest)."""
    from workers.race.git import GitError, resolve_commit
    from workers.race.merge import merge_into

    summary = info.summary or {}
    winner = next((a for a in summary.get("agents", []) if a["name"] == summary.get("winner")),
                  None)  # fmt: skip
    tied = summary.get("tied") or []
    if tied:  # no name order picks among equals, --force or not
        raise RunFailed(f"race {batch_id}: {', '.join(tied)} tie at the top, so there is no "
                        "winner to merge; merge the branch you pick with git")  # fmt: skip
    if winner is None:
        raise RunFailed(f"race {batch_id} has no winner: nothing to merge")
    if summary["verdict"] != "auto-merge" and not force:
        raise RunFailed(f"race {batch_id}: verdict {summary['verdict']} (winner "
                        f"{winner['composite']:.1f}); merge anyway with --force")  # fmt: skip
    repo, base = _merge_target(batch_id, summary, asker)
    if not _is_commit(winner.get("commit")):
        raise RunFailed(f"race {batch_id}: the winner has no scored commit to merge")
    try:
        now = resolve_commit(str(repo), base)
        then = str(summary.get("base_commit"))[:12]
        if now != summary.get("base_commit") and not force:
            raise RunFailed(f"{base} moved since the race ({then} then, {str(now)[:12]} now): "
                            "race again, or --force")  # fmt: skip
        message = (
            f"Merge race winner {winner['name']} (branch {winner['branch']}, composite "
            f"{winner['composite']:.1f})\n\narena race {batch_id}: {summary['task']}"
        )
        merged = merge_into(repo, base, winner["commit"], message)
    except GitError as exc:
        raise RunFailed(str(exc)) from None
    return (f"merged {winner['name']} ({winner['branch']} at {winner['commit'][:12]}) into "
            f"{base}: {merged[:12]}")  # fmt: skip


def _is_commit(value: object) -> bool:
    return isinstance(value, str) and len(value) == 40 and set(value) <= set("0123456789abcdef")


@click.group("race")
def race_group() -> None:
    """Races of coding agents: score their branches (build, tests, lint, diff, speed)."""


for _command in (run_command, results_command, logs_command, merge_command):
    race_group.add_command(_command)
