"""A race from its raw measures (exit codes, parsed counts, diff stats, durations): the
dimensions computed, then the same rules, composite and ranking as scores given directly
(scoring/race.py). What the reducer and `arena score race` with raw measures use."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from scoring._common import StrictModel
from scoring.race import (
    DIMENSIONS,
    AgentScore,
    DimensionName,
    DimensionScores,
    RaceOutcome,
    RaceWeights,
    Thresholds,
    apply_race_rules,
    calculate_composite,
    check_measured_weight,
    race_outcome,
)
from scoring.race_dimensions import (
    BuildOutcome,
    Count,
    DimensionResult,
    Duration,
    LintOutcome,
    TestOutcome,
    score_diff_size,
    score_lint_outcome,
    score_speed,
    score_tests_outcome,
)
from scoring.race_tests import TestChanges


class DiffStats(StrictModel):
    lines_added: Count
    lines_removed: Count
    files_changed: Count


class CommandsConfigured(StrictModel):
    """Which commands the race runs; one not configured leaves the composite for every agent."""

    build: bool = True
    tests: bool = True
    lint: bool = True


class AgentMeasures(StrictModel):
    name: Annotated[str, Field(min_length=1)]
    build: BuildOutcome | None = None  # None: not run
    tests: TestOutcome | None = None  # None: not run (not configured, or skipped: build failed)
    lint: LintOutcome | None = None
    diff: DiffStats
    duration_s: Duration | None = None  # speed is measured iff every agent has one
    # The baseline's tests this branch broke or skipped, by name (scoring/race_tests.py,
    # compare_cases); None: not compared. Changes no score; holds a winner for review.
    test_changes: TestChanges | None = None


class BaselineMeasures(StrictModel):
    """The test and lint commands run in the original repository (once per race)."""

    tests: TestOutcome | None = None
    lint: LintOutcome | None = None


class RaceMeasures(StrictModel):
    task: str | None = None
    weights: RaceWeights = RaceWeights()
    thresholds: Thresholds = Thresholds()
    configured: CommandsConfigured = CommandsConfigured()
    baseline: BaselineMeasures = BaselineMeasures()
    agents: Annotated[list[AgentMeasures], Field(min_length=1)]
    # The agents (and the baseline) whose checks could not run: none of them is ranked, and the
    # race is never auto-merged (a branch nobody scored might have won).
    unchecked: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> RaceMeasures:
        names = [a.name for a in self.agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"agents: duplicate agent names {duplicates}")
        both = sorted(set(names) & set(self.unchecked))
        if both:
            raise ValueError(f"unchecked: {both} are measured agents (their checks ran)")
        return self


_COMMANDS: tuple[Literal["build", "tests", "lint"], ...] = ("build", "tests", "lint")
# The commands scored against the baseline's run, in the order their notes are listed.
_CHECKS: tuple[tuple[str, Callable[[Any, Any], DimensionResult]], ...] = (
    ("tests", score_tests_outcome),
    ("lint", score_lint_outcome),
)


def measured_dimensions(measures: RaceMeasures) -> list[DimensionName]:
    """build/tests/lint where configured, diff_size always, speed iff every agent has a duration.
    Raises ValueError (naming the field) for measures that contradict the configuration."""
    configured = measures.configured
    for command in ("tests", "lint"):
        if not getattr(configured, command) and getattr(measures.baseline, command) is not None:
            raise ValueError(
                f"baseline.{command}: given, but the race runs no {command} command "
                f"(configured.{command} is false)"
            )
    for i, agent in enumerate(measures.agents):
        for command in _COMMANDS:
            if not getattr(configured, command) and getattr(agent, command) is not None:
                raise ValueError(
                    f"agents[{i}].{command}: given, but the race runs no {command} command "
                    f"(configured.{command} is false)"
                )
    timed = [a.duration_s is not None for a in measures.agents]
    if any(timed) and not all(timed):
        missing = timed.index(False)
        raise ValueError(
            f"agents[{missing}].duration_s: missing; speed is measured only when every agent "
            f"has a duration (agents[{timed.index(True)}] has one)"
        )
    chosen = {c for c in _COMMANDS if getattr(configured, c)} | {"diff_size"}
    if all(timed):
        chosen.add("speed")
    return [d for d in DIMENSIONS if d in chosen]


def _agent_scores(
    agent: AgentMeasures,
    where: str,
    measures: RaceMeasures,
    speed: Mapping[str, float],
) -> tuple[DimensionScores, list[str]]:
    """The raw measures of one agent as dimension scores (tests and lint left out when its build
    failed: apply_race_rules makes them 0) and the notes on how they were reached."""
    configured = measures.configured
    values: dict[str, float] = {}
    notes: list[str] = []
    build_failed = False
    if configured.build:
        if agent.build is None:
            raise ValueError(
                f"{where}.build: missing; the race runs a build command (configured.build)"
            )
        values["build"] = 100.0 if agent.build.passed else 0.0
        build_failed = not agent.build.passed
        if agent.build.timed_out:
            notes.append("build timed out")
    for command, score in () if build_failed else _CHECKS:
        if not getattr(configured, command):
            continue
        outcome = getattr(agent, command)
        if outcome is None:
            raise ValueError(
                f"{where}.{command}: missing; the race runs {command} (configured.{command}) and "
                "this agent's build did not fail"
            )
        result = score(outcome, getattr(measures.baseline, command))
        values[command] = result.score
        notes += result.notes
    diff = agent.diff
    values["diff_size"] = score_diff_size(diff.lines_added, diff.lines_removed, diff.files_changed)
    if agent.name in speed:
        values["speed"] = speed[agent.name]
    return DimensionScores(**values), notes


def score_race(measures: RaceMeasures) -> RaceOutcome:
    """Score a race from its raw measures. Raises ValueError, naming the field, when the measures
    contradict each other or the configuration."""
    dims = measured_dimensions(measures)
    check_measured_weight(measures.weights, dims)
    speed: dict[str, float] = {}
    if "speed" in dims:
        durations = {a.name: a.duration_s for a in measures.agents if a.duration_s is not None}
        speed = score_speed(durations)
    scored: list[AgentScore] = []
    for i, agent in enumerate(measures.agents):
        where = f"agents[{i}]"
        given, notes = _agent_scores(agent, where, measures, speed)
        scores, rule_notes = apply_race_rules(given, dims, where)
        composite = calculate_composite(scores, measures.weights, dims)
        notes += rule_notes
        scored.append(
            AgentScore(
                name=agent.name,
                scores=scores,
                composite=composite,
                notes=notes,
                test_changes=agent.test_changes,
            )
        )
    return race_outcome(measures.task, dims, scored, measures.thresholds, measures.unchecked)
