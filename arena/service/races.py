"""Races as every front door handles them: a spec from a file and command-line flags, a
finished race's results, and merging its winner into the base branch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arena.service.race_input import ScoringFlags, anchor_repo
from tasks.repo_policy import Asker
from tasks.spec import load_spec_file
from tasks.store import BatchInfo, Store
from tasks.validation import InputError, RunFailed
from tasks.workloads.race import repo_policy
from tasks.workloads.race_spec import checked_ref
from workers.race.git import GitError, resolve_commit
from workers.race.merge import merge_into


def race_spec(
    spec: str | None,
    repo: str | None,
    task: str | None,
    base: str | None,
    agents: list[str],
    flags: ScoringFlags | None = None,
) -> dict[str, Any]:
    """A spec file (a relative `repo:` in it is relative to its folder), with --repo (relative
    to the current directory), --task, --base, --agent and the scoring flags on top."""
    data: dict[str, Any] = {"workload": "race"}
    if spec is not None:
        loaded = load_spec_file(spec)
        if not isinstance(loaded, dict):
            raise InputError(f"{spec}: expected a mapping (workload, task, repo, agents, ...)")
        data = anchor_repo(loaded, spec)
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
    if flags is not None:
        flags.apply(data)
    return data


def results_payload(info: BatchInfo) -> dict[str, Any]:
    """A reduced race's ranking, winner and verdict (`arena race results --json`, GET
    /races/{id})."""
    summary = dict(info.summary or {})
    return {"batch_id": info.id, **summary}


def failed_line(batch_id: str, summary: dict[str, Any]) -> str | None:
    """The one line of a race that failed at the start (its base's environment could not be
    built: verdict failed), for the CLI's exit status 1; None for a race that was scored."""
    if summary.get("verdict") != "failed":
        return None
    return f"race {batch_id} failed: {summary.get('failed_reason') or 'not scored'}"


def race_info(db: Store, batch_ref: str) -> tuple[str, BatchInfo]:
    """A race that ended and was reduced (`arena race results`, GET /races/{id})."""
    batch_id = db.resolve(batch_ref)
    info = db.batch(batch_id)
    if info is None:
        raise InputError(f"race: no race {batch_ref!r}")
    if info.workload != "race":
        raise InputError(f"race: {batch_id} is a {info.workload} batch, not a race")
    if info.status != "done" or not info.summary:
        raise InputError(
            f"race: {batch_id} is {info.status}, not reduced yet (arena status {batch_id} --watch)"
        )
    return batch_id, info


def _merge_target(batch_id: str, summary: dict[str, Any], asker: Asker) -> tuple[Path, str]:
    """The repository and base branch a race's winner would be merged into, if `asker` may
    write there (under ARENA_REPO_ROOTS; with none set, only the operator's own CLI)."""
    try:
        repo = repo_policy(asker).admit_local(str(summary["repo"]))
        base = checked_ref(summary["base"], "base")
    except InputError as exc:
        raise RunFailed(f"race {batch_id}: {exc}") from None
    return repo, base


def _winner(batch_id: str, summary: dict[str, Any], force: bool) -> dict[str, Any]:
    """The row of the race's winner, if it may be merged (RunFailed saying why not)."""
    agents: list[dict[str, Any]] = summary.get("agents", [])
    winner = next((a for a in agents if a["name"] == summary.get("winner")), None)
    tied = summary.get("tied") or []
    if tied:  # no name order picks among equals, --force or not
        raise RunFailed(
            f"race {batch_id}: {', '.join(tied)} tie at the top, so there is no winner to "
            "merge; merge the branch you pick with git"
        )
    if winner is None:
        raise RunFailed(f"race {batch_id} has no winner: nothing to merge")
    if summary["verdict"] != "auto-merge" and not force:
        reason = summary.get("review_reason")
        raise RunFailed(
            f"race {batch_id}: verdict {summary['verdict']} (winner "
            f"{winner['composite']:.1f}{f': {reason}' if reason else ''}); merge anyway with "
            "--force"
        )
    return winner


def merge_winner(batch_id: str, info: BatchInfo, force: bool, asker: Asker = "token-holder") -> str:
    """Merge a race's winner (`arena race merge`, POST /races/{id}/merge); the line to show.
    RunFailed when there is nothing to merge or it may not be merged. `asker`: who asks (the
    default, a token holder of the HTTP API, is the strictest)."""
    summary = info.summary or {}
    winner = _winner(batch_id, summary, force)
    repo, base = _merge_target(batch_id, summary, asker)
    if not _is_commit(winner.get("commit")):
        raise RunFailed(f"race {batch_id}: the winner has no scored commit to merge")
    try:
        now = resolve_commit(str(repo), base)
        then = str(summary.get("base_commit"))[:12]
        if now != summary.get("base_commit") and not force:
            raise RunFailed(
                f"{base} moved since the race ({then} then, {str(now)[:12]} now): race again, "
                "or --force"
            )
        message = (
            f"Merge race winner {winner['name']} (branch {winner['branch']}, composite "
            f"{winner['composite']:.1f})\n\narena race {batch_id}: {summary['task']}"
        )
        merged = merge_into(repo, base, winner["commit"], message)
    except GitError as exc:
        raise RunFailed(str(exc)) from None
    return (
        f"merged {winner['name']} ({winner['branch']} at {winner['commit'][:12]}) into "
        f"{base}: {merged[:12]}"
    )


def _is_commit(value: object) -> bool:
    return isinstance(value, str) and len(value) == 40 and set(value) <= set("0123456789abcdef")
