"""The race scoring engine (seeds/race-scoring-engine.md): dimensions, composite, ranking, verdict.

Dimension functions take measurements; scores that need other agents (speed) or the baseline
(tests, lint) take those explicitly, so the reducer computes them once every check is in.

Two inputs reach the same rules (``apply_race_rules``, ``calculate_composite``, ``rank_agents``):
dimension scores given directly (``score_agents`` / ``score_race_dimensions``), and the raw
measures of a race (exit codes, parsed counts, diff stats, durations: ``score_race`` in
scoring/race_measures.py).
The rules (SEED-NOTES): a dimension leaves the composite, and the weights are renormalised over
the others, only when the *race* does not measure it (no command configured), the same for every
agent; a failed build makes tests and lint 0, never "missing".
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from scoring._common import StrictModel, clamp, format_half_up

DimensionName = Literal["build", "tests", "lint", "diff_size", "speed"]
DIMENSIONS: tuple[DimensionName, ...] = ("build", "tests", "lint", "diff_size", "speed")
# Finite, bounded floats: an infinite weight or score would make the composite NaN.
Score = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
# Weights are relative (the rubric's sum to 100). The bounds keep every sum finite and every
# product exact to the last digits (a weight of 1e-320 would lose them).
MAX_WEIGHT = 1_000_000
MIN_POSITIVE_WEIGHT = 1e-6
Weight = Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False)]
# Counts (tests, lint findings, diff lines) far above any real run, yet exact as floats: a ratio
# of two 400-digit integers would overflow a float.
MAX_COUNT = 10**15
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
# Negative: killed by a signal (Python's convention); up to 2**32 - 1: Windows' status codes.
ExitCode = Annotated[int, Field(ge=-(2**31), le=2**32 - 1)]
Duration = Annotated[float, Field(ge=0, allow_inf_nan=False)]


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


class DimensionResult(StrictModel):
    """One dimension's score and what the reader should know about how it was reached."""

    score: Score
    notes: list[str] = Field(default_factory=list)


# -- the five dimensions ---------------------------------------------------------------------------


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


def score_tests_without_baseline(agent: TestCounts) -> float:
    """The formula without its baseline terms (no new-test bonus, no regression penalty): used
    when the baseline's counts are unknown, which is not the same as a baseline of 0 tests."""
    return agent.passed / agent.total * 100 if agent.total else 0.0


def score_lint(agent: LintCounts, baseline: LintCounts) -> float:
    new_errors = max(0, agent.errors - baseline.errors)
    new_warnings = max(0, agent.warnings - baseline.warnings)
    resolved = max(0, (baseline.errors + baseline.warnings) - (agent.errors + agent.warnings))
    return clamp(100 - new_errors * 10 - new_warnings * 2 + resolved * 1, 0, 100)


def score_lint_without_baseline(agent: LintCounts) -> float:
    """Baseline unknown: every finding counts as new, nothing as resolved."""
    return clamp(100 - agent.errors * 10 - agent.warnings * 2, 0, 100)


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


# -- raw measures of one command -------------------------------------------------------------------


class BuildOutcome(StrictModel):
    exit_code: ExitCode
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class TestOutcome(StrictModel):
    """A test command's run; counts None: its output was not parsed (exit code only)."""

    __test__ = False

    exit_code: ExitCode
    timed_out: bool = False
    counts: TestCounts | None = None
    runner: str | None = None


class LintOutcome(StrictModel):
    """A lint command's run; counts None: its output was not parsed (exit code only)."""

    exit_code: ExitCode
    timed_out: bool = False
    counts: LintCounts | None = None
    linter: str | None = None


NO_BASELINE_TERMS = "pass rate only (no new-test bonus, no regression penalty)"


def _baseline_trouble(baseline: TestOutcome | LintOutcome | None) -> str:
    """Why a baseline's counts cannot be used (called only when they cannot)."""
    if baseline is None:
        return "no baseline run"
    if baseline.timed_out:
        return "the baseline timed out"
    return "the baseline's output was not parsed"


def score_tests_outcome(agent: TestOutcome, baseline: TestOutcome | None) -> DimensionResult:
    """Timed out: 0. Counts parsed: the rubric's formula against the baseline's counts, or without
    the baseline terms when those are unknown. Counts not parsed: the exit code decides."""
    if agent.timed_out:
        return DimensionResult(score=0.0, notes=["tests timed out"])
    if agent.counts is None:
        return DimensionResult(
            score=score_tests_exit_code(agent.exit_code),
            notes=["tests: output not parsed: scored by the exit code"],
        )
    if baseline is not None and not baseline.timed_out and baseline.counts is not None:
        return DimensionResult(score=score_tests(agent.counts, baseline.counts))
    return DimensionResult(
        score=score_tests_without_baseline(agent.counts),
        notes=[f"tests: {_baseline_trouble(baseline)}: {NO_BASELINE_TERMS}"],
    )


def score_lint_outcome(agent: LintOutcome, baseline: LintOutcome | None) -> DimensionResult:
    """Timed out: 0. Counts parsed: against the baseline's, or every finding new when those are
    unknown. Counts not parsed: the exit code decides (0 → 100, else 0)."""
    if agent.timed_out:
        return DimensionResult(score=0.0, notes=["lint timed out"])
    if agent.counts is None:
        return DimensionResult(
            score=100.0 if agent.exit_code == 0 else 0.0,
            notes=["lint: output not parsed: scored by the exit code"],
        )
    if baseline is not None and not baseline.timed_out and baseline.counts is not None:
        return DimensionResult(score=score_lint(agent.counts, baseline.counts))
    return DimensionResult(
        score=score_lint_without_baseline(agent.counts),
        notes=[f"lint: {_baseline_trouble(baseline)}: every finding counts as new"],
    )


# -- the race's rules, shared by both inputs -------------------------------------------------------

BUILD_FAILED_NOTE = "build failed: tests and lint not run"


def resolve_measured(
    agents: Iterable[DimensionScores], measured: Iterable[DimensionName] | None = None
) -> list[DimensionName]:
    """The dimensions the race measures, in DIMENSIONS order: those named, or by default every
    dimension some agent gives, plus tests and lint whenever build is among them (a race that
    builds also tests and lints, as the rubric's configuration does)."""
    if measured is not None:
        chosen = set(measured)
    else:
        chosen = {d for s in agents for d in DIMENSIONS if getattr(s, d) is not None}
        if "build" in chosen:
            chosen |= {"tests", "lint"}
    return [d for d in DIMENSIONS if d in chosen]


def apply_race_rules(
    scores: DimensionScores, measured: Collection[DimensionName], where: str = ""
) -> tuple[DimensionScores, list[str]]:
    """One agent's dimension scores under the race's rules: build is 0 or 100; a failed build
    makes tests and lint 0 whatever was given; every other measured dimension must be given, and
    no unmeasured one. ``where`` ('agents[1]') prefixes the field an error names."""
    prefix = f"{where}." if where else ""
    for d in DIMENSIONS:
        if d not in measured and getattr(scores, d) is not None:
            raise ValueError(
                f"{prefix}{d}: given, but the race does not measure {d} "
                f"(measured: {', '.join(measured) or 'none'})"
            )
    if scores.build is not None and scores.build not in (0, 100):
        raise ValueError(f"{prefix}build: must be 0 or 100")
    notes: list[str] = []
    if "build" in measured and scores.build == 0:
        scores = scores.model_copy(update={d: 0.0 for d in ("tests", "lint") if d in measured})
        notes.append(BUILD_FAILED_NOTE)
    for d in measured:
        if getattr(scores, d) is None:
            raise ValueError(
                f"{prefix}{d}: missing; the race measures {d} "
                '(list the measured dimensions in "measured" to leave one out)'
            )
    return scores, notes


def check_measured_weight(weights: RaceWeights, measured: Collection[DimensionName]) -> None:
    if not measured:
        raise ValueError("measured: no dimension is measured (no agent gives a score)")
    if sum(getattr(weights, d) for d in measured) == 0:
        raise ValueError(
            f"composite: no measured dimension carries weight (measured: {', '.join(measured)})"
        )


def calculate_composite(
    scores: DimensionScores, weights: RaceWeights, measured: Collection[DimensionName]
) -> float:
    """Weighted mean over the race's measured dimensions, the weights renormalised over them (as
    if an unmeasured dimension weighed 0). Every measured dimension must have a score."""
    check_measured_weight(weights, measured)
    total_weight = sum(getattr(weights, d) for d in measured)
    weighted = 0.0
    for d in measured:
        value = getattr(scores, d)
        if value is None:
            raise ValueError(f"{d}: missing; the race measures {d}")
        weighted += value * getattr(weights, d)
    return float(weighted / total_weight)


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
    notes: list[str] = Field(default_factory=list)


class ScoredAgent(StrictModel):
    rank: int
    name: str
    composite: float
    scores: DimensionScores
    notes: list[str] = Field(default_factory=list)


RankedAgent = ScoredAgent  # its former name


def score_agents(
    agents: Mapping[str, DimensionScores],
    weights: RaceWeights,
    measured: Iterable[DimensionName] | None = None,
) -> list[AgentScore]:
    """Composites under the race's rules; measured: see resolve_measured (None: the default).
    Errors name the agent by its position in ``agents`` ('agents[1].tests: missing; ...')."""
    dims = resolve_measured(agents.values(), measured)
    check_measured_weight(weights, dims)
    scored: list[AgentScore] = []
    for i, (name, given) in enumerate(agents.items()):
        scores, notes = apply_race_rules(given, dims, f"agents[{i}]")
        composite = calculate_composite(scores, weights, dims)
        scored.append(AgentScore(name=name, scores=scores, composite=composite, notes=notes))
    return scored


def rank_agents(agents: Sequence[AgentScore]) -> list[ScoredAgent]:
    """By composite, descending; exact ties share a rank, listed by name."""
    ordered = sorted(agents, key=lambda a: (-a.composite, a.name))
    ranked: list[ScoredAgent] = []
    for position, agent in enumerate(ordered, start=1):
        tie = ranked and ranked[-1].composite == agent.composite
        ranked.append(
            ScoredAgent(
                rank=ranked[-1].rank if tie else position,
                name=agent.name,
                composite=agent.composite,
                scores=agent.scores,
                notes=agent.notes,
            )
        )
    return ranked


def tied_at_top(ranked: Sequence[ScoredAgent]) -> list[str]:
    """The agents whose composite reads the same as the best one's (one decimal, as shown):
    more than one is a tie that no name order may break."""
    if not ranked:
        return []
    best = format_composite(ranked[0].composite)
    return [r.name for r in ranked if format_composite(r.composite) == best]


def race_verdict(ranked: Sequence[ScoredAgent], thresholds: Thresholds | None = None) -> Verdict:
    """Winner >= auto_merge_minimum: auto-merge, unless tied at the top (review: a person picks);
    winner < fail_maximum: all failed; else review."""
    limits = thresholds or Thresholds()
    if not ranked:
        return Verdict.ALL_FAILED
    best = ranked[0].composite
    if best >= limits.auto_merge_minimum:
        return Verdict.REVIEW if len(tied_at_top(ranked)) > 1 else Verdict.AUTO_MERGE
    if best < limits.fail_maximum:
        return Verdict.ALL_FAILED
    return Verdict.REVIEW


class RaceOutcome(StrictModel):
    task: str | None
    verdict: Verdict
    winner: str | None  # None when nobody scored, or when several tie at the top
    measured: list[DimensionName]
    agents: list[ScoredAgent]
    tied: list[str] = Field(default_factory=list)  # the agents tied at the top, when several


def race_outcome(
    task: str | None,
    measured: list[DimensionName],
    scored: Sequence[AgentScore],
    thresholds: Thresholds,
) -> RaceOutcome:
    ranked = rank_agents(scored)
    tied = tied_at_top(ranked)
    return RaceOutcome(
        task=task,
        verdict=race_verdict(ranked, thresholds),
        winner=ranked[0].name if len(tied) == 1 else None,
        measured=measured,
        agents=ranked,
        tied=tied if len(tied) > 1 else [],
    )


def score_race_dimensions(
    agents: Mapping[str, DimensionScores],
    *,
    weights: RaceWeights | None = None,
    thresholds: Thresholds | None = None,
    measured: Iterable[DimensionName] | None = None,
    task: str | None = None,
) -> RaceOutcome:
    """A race from dimension scores given directly (the rubric's table)."""
    weights = weights or RaceWeights()
    dims = resolve_measured(agents.values(), measured)
    scored = score_agents(agents, weights, dims)
    return race_outcome(task, dims, scored, thresholds or Thresholds())


# -- display ---------------------------------------------------------------------------------------


def format_composite(value: float) -> str:
    """One decimal, half up: 93.25 -> 93.3 (as the rubric prints it)."""
    return format_half_up(value, 1)


_LABELS = ("BUILD", "TESTS", "LINT", "DIFF", "SPEED")


def _cell(label: str, value: float | None, build_failed: bool) -> str:
    if value is None or (build_failed and label in ("TESTS", "LINT")):
        return f"[{label}: --]"
    if label == "BUILD":
        return f"[{label}: {'✓' if value > 0 else '✗'}]"
    return f"[{label}: {format_half_up(value)}]"


def format_race_results(
    ranked: Sequence[ScoredAgent],
    task: str | None = None,
    verdict: Verdict | None = None,
    branches: Mapping[str, str] | None = None,
    merge_hint: str | None = None,
) -> str:
    """The rubric's CLI layout: one aligned row per agent (an unmeasured dimension, or tests and
    lint after a failed build, show '--'), the winner (with its branch when known), the merge
    hint, the verdict, then any notes."""
    title = f'Race Results — Task: "{task}"' if task else "Race Results"
    name_width = max([len(r.name) for r in ranked] or [0]) + 2
    rows: list[list[str]] = []
    for r in ranked:
        s = r.scores
        failed = s.build is not None and s.build == 0
        rows.append(
            [
                _cell(label, getattr(s, dim), failed)
                for label, dim in zip(_LABELS, DIMENSIONS, strict=True)
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(_LABELS))] if rows else []
    lines = [title, "=" * max(44, len(title)), ""]
    for r, row in zip(ranked, rows, strict=True):
        cells = " ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        row_text = f"  #{r.rank:<2} {r.name:<{name_width}} {format_composite(r.composite):>5} / 100"
        lines.append(f"{row_text}    {cells}".rstrip())
    tied = tied_at_top(ranked)
    if len(tied) > 1:
        shown = format_composite(ranked[0].composite)
        lines += ["", f"Winner: none: {', '.join(tied)} tie at {shown} / 100 (a person picks)"]
    elif ranked:
        winner = ranked[0].name
        branch = (branches or {}).get(winner)
        lines += ["", f"Winner: {winner}" + (f" (branch: {branch})" if branch else "")]
        if merge_hint:
            lines.append(merge_hint)
    if verdict is not None:
        lines.append(f"Verdict: {verdict.value}")
    notes = [f"  {r.name}: {note}" for r in ranked for note in r.notes]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)
