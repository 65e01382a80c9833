"""A race's spec (seeds/race-scoring-engine.md): the agents' branches and timings, the item (task,
repository, base ref) and the `scoring` block (the keys of the seed's hydra.toml), each checked
as a git ref or a bounded value before anything reaches git or a sandbox."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    TypeAdapter,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from scoring.race import RaceWeights, Thresholds
from scoring.race_measures import CommandsConfigured
from tasks.spec import SpecModel
from tasks.validation import InputError, describe_validation_error
from workers.race.requirements import EnvironmentOptions

BASELINE = "@baseline"  # the base ref's check; no agent name can start with '@'
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
    # Where the commands run (docs/race.md, "The race's environment"): a virtual environment
    # made from what the checked commit declares, the tools the commands name at Arena's pins,
    # then `setup_command` in it. The only kind so far: the worker's own tools (Arena's Python
    # and its packages) are never offered, since they shadow the project under test. A table
    # chooses what goes in ({groups: [tests], pin_tools: true}; "python" is the default table,
    # kept as the word so that a race that names no table keeps its fingerprint).
    environment: EnvironmentOptions = EnvironmentOptions()
    setup_command: Command = None

    @field_validator("junit_xml")
    @classmethod
    def _relative(cls, path: str | None) -> str | None:
        if path is not None and (path.startswith("/") or ".." in path.split("/")):
            raise ValueError("a path inside the checkout (relative, no '..')")
        return path

    @field_validator("environment", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value != "python":
                raise ValueError(
                    f"environment: {value[:40]!r} is not an environment kind (python), nor a "
                    "table ({groups: [tests], pin_tools: true})"
                )
            return EnvironmentOptions()
        return value

    @field_serializer("environment")
    def _as_word(self, options: EnvironmentOptions) -> str | dict[str, Any]:
        return "python" if options == EnvironmentOptions() else options.model_dump(mode="json")

    def environment_options(self) -> EnvironmentOptions:
        return self.environment

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
