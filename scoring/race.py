"""The race scoring engine (seeds/race-scoring-engine.md): dimensions, composite, ranking, verdict.

Dimension functions take measurements; scores that need other agents (speed) or the baseline
(tests, lint) take those explicitly, so the reducer computes them once every check is in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from scoring._common import StrictModel, clamp, format_half_up

DIMENSIONS = ("build", "tests", "lint", "diff_size", "speed")
# Finite, bounded floats: an infinite weight or score would make the composite NaN.
Score = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
# Weights are relative (the rubric's sum to 100). The bounds keep every sum finite and every
# product exact to the last digits (a weight of 1e-320 would lose them).
MAX_WEIGHT = 1_000_000
MIN_POSITIVE_WEIGHT = 1e-6
Weight = Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]


class RaceWeights(StrictModel):
    build: Weight = 30
    tests: Weight = 30
    lint: Weight = 15
    diff_size: Weight = 15
    speed: Weight = 10

    @model_validator(mode="after")
    def _some_weight(self) -> RaceWeights:
        if not any(getattr(self, d) for d in DIMENSIONS):
            raise ValueError("weights: at least one weight must be positive (all are 0)")
        for d in DIMENSIONS:
            if 0 < getattr(self, d) < MIN_POSITIVE_WEIGHT:
                raise ValueError(
                    f"weights.{d}: {getattr(self, d):g} is neither 0 nor at least "
                    f"{MIN_POSITIVE_WEIGHT:g}"
                )
        return self


class DimensionScores(StrictModel):
    """None = the dimension is not measured (no command configured): it leaves the composite."""

    build: Score | None = None
    tests: Score | None = None
    lint: Score | None = None
    diff_size: Score | None = None
    speed: Score | None = None


class TestCounts(StrictModel):
    __test__ = False  # not a pytest class

    passed: Count
    failed: Count = 0
    errors: Count = 0
    skipped: Count = 0

    @property
    def total(self) -> int:
        # Skipped tests neither pass nor fail; errors (e.g. a broken fixture) count as failures.
        return self.passed + self.failed + self.errors


class LintCounts(StrictModel):
    warnings: Count
    errors: Count


def score_build(exit_code: int) -> float:
    return 100.0 if exit_code == 0 else 0.0


def score_tests_exit_code(exit_code: int) -> float:
    """Fallback when no parser recognises the output."""
    return 100.0 if exit_code == 0 else 0.0


def score_tests(agent: TestCounts, baseline: TestCounts) -> float:
    # A run that reports no test at all cannot show correctness: pass rate 0.
    pass_rate = agent.passed / agent.total if agent.total else 0.0
    new_tests = agent.total - baseline.total
    bonus = new_tests / agent.total * 10 if new_tests > 0 else 0.0
    if agent.passed >= baseline.passed:
        regression_penalty = 0.0
    else:
        regression_penalty = (baseline.passed - agent.passed) / baseline.passed * 50
    return clamp(pass_rate * 100 + bonus - regression_penalty, 0, 100)


def score_lint(agent: LintCounts, baseline: LintCounts) -> float:
    new_errors = max(0, agent.errors - baseline.errors)
    new_warnings = max(0, agent.warnings - baseline.warnings)
    resolved = max(0, (baseline.errors + baseline.warnings) - (agent.errors + agent.warnings))
    return clamp(100 - new_errors * 10 - new_warnings * 2 + resolved * 1, 0, 100)


def score_diff_size(lines_added: int, lines_removed: int, files_changed: int) -> float:
    churn = lines_added + lines_removed
    if churn <= 100:
        churn_score = 100.0
    elif churn <= 500:
        churn_score = 100 - (churn - 100) / 400 * 40
    else:
        churn_score = max(20.0, 60 - (churn - 500) / 1000 * 40)
    if files_changed <= 5:
        file_score = 100.0
    elif files_changed <= 15:
        file_score = 100 - (files_changed - 5) / 10 * 30
    else:
        file_score = max(30.0, 70 - (files_changed - 15) / 20 * 40)
    return churn_score * 0.6 + file_score * 0.4


MIN_DURATION_S = 1e-3  # a zero duration would make every other agent score 0


def score_speed(durations: Mapping[str, float]) -> dict[str, float]:
    """Fastest agent 100; others fastest/duration * 100."""
    if not durations:
        return {}
    if any(d < 0 for d in durations.values()):
        raise ValueError("speed: durations must not be negative")
    floored = {name: max(d, MIN_DURATION_S) for name, d in durations.items()}
    fastest = min(floored.values())
    return {name: fastest / d * 100 for name, d in floored.items()}


def calculate_composite(scores: DimensionScores, weights: RaceWeights) -> float:
    """Weighted mean over the measured dimensions: missing ones are renormalised away."""
    present = [(getattr(scores, d), getattr(weights, d)) for d in DIMENSIONS]
    present = [(s, w) for s, w in present if s is not None]
    total_weight = sum(w for _, w in present)
    if total_weight == 0:
        raise ValueError("composite: no measured dimension carries weight")
    return float(sum(s * w for s, w in present) / total_weight)


class Thresholds(StrictModel):
    auto_merge_minimum: Score = 85.0
    fail_maximum: Score = 30.0

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        # Inverted, a winner below both would be auto-merged: the verdict tests the minimum first.
        if self.auto_merge_minimum < self.fail_maximum:
            raise ValueError(
                f"thresholds: auto_merge_minimum ({self.auto_merge_minimum:g}) is below "
                f"fail_maximum ({self.fail_maximum:g})"
            )
        return self


class Verdict(StrEnum):
    AUTO_MERGE = "auto-merge"
    ALL_FAILED = "all-failed"
    REVIEW = "review"


class AgentScore(StrictModel):
    name: str
    scores: DimensionScores
    composite: float


class RankedAgent(StrictModel):
    rank: int
    name: str
    scores: DimensionScores
    composite: float


def score_agents(agents: Mapping[str, DimensionScores], weights: RaceWeights) -> list[AgentScore]:
    return [
        AgentScore(name=name, scores=s, composite=calculate_composite(s, weights))
        for name, s in agents.items()
    ]


def rank_agents(agents: Sequence[AgentScore]) -> list[RankedAgent]:
    """By composite, descending; exact ties share a rank, listed by name."""
    ordered = sorted(agents, key=lambda a: (-a.composite, a.name))
    ranked: list[RankedAgent] = []
    for position, agent in enumerate(ordered, start=1):
        tie = ranked and ranked[-1].composite == agent.composite
        ranked.append(
            RankedAgent(
                rank=ranked[-1].rank if tie else position,
                name=agent.name,
                scores=agent.scores,
                composite=agent.composite,
            )
        )
    return ranked


def race_verdict(ranked: Sequence[RankedAgent], thresholds: Thresholds | None = None) -> Verdict:
    """Winner >= auto_merge_minimum: auto-merge; winner < fail_maximum: all failed; else review."""
    limits = thresholds or Thresholds()
    if not ranked:
        return Verdict.ALL_FAILED
    best = ranked[0].composite
    if best >= limits.auto_merge_minimum:
        return Verdict.AUTO_MERGE
    if best < limits.fail_maximum:
        return Verdict.ALL_FAILED
    return Verdict.REVIEW


def format_composite(value: float) -> str:
    """One decimal, half up: 93.25 -> 93.3 (as the rubric prints it)."""
    return format_half_up(value, 1)


def _cell(label: str, value: float | None, build_failed: bool) -> str:
    if value is None or (build_failed and label in ("TESTS", "LINT")):
        return f"[{label}: --]"
    if label == "BUILD":
        return f"[{label}: {'✓' if value > 0 else '✗'}]"
    return f"[{label}: {format_half_up(value)}]"


def format_race_results(
    ranked: Sequence[RankedAgent], task: str | None = None, verdict: Verdict | None = None
) -> str:
    title = f'Race Results — Task: "{task}"' if task else "Race Results"
    name_width = max([len(r.name) for r in ranked] or [0]) + 2
    lines = [title, "=" * max(44, len(title)), ""]
    for r in ranked:
        s = r.scores
        failed = s.build is not None and s.build == 0
        cells = " ".join(
            _cell(label, getattr(s, dim), failed)
            for label, dim in zip(
                ("BUILD", "TESTS", "LINT", "DIFF", "SPEED"), DIMENSIONS, strict=True
            )
        )
        lines.append(
            f"  #{r.rank:<2} {r.name:<{name_width}} "
            f"{format_composite(r.composite):>5} / 100    {cells}"
        )
    if ranked:
        lines += ["", f"Winner: {ranked[0].name}"]
    if verdict is not None:
        lines.append(f"Verdict: {verdict.value}")
    return "\n".join(lines)
