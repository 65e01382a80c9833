"""The race's rules (seeds/race-scoring-engine.md): the dimensions a race measures, the weights,
the composite, ranking and verdict.

Each dimension's own formula is scoring/race_dimensions.py's (scores that need other agents or the
baseline take them explicitly, so the reducer computes them once every check is in). The rubric's
CLI layout of the results is here, beside the composite's display rule it shares with ties.

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

from scoring._common import StrictModel, competition_ranks, format_half_up
from scoring.race_dimensions import Score
from scoring.race_tests import TestChanges

DimensionName = Literal["build", "tests", "lint", "diff_size", "speed"]
DIMENSIONS: tuple[DimensionName, ...] = ("build", "tests", "lint", "diff_size", "speed")
# Weights are relative (the rubric's sum to 100). The bounds keep every sum finite and every
# product exact to the last digits (a weight of 1e-320 would lose them).
MAX_WEIGHT = 1_000_000
MIN_POSITIVE_WEIGHT = 1e-6
Weight = Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False)]


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
    # The race could not be scored at all (its base's environment could not be built): the
    # reducer's, never race_verdict's; no agent is ranked, and the summary says why.
    FAILED = "failed"


class AgentScore(StrictModel):
    name: str
    scores: DimensionScores
    composite: float
    notes: list[str] = Field(default_factory=list)
    # The baseline's tests this branch broke, skipped or no longer runs, by name (None: not
    # compared); a winner with any is held for review (review_reason).
    test_changes: TestChanges | None = None


class ScoredAgent(StrictModel):
    rank: int
    name: str
    composite: float
    scores: DimensionScores
    notes: list[str] = Field(default_factory=list)
    test_changes: TestChanges | None = None


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
    ranks = competition_ranks([a.composite for a in ordered])
    return [
        ScoredAgent(
            rank=r,
            name=a.name,
            composite=a.composite,
            scores=a.scores,
            notes=a.notes,
            test_changes=a.test_changes,
        )
        for r, a in zip(ranks, ordered, strict=True)
    ]


def tied_at_top(ranked: Sequence[ScoredAgent]) -> list[str]:
    """The agents whose composite reads the same as the best one's (one decimal, as shown):
    more than one is a tie that no name order may break."""
    if not ranked:
        return []
    best = format_composite(ranked[0].composite)
    return [r.name for r in ranked if format_composite(r.composite) == best]


def race_verdict(
    ranked: Sequence[ScoredAgent],
    thresholds: Thresholds | None = None,
    unchecked: Collection[str] = (),
) -> Verdict:
    """Winner >= auto_merge_minimum: auto-merge, unless held for review (review_reason: a tie
    at the top, an agent in `unchecked`, whose check could not run, or a winner that broke or
    skipped a baseline test); winner < fail_maximum: all failed; else review."""
    limits = thresholds or Thresholds()
    if not ranked:
        return Verdict.ALL_FAILED
    best = ranked[0].composite
    if best >= limits.auto_merge_minimum:
        held = review_reason(ranked, limits, unchecked) is not None
        return Verdict.REVIEW if held else Verdict.AUTO_MERGE
    if best < limits.fail_maximum:
        return Verdict.ALL_FAILED
    return Verdict.REVIEW


def review_reason(
    ranked: Sequence[ScoredAgent], thresholds: Thresholds, unchecked: Collection[str] = ()
) -> str | None:
    """Why a winner at or above auto_merge_minimum is not auto-merged: a tie at the top (no
    name order may pick), agents that could not be checked (a branch nobody scored might
    have won: a person looks), or a winner that broke, skipped or dropped baseline tests (the
    seed compares counts only: one broken test and two added pass its regression term; the
    tests are named). None when nothing holds it back."""
    if not ranked or ranked[0].composite < thresholds.auto_merge_minimum:
        return None
    reasons = []
    tied = tied_at_top(ranked)
    if len(tied) > 1:
        reasons.append(f"{', '.join(tied)} tie at the top")
    if unchecked:
        reasons.append(f"{', '.join(unchecked)} could not be checked")
    changes = ranked[0].test_changes
    if len(tied) == 1 and changes is not None and changes.holds:
        reasons.append(f"{ranked[0].name} {changes.describe()}")
    return "; ".join(reasons) or None


class RaceOutcome(StrictModel):
    task: str | None
    verdict: Verdict
    winner: str | None  # None when nobody scored, or when several tie at the top
    measured: list[DimensionName]
    agents: list[ScoredAgent]
    tied: list[str] = Field(default_factory=list)  # the agents tied at the top, when several
    unchecked: list[str] = Field(default_factory=list)  # whose checks could not run
    review_reason: str | None = None  # why a winner above auto_merge_minimum is held back


def race_outcome(
    task: str | None,
    measured: list[DimensionName],
    scored: Sequence[AgentScore],
    thresholds: Thresholds,
    unchecked: Sequence[str] = (),
) -> RaceOutcome:
    ranked = rank_agents(scored)
    tied = tied_at_top(ranked)
    return RaceOutcome(
        task=task,
        verdict=race_verdict(ranked, thresholds, unchecked),
        winner=ranked[0].name if len(tied) == 1 else None,
        measured=measured,
        agents=ranked,
        tied=tied if len(tied) > 1 else [],
        unchecked=list(unchecked),
        review_reason=review_reason(ranked, thresholds, unchecked),
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
    return f"[{label}: {format_dimension(value)}]"


def format_dimension(value: float) -> str:
    """A dimension's score as a whole number when it is one, else with one decimal (half up):
    99.73 reads 99.7, never 100 as a rounded 100 would."""
    return format_half_up(value) if float(value).is_integer() else format_half_up(value, 1)


def format_race_results(
    ranked: Sequence[ScoredAgent],
    task: str | None = None,
    verdict: Verdict | None = None,
    branches: Mapping[str, str] | None = None,
    merge_hint: str | None = None,
    review_reason: str | None = None,
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
        why = f" ({review_reason})" if review_reason and verdict is Verdict.REVIEW else ""
        lines.append(f"Verdict: {verdict.value}{why}")
    notes = [f"  {r.name}: {note}" for r in ranked for note in r.notes]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)
