"""Two algorithms compared over their runs (seeds) the way rliable does (Agarwal et al. 2021;
docs/mario.md, "Seeds and runs"). Each algorithm is a matrix of scores, one row per run and one
column per stratum: rliable's tasks, here a board's (level, episode) slots, on which every run
meets the same sticky draws. The IQM pools runs × strata (rliable's `aggregate_iqm`); its
interval is rliable's stratified bootstrap (runs resampled with replacement within each
stratum); P(A > B) is rliable's `probability_of_improvement` (per stratum, the Mann-Whitney U of
A's runs over B's divided by n·m, averaged over strata) with the stratified bootstrap of both
algorithms apart. Pure Python, seeded."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

from scoring._common import StrictModel
from scoring.compare import Better
from scoring.stats import interquartile_mean

Matrix = Sequence[Sequence[float]]  # runs × strata
RESAMPLES = 2000


class RunsComparison(StrictModel):
    runs_a: int
    runs_b: int
    strata: int  # episodes per run (the columns every run has)
    iqm_a: float
    iqm_b: float
    iqm_ci95_a: tuple[float, float]
    iqm_ci95_b: tuple[float, float]
    probability: float  # P(a run of A beats a run of B on an episode), ties half
    ci95: tuple[float, float]
    resamples: int
    seed: int
    better: Better | None  # the interval excludes 0.5 (and the comparison is conclusive)
    # At least this many distinct trajectories on each side (None: not known); under two on a
    # side nothing is concluded (docs/mario.md, "What a conclusion needs").
    trajectories_a: int | None = None
    trajectories_b: int | None = None
    conclusive: bool = True


def check_matrix(name: str, scores: Matrix) -> None:
    """A matrix rliable takes: at least two runs (a bootstrap over one run says nothing of
    runs), the same number of strata on each, finite scores; ValueError naming NAME."""
    if len(scores) < 2:
        raise ValueError(f"{name}: {len(scores)} run(s); a comparison over runs needs at least 2")
    widths = sorted({len(row) for row in scores})
    if widths[0] == 0 or len(widths) > 1:
        raise ValueError(f"{name}: runs of {widths} episodes; every run needs the same, at least 1")
    if not all(math.isfinite(v) for row in scores for v in row):
        raise ValueError(f"{name}: scores must be finite")


def pooled_iqm(scores: Matrix) -> float:
    """rliable's aggregate_iqm: scipy's trim_mean(scores, 0.25, axis=None), runs × strata pooled."""
    return interquartile_mean([v for row in scores for v in row])


def run_probability(a: Matrix, b: Matrix) -> float:
    """rliable's probability_of_improvement: for each stratum, U(A's runs over B's) / (n·m),
    averaged over the strata."""
    columns = range(len(a[0]))
    return statistics.fmean(
        _column_probability([r[t] for r in a], [r[t] for r in b]) for t in columns
    )


def iqm_interval(
    scores: Matrix, resamples: int = RESAMPLES, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of the pooled IQM under rliable's stratified bootstrap."""
    rng = random.Random(seed)
    estimates = [pooled_iqm(_resample(scores, rng)) for _ in range(resamples)]
    return _percentiles(estimates, confidence)


def compare_runs(
    a: Matrix,
    b: Matrix,
    resamples: int = RESAMPLES,
    seed: int = 0,
    trajectories: tuple[int, int] | None = None,
) -> RunsComparison:
    """A's runs against B's: both IQMs with their intervals, P(A > B) with its interval and the
    verdict; none when `trajectories` gives a side fewer than two."""
    check_matrix("a", a)
    check_matrix("b", b)
    if len(a[0]) != len(b[0]):
        raise ValueError(f"a has {len(a[0])} episodes per run and b {len(b[0])}: the same needed")
    if resamples < 1:
        raise ValueError("resamples must be positive")
    rng = random.Random(seed)
    estimates = [run_probability(_resample(a, rng), _resample(b, rng)) for _ in range(resamples)]
    low, high = _percentiles(estimates, 0.95)
    conclusive = trajectories is None or min(trajectories) >= 2
    better: Better | None = "a" if low > 0.5 else "b" if high < 0.5 else None
    return RunsComparison(
        runs_a=len(a),
        runs_b=len(b),
        strata=len(a[0]),
        iqm_a=pooled_iqm(a),
        iqm_b=pooled_iqm(b),
        iqm_ci95_a=iqm_interval(a, resamples, seed),
        iqm_ci95_b=iqm_interval(b, resamples, seed + 1),
        probability=run_probability(a, b),
        ci95=(low, high),
        resamples=resamples,
        seed=seed,
        better=better if conclusive else None,
        trajectories_a=None if trajectories is None else trajectories[0],
        trajectories_b=None if trajectories is None else trajectories[1],
        conclusive=conclusive,
    )


def _column_probability(x: Sequence[float], y: Sequence[float]) -> float:
    wins = sum((u > v) + 0.5 * (u == v) for u in x for v in y)
    return wins / (len(x) * len(y))


def _resample(scores: Matrix, rng: random.Random) -> list[list[float]]:
    """rliable's StratifiedBootstrap: in each stratum (column) the runs drawn with replacement,
    apart from the other strata."""
    runs, width = len(scores), len(scores[0])
    columns = [[scores[i][t] for i in rng.choices(range(runs), k=runs)] for t in range(width)]
    return [list(row) for row in zip(*columns, strict=True)]


def _percentiles(estimates: list[float], confidence: float) -> tuple[float, float]:
    """The same order statistics scoring/compare.py and scoring/stats.py take."""
    ordered = sorted(estimates)
    tail = (1 - confidence) / 2
    last = len(ordered) - 1
    return ordered[math.floor(tail * last)], ordered[math.ceil((1 - tail) * last)]
