"""The race's five dimensions one at a time (seeds/race-scoring-engine.md): what each takes (a
command's outcome, counts of tests and lint findings, diff stats, durations) and the rubric's
formula for it. Scores that need other agents (speed) or the baseline (tests, lint) take those
explicitly. The race's rules that combine them (composite, ranking, verdict) are
scoring/race.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import Field

from scoring._common import StrictModel, clamp

# Finite, bounded floats: an infinite weight or score would make the composite NaN.
Score = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
# Counts (tests, lint findings, diff lines) far above any real run, yet exact as floats: a ratio
# of two 400-digit integers would overflow a float.
MAX_COUNT = 10**15
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
# Negative: killed by a signal (Python's convention); up to 2**32 - 1: Windows' status codes.
ExitCode = Annotated[int, Field(ge=-(2**31), le=2**32 - 1)]
Duration = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class TestCounts(StrictModel):
    __test__ = False  # not a pytest class

    passed: Count
    failed: Count = 0
    errors: Count = 0
    skipped: Count = 0  # skipped (ignored, todo) only: xfail and xpass are counted apart
    xfailed: Count = 0  # expected failures that failed (pytest's xfailed)
    xpassed: Count = 0  # expected failures that passed, not strict (pytest's xpassed)

    @property
    def total(self) -> int:
        # Skipped tests neither pass nor fail, nor do xfailed and xpassed (the seed counts
        # passed and failed); errors (e.g. a broken fixture) count as failures.
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
