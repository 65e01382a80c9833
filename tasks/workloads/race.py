"""Workload `race`: coding agents' branches scored as seeds/race-scoring-engine.md describes.

A race is one batch: a baseline check of the base ref and one check per agent branch, each in a
fresh checkout of its own (workers/race/check.py), run through the sandbox. The reducer scores
them together (tests and lint against the baseline, speed against the fastest agent) with
scoring.race_measures.score_race, ranks them and gives the verdict. The spec has its own shape
(task, repo, base, scoring: the keys of the seed's hydra.toml); it is stored in the generic one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from scoring.race import (
    BuildOutcome,
    LintOutcome,
    RaceWeights,
    TestOutcome,
    Thresholds,
)
from scoring.race_measures import (
    AgentMeasures,
    BaselineMeasures,
    CommandsConfigured,
    RaceMeasures,
    score_race,
)
from scoring.race_measures import DiffStats as ScoredDiff
from tasks.spec import Protocol, SpecModel
from tasks.validation import InputError, describe_validation_error
from tasks.workloads.base import (
    Column,
    LeaderboardEntry,
    Reduction,
    Unit,
    UnitCount,
    UnitResult,
    ValidatedBatch,
    Workload,
)
from tasks.workloads.race_config import read_hydra_toml
from workers.fingerprint import AgentFingerprint, commit_fingerprint, unversioned_fingerprint

if TYPE_CHECKING:
    from tasks.repo_policy import Asker, RepoPolicy
    from tasks.settings import ArenaSettings
    from workers.sandbox import Sandbox

BASELINE = "@baseline"  # the base ref's check; no agent name can start with '@'
ITEM = "race"
AgentName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,62}[A-Za-z0-9._-]?$")]


def _git_ref(ref: str) -> str:
    """A git ref as a race names it: no spaces or control characters (the pattern), no "..",
    no leading "-" (an option to git)."""
    if ref.startswith("-") or ".." in ref:
        raise ValueError("a branch, tag or commit (no leading '-', no '..')")
    return ref


GitRef = Annotated[str, Field(pattern=r"^[A-Za-z0-9._/@+-]{1,200}$"), AfterValidator(_git_ref)]
GIT_REF = TypeAdapter(GitRef)


def checked_ref(ref: Any, field: str) -> str:
    """A ref from a stored spec checked again (a worker, a merge): InputError naming `field`."""
    try:
        return GIT_REF.validate_python(ref)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc, prefix=f"{field}.")) from None


Command = Annotated[str, Field(min_length=1, max_length=4096)] | None


def _utc(text: str, field: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{field}: {text!r} is not an ISO 8601 time") from None
    if stamp.tzinfo is None:
        raise ValueError(f"{field}: {text!r} has no time zone (end it with Z or +00:00)")
    return stamp


class RaceAgentSpec(SpecModel):
    """An agent's branch and, for the speed dimension, when it started and finished the task
    (or its duration)."""

    name: AgentName
    branch: GitRef
    started_at: str | None = None
    completed_at: str | None = None
    duration_s: Annotated[float, Field(ge=0, le=30 * 24 * 3600, allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _times(self) -> RaceAgentSpec:
        stamps = (self.started_at, self.completed_at)
        if any(stamps) and not all(stamps):
            raise ValueError("give both started_at and completed_at, or neither")
        if all(stamps) and self.duration_s is not None:
            raise ValueError("give started_at/completed_at or duration_s, not both")
        if self.started_at and self.completed_at:
            start = _utc(self.started_at, "started_at")
            end = _utc(self.completed_at, "completed_at")
            if end < start:
                raise ValueError("completed_at is before started_at")
        return self

    def duration(self) -> float | None:
        if self.started_at and self.completed_at:
            end, start = _utc(self.completed_at, ""), _utc(self.started_at, "")
            return (end - start).total_seconds()
        return self.duration_s


class RaceItem(SpecModel):
    name: Literal["race"] = "race"
    task: Annotated[str, Field(min_length=1, max_length=500)]
    repo: Annotated[str, Field(min_length=1, max_length=4096)]
    base: GitRef = "main"


class RaceParams(SpecModel):
    """The `scoring` block: the keys of the seed's hydra.toml, and how to read test and lint
    output (named parsers, a JUnit XML report) where recognising it is not enough."""

    weights: RaceWeights = RaceWeights()
    build_command: Command = None
    test_command: Command = None
    lint_command: Command = None
    timeout_per_check_seconds: Annotated[float, Field(gt=0, le=6 * 3600, allow_inf_nan=False)] = (
        120.0
    )
    thresholds: Thresholds = Thresholds()
    test_runner: Literal["pytest", "jest", "cargo", "go"] | None = None
    junit_xml: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    linter: Literal["ruff", "flake8", "clippy", "eslint"] | None = None
    # Whether the commands may use the network (the Docker sandbox's ARENA_SANDBOX_NETWORK_MODE;
    # the local sandbox cannot take it away). Off: a check that downloads must vendor instead.
    network: bool = False

    @field_validator("junit_xml")
    @classmethod
    def _relative(cls, path: str | None) -> str | None:
        if path is not None and (path.startswith("/") or ".." in path.split("/")):
            raise ValueError("a path inside the checkout (relative, no '..')")
        return path

    def configured(self) -> CommandsConfigured:
        return CommandsConfigured(
            build=self.build_command is not None,
            tests=self.test_command is not None,
            lint=self.lint_command is not None,
        )


class RaceSpecTop(SpecModel):
    """The race's own top-level keys, checked before they become the generic item/params."""

    task: Annotated[str, Field(min_length=1, max_length=500)]
    repo: Annotated[str, Field(min_length=1, max_length=4096)]
    base: GitRef = "main"
    scoring: dict[str, Any] | None = None


GENERIC_KEYS = ("workload", "leaderboard", "agents", "protocol", "occasion")


class RaceWorkload(Workload):
    name = "race"
    agent_model = RaceAgentSpec
    item_model = RaceItem
    params_model = RaceParams
    score_header: ClassVar[str] = "Composite"
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
            RaceParams.model_validate(scoring)
        except ValidationError as exc:
            raise InputError(describe_validation_error(exc, prefix=where)) from None
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
        race); the baseline is the base's commit. A ref that cannot be resolved here is
        checked on the worker, where it becomes that agent's error result."""
        from workers.race.git import GitError, resolve_commit

        item: RaceItem = items[0]
        found = {}
        for key, ref in [(a.name, a.branch) for a in agents] + [(BASELINE, item.base)]:
            try:
                commit = resolve_commit(item.repo, ref)
            except GitError as exc:
                found[key] = unversioned_fingerprint(f"not resolved at submission: {exc}")
                continue
            if commit is None:
                found[key] = unversioned_fingerprint(f"{ref!r} not found in {item.repo}")
            else:
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
        from tasks.settings import load_settings
        from workers.race.check import CheckCommands, run_check
        from workers.sandbox import SandboxLimits

        params = RaceParams.model_validate(unit.payload["params"])
        item = RaceItem.model_validate(unit.payload["item"])
        settings = load_settings()
        # Checked again here: a spec in Redis is only as trusted as whoever could write it,
        # and this worker's settings are the ones that say what it may read.
        repo = repo_policy("worker", settings).admit(item.repo, must_exist=False)
        branch = checked_ref(unit.payload["agent"]["branch"], "branch")
        fingerprint = unit.agent_fingerprint
        commands = CheckCommands(
            build=params.build_command, tests=params.test_command, lint=params.lint_command,
            timeout_s=params.timeout_per_check_seconds, test_runner=params.test_runner,
            junit_xml=params.junit_xml, linter=params.linter,
        )  # fmt: skip
        result = run_check(
            repo, branch, item.base, commands,
            sandbox_from(settings),
            role="baseline" if unit.agent == BASELINE else "agent",
            expected_commit=fingerprint.digest if fingerprint and fingerprint.kind == "commit"
            else None,
            limits=SandboxLimits(
                memory_mb=settings.sandbox_memory_mb or None, processes=settings.sandbox_pids,
                cpus=settings.sandbox_cpus or None, network=params.network,
                disk_mb=settings.sandbox_disk_mb or None,
            ),
            workdir_root=settings.work_dir,
        )  # fmt: skip
        return result.model_dump(mode="json")

    def reduce(self, batch: ValidatedBatch, results: Sequence[UnitResult]) -> Reduction:
        """The summary `arena race results` prints; each scored agent's row, less its raw
        measures, is its board entry."""
        summary = reduce_race(batch, results)
        race = {"task": summary["task"], "verdict": summary["verdict"]}
        entries = []
        for row in summary["agents"]:
            stats = {k: v for k, v in row.items() if k not in ("name", "measures")}
            entries.append(
                LeaderboardEntry(agent=row["name"], score=row["composite"], stats={**stats, **race})
            )
        return Reduction(summary=summary, entries=entries)

    def format_board(self, name: str, entries: Sequence[LeaderboardEntry]) -> str | None:
        from tasks.workloads.race_view import format_board

        return format_board(name, entries)


def _outcome(run: dict[str, Any] | None, kind: type[Any]) -> Any:
    if run is None:
        return None
    fields = {"exit_code": run["exit_code"] if run["exit_code"] is not None else -1,
              "timed_out": run["timed_out"]}  # fmt: skip
    if kind is TestOutcome:
        fields |= {"counts": run["counts"], "runner": run["runner"]}
    elif kind is LintOutcome:
        fields |= {"counts": run["counts"], "linter": run["linter"]}
    return kind.model_validate(fields, strict=False)


def reduce_race(batch: ValidatedBatch, results: Sequence[UnitResult]) -> dict[str, Any]:
    """The race scored from its checks' raw measures (scoring.race_measures.score_race), and the
    summary `arena race results` prints: ranking, verdict, notes, errors and their measures."""
    item: RaceItem = batch.items[0]
    params: RaceParams = batch.params
    agents = {a.name: a for a in batch.agents}
    by_agent = {r.agent: r for r in results}
    baseline = by_agent.get(BASELINE)
    base_ok = baseline is not None and baseline.status == "ok"
    base_raw = baseline.result if baseline is not None and base_ok else {}
    measures = [
        AgentMeasures(
            name=name,
            build=_outcome(r.result["build"], BuildOutcome),
            tests=_outcome(r.result["tests"], TestOutcome),
            lint=_outcome(r.result["lint"], LintOutcome),
            diff=ScoredDiff.model_validate(r.result["diff"], strict=False),
            duration_s=agents[name].duration(),
        )
        for name, r in by_agent.items()
        if name != BASELINE and r.status == "ok"
    ]
    errors = {r.agent: r.reason or "error" for r in results if r.status == "error"}
    outcome = None
    if measures:
        outcome = score_race(RaceMeasures(
            task=item.task, weights=params.weights, thresholds=params.thresholds,
            configured=params.configured(),
            baseline=BaselineMeasures(tests=_outcome(base_raw.get("tests"), TestOutcome),
                                      lint=_outcome(base_raw.get("lint"), LintOutcome)),
            agents=measures,
        ))  # fmt: skip
    measured = {m.name: m.model_dump(mode="json", exclude={"name"}) for m in measures}
    ranked = [
        {**a.model_dump(mode="json"), "branch": agents[a.name].branch,
         "commit": by_agent[a.name].result["commit"], "measures": measured[a.name]}
        for a in (outcome.agents if outcome else [])
    ]  # fmt: skip
    summary = {
        "task": item.task, "repo": item.repo, "base": item.base,
        "base_commit": base_raw.get("commit"),
        "verdict": outcome.verdict.value if outcome is not None else "all-failed",
        "winner": outcome.winner if outcome else None,
        "winner_branch": agents[outcome.winner].branch if outcome and outcome.winner else None,
        "tied": list(outcome.tied) if outcome else [],
        "measured": list(outcome.measured) if outcome else [],
        "agents": ranked, "errors": errors,
        "baseline": {k: base_raw.get(k) for k in ("commit", "build", "tests", "lint")}
        if base_ok else {"error": errors.get(BASELINE, "no baseline check")},
    }  # fmt: skip
    return summary


def repo_policy(asker: Asker, settings: ArenaSettings | None = None) -> RepoPolicy:
    """What `asker` may name as a race's repository, from the operator's settings."""
    from tasks.repo_policy import RepoPolicy
    from tasks.settings import load_settings

    return RepoPolicy.of(settings or load_settings(), asker)


def sandbox_from(settings: ArenaSettings) -> Sandbox:
    """The sandbox the settings choose for race commands (docs/sandbox.md): the local one is a
    bubblewrap jail; where none can start, it refuses every command (an infrastructure error
    naming the fix) unless ARENA_TRUST_AGENTS says the agents are trusted (then unjailed)."""
    from workers.sandbox.choose import get_sandbox
    from workers.sandbox.local import local_sandbox

    if settings.sandbox == "docker":
        return get_sandbox(
            "docker", image=settings.sandbox_image, network_mode=settings.sandbox_network_mode,
            work_dir=settings.work_dir, host_work_dir=settings.sandbox_host_work_dir,
        )  # fmt: skip
    return local_sandbox(trust_agents=settings.trust_agents)
