"""Workload `race`: coding agents' branches scored as seeds/race-scoring-engine.md describes.

A race is one batch: a baseline check of the base ref and one check per agent branch, each in a
fresh checkout of its own (workers/race/check.py), run through the sandbox. The reducer scores
them together (tests and lint against the baseline, speed against the fastest agent) with
scoring.race_measures.score_race, ranks them and gives the verdict. The spec has its own shape
(task, repo, base, scoring: the keys of the seed's hydra.toml); it is stored in the generic one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError

from tasks.repo_policy import Asker, RepoPolicy
from tasks.settings import ArenaSettings, load_settings
from tasks.spec import Protocol
from tasks.validation import InputError, describe_validation_error
from tasks.workloads.base import (
    Column,
    LeaderboardEntry,
    PageColumn,
    Reduction,
    Unit,
    UnitCount,
    UnitResult,
    ValidatedBatch,
    Workload,
)
from tasks.workloads.race_config import check_groups, read_hydra_toml
from tasks.workloads.race_reduce import reduce_race
from tasks.workloads.race_spec import (
    BASELINE,
    RaceAgentSpec,
    RaceItem,
    RaceParams,
    RaceSpecTop,
    checked_ref,
)
from tasks.workloads.race_view import format_board
from workers.fingerprint import AgentFingerprint, commit_fingerprint
from workers.race.check import CheckCommands, PythonEnvironment, run_check
from workers.race.environment import CacheBounds
from workers.race.git import GitError, GitTimeout, resolve_commit
from workers.sandbox import Sandbox, SandboxLimits
from workers.sandbox.choose import get_sandbox
from workers.sandbox.local import local_sandbox

ITEM = "race"
ROW_ONLY = ("name", "measures", "test_changes")  # in the summary, not on the board
GENERIC_KEYS = ("workload", "leaderboard", "agents", "protocol", "occasion")


class RaceWorkload(Workload):
    name = "race"
    agent_model = RaceAgentSpec
    item_model = RaceItem
    params_model = RaceParams
    score_header: ClassVar[str] = "Composite"
    page_columns: ClassVar[tuple[PageColumn, ...] | None] = tuple(
        PageColumn(key=f"scores.{d}", header=h, shown_as="bar")
        for d, h in (
            ("build", "Build"),
            ("tests", "Tests"),
            ("lint", "Lint"),
            ("diff_size", "Diff"),
            ("speed", "Speed"),
        )
    )
    table_columns: ClassVar[tuple[Column, ...]] = (
        Column(key="scores.build", header="Build"),
        Column(key="scores.tests", header="Tests"),
        Column(key="scores.lint", header="Lint"),
        Column(key="scores.diff_size", header="Diff"),
        Column(key="scores.speed", header="Speed"),
    )

    def coerce_spec(self, data: dict[str, Any], asker: Asker = "token-holder") -> dict[str, Any]:
        if "items" in data or "params" in data:
            return data  # the generic shape (a stored spec); `admit` checks its repository
        top = {k: v for k, v in data.items() if k not in GENERIC_KEYS}
        try:
            race = RaceSpecTop.model_validate(top)
        except ValidationError as exc:
            raise InputError(describe_validation_error(exc)) from None
        # Before hydra.toml is read from it; a local path becomes absolute (the workers'
        # working directory may not be the submitter's).
        repo = repo_policy(asker).admit(race.repo)
        if race.scoring is not None:
            scoring, where = race.scoring, "scoring."
        else:
            scoring, where = read_hydra_toml(repo, race.base), "hydra.toml: scoring."
        try:
            params = RaceParams.model_validate(scoring)
        except ValidationError as exc:
            raise InputError(describe_validation_error(exc, prefix=where)) from None
        check_groups(repo, race.base, params.environment_options(), where)
        generic = {k: data[k] for k in GENERIC_KEYS if k in data}
        item = {"name": ITEM, "task": race.task, "repo": repo, "base": race.base}
        return {**generic, "items": [item], "params": scoring}

    def admit(self, items: list[Any], asker: Asker) -> list[Any]:
        """Each item's repository as `asker` may name it (the shorthand's was checked before
        its hydra.toml was read; a spec in the generic shape is checked here)."""
        policy = repo_policy(asker)
        return [i.model_copy(update={"repo": policy.admit(i.repo)}) for i in items]

    def unit_count(
        self, agents: list[Any], items: list[Any], params: Any, protocol: Protocol
    ) -> UnitCount:
        return UnitCount(total=len(agents) + 1, formula=f"{len(agents):,} agents + the baseline")

    def check(self, batch: ValidatedBatch) -> None:
        protocol, params = batch.spec.protocol, batch.params
        if protocol.episodes != 1:
            raise InputError("protocol.episodes: a race checks each branch once (give 1)")
        needed = 3 * params.timeout_per_check_seconds + 60
        if protocol.unit_time_limit_s < needed:
            raise InputError(
                f"protocol.unit_time_limit_s: {protocol.unit_time_limit_s:g}s is less than a "
                f"check needs (3 commands × {params.timeout_per_check_seconds:g}s + 60s to "
                "check out); raise it or lower scoring.timeout_per_check_seconds"
            )
        timed = [a.duration() is not None for a in batch.agents]
        if any(timed) and not all(timed):
            index = timed.index(False)
            raise InputError(
                f"agents[{index}]: give started_at and completed_at (or duration_s) for every "
                "agent or for none (speed compares them all)"
            )

    def fingerprint_agents(
        self, agents: list[Any], items: list[Any], params: Any
    ) -> dict[str, AgentFingerprint]:
        """Each branch is the commit it names at submission (a branch that moves is a new
        race); the baseline is the base's commit. Everything the race names is checked here,
        before anything is stored or run: a repository git cannot read, or a base or branch
        that names no commit, is refused naming the field (docs/race.md, "Errors")."""
        item: RaceItem = items[0]
        refs = [("base", BASELINE, item.base)] + [
            (f"agents[{i}].branch", a.name, a.branch) for i, a in enumerate(agents)
        ]
        found = {}
        deadline = load_settings().git_check_timeout_s  # an API thread waits on it
        for field, key, ref in refs:
            try:
                commit = resolve_commit(item.repo, ref, timeout_s=deadline)
            except GitTimeout as exc:
                raise InputError(f"repo: {exc} (ARENA_GIT_CHECK_TIMEOUT_S)") from None
            except GitError:  # the policy admitted it; git still cannot read it (a URL)
                raise InputError(
                    f"repo: git could not read the repository (to resolve {field} {ref!r})"
                ) from None
            if commit is None:
                raise InputError(
                    f"{field}: {ref!r} is not a branch, tag or commit of the repository"
                )
            found[key] = commit_fingerprint(commit, f"{ref} at {commit[:12]}")
        return found

    def expand(self, batch: ValidatedBatch) -> list[Unit]:
        """The baseline's check, then one check per agent (the order units are listed in)."""
        item: RaceItem = batch.items[0]
        params = batch.params.model_dump(mode="json")
        entries = [(BASELINE, {"name": BASELINE, "branch": item.base})] + [
            (a.name, a.model_dump(mode="json")) for a in batch.agents
        ]
        return [
            Unit(
                id=f"{batch.batch_id}:{name}:{ITEM}:0",
                batch_id=batch.batch_id,
                workload=self.name,
                agent=name,
                item=ITEM,
                episode=0,
                env_seed=0,
                agent_seed=0,
                time_limit_s=batch.spec.protocol.unit_time_limit_s,
                payload={"agent": agent, "item": item.model_dump(mode="json"), "params": params},
                agent_fingerprint=batch.identity.agents.get(name),
                engine=batch.identity.engine,
            )
            for name, agent in entries
        ]

    def run_unit(self, unit: Unit) -> dict[str, Any]:
        params = RaceParams.model_validate(unit.payload["params"])
        item = RaceItem.model_validate(unit.payload["item"])
        settings = load_settings()
        # Checked again here: a spec in Redis is only as trusted as whoever could write it,
        # and this worker's settings are the ones that say what it may read.
        repo = repo_policy("worker", settings).admit(item.repo, must_exist=False)
        branch = checked_ref(unit.payload["agent"]["branch"], "branch")
        fingerprint = unit.agent_fingerprint
        commands = CheckCommands(
            build=params.build_command,
            tests=params.test_command,
            lint=params.lint_command,
            timeout_s=params.timeout_per_check_seconds,
            test_runner=params.test_runner,
            junit_xml=params.junit_xml,
            linter=params.linter,
        )
        result = run_check(
            repo,
            branch,
            item.base,
            commands,
            sandbox_from(settings),
            role="baseline" if unit.agent == BASELINE else "agent",
            expected_commit=fingerprint.digest
            if fingerprint and fingerprint.kind == "commit"
            else None,
            limits=SandboxLimits(
                memory_mb=settings.sandbox_memory_mb or None,
                processes=settings.sandbox_pids,
                cpus=settings.sandbox_cpus or None,
                network=params.network,
                disk_mb=settings.sandbox_disk_mb or None,
            ),
            workdir_root=settings.work_dir,
            environment=race_environment(params, settings),
            git_timeout_s=settings.git_timeout_s,
        )
        return result.model_dump(mode="json")

    def reduce(self, batch: ValidatedBatch, results: Sequence[UnitResult]) -> Reduction:
        """The summary `arena race results` prints; each scored agent's row, less its raw
        measures and the tests it changed by name (the race's summary keeps those), is its
        board entry."""
        summary = reduce_race(batch, results)
        race = {"task": summary["task"], "verdict": summary["verdict"]}
        entries = []
        for row in summary["agents"]:
            stats = {k: v for k, v in row.items() if k not in ROW_ONLY}
            entries.append(
                LeaderboardEntry(agent=row["name"], score=row["composite"], stats={**stats, **race})
            )
        return Reduction(summary=summary, entries=entries)

    def format_board(self, name: str, entries: Sequence[LeaderboardEntry]) -> str | None:
        return format_board(name, entries)


def repo_policy(asker: Asker, settings: ArenaSettings | None = None) -> RepoPolicy:
    """What `asker` may name as a race's repository, from the operator's settings."""
    return RepoPolicy.of(settings or load_settings(), asker)


def race_environment(params: RaceParams, settings: ArenaSettings) -> PythonEnvironment:
    """The race's own environment, kept under the work dir."""
    root = settings.work_dir or Path(tempfile.gettempdir())
    bounds = CacheBounds(
        disk_mb=settings.sandbox_disk_mb or None, cache_mb=settings.race_env_cache_mb or None
    )
    return PythonEnvironment(
        cache_root=root / "arena-race-envs",
        setup_command=params.setup_command,
        bounds=bounds,
        options=params.environment_options(),
    )


def sandbox_from(settings: ArenaSettings) -> Sandbox:
    """The sandbox the settings choose for race commands (docs/sandbox.md): the local one is a
    bubblewrap jail; where none can start, it refuses every command (an infrastructure error
    naming the fix) unless ARENA_TRUST_AGENTS says the agents are trusted (then unjailed)."""
    if settings.sandbox == "docker":
        return get_sandbox(
            "docker",
            image=settings.sandbox_image,
            network_mode=settings.sandbox_network_mode,
            work_dir=settings.work_dir,
            host_work_dir=settings.sandbox_host_work_dir,
        )
    return local_sandbox(trust_agents=settings.trust_agents)
