"""scoring/runs.py against independent computations of rliable's numbers on 3 seeds × 2
algorithms: the pooled IQM is scipy's trim_mean(axis=None) exactly, P(A > B) the mean over
episodes (strata) of scipy's Mann-Whitney U / (n·m) over runs exactly, and both 95% intervals
are those of a numpy stratified bootstrap written here (runs resampled within each stratum),
within Monte-Carlo error; rliable's own functions where the package is installed. A side under
two distinct trajectories concludes nothing; a matrix rliable would not take is refused."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from scoring.runs import compare_runs, iqm_interval, pooled_iqm, run_probability

# 3 runs × 8 episodes of two algorithms, Mario-like scores with ties (a run's episodes differ
# under sticky actions; the runs differ more).
ALGO_A = [
    [1228.0, 1310.5, 1228.0, 905.2, 1402.8, 1228.0, 1190.1, 1350.0],
    [998.4, 1102.0, 1250.3, 998.4, 870.0, 1120.7, 1301.2, 1044.9],
    [1401.9, 1388.0, 1510.2, 1290.4, 1460.0, 1401.9, 1333.3, 1422.1],
]
ALGO_B = [
    [1010.0, 905.2, 1180.6, 1010.0, 760.3, 1099.9, 1228.0, 980.5],
    [1250.1, 1190.0, 1302.4, 1120.9, 1250.1, 1288.8, 1175.5, 1230.0],
    [640.2, 702.9, 905.2, 688.0, 590.4, 812.3, 760.3, 700.0],
]
RESAMPLES = 4000
REFERENCE_RESAMPLES = 20_000
# Our endpoint and the reference's are order statistics of two bootstraps of RESAMPLES and
# REFERENCE_RESAMPLES draws: where our endpoint falls in the reference distribution, as a
# quantile, moves from 0.025 by sqrt(p(1-p)(1/4000 + 1/20000)) ≈ 0.0027; 0.012 is over 4 of those.
QUANTILE_ERROR = 0.012


def numpy_bootstrap(scores: NDArray[np.float64], reps: int, rng: np.random.Generator) -> NDArray:
    """rliable's StratifiedBootstrap: (reps, runs, strata), runs drawn anew in each stratum."""
    runs, strata = scores.shape
    picks = rng.integers(0, runs, size=(reps, runs, strata))
    return scores[picks, np.arange(strata)]


def numpy_probability(x: NDArray, y: NDArray) -> NDArray:
    """P(A > B) of each resample: per stratum wins + ties/2 over run pairs, averaged."""
    wins = (x[:, :, None, :] > y[:, None, :, :]) + 0.5 * (x[:, :, None, :] == y[:, None, :, :])
    return wins.mean(axis=(1, 2, 3))


def assert_same_interval(ours: tuple[float, float], reference: NDArray) -> None:
    """Each endpoint sits at the reference distribution's 2.5% / 97.5% point within error."""
    for endpoint, target in zip(ours, (0.025, 0.975), strict=True):
        below = float(np.mean(reference < endpoint))
        at_or_below = float(np.mean(reference <= endpoint))
        assert below - QUANTILE_ERROR <= target <= at_or_below + QUANTILE_ERROR, (endpoint, below)


def test_the_iqm_and_p_are_rliables_numbers() -> None:
    a, b = np.array(ALGO_A), np.array(ALGO_B)
    assert pooled_iqm(ALGO_A) == pytest.approx(stats.trim_mean(a, 0.25, axis=None), abs=1e-9)
    u = [stats.mannwhitneyu(a[:, t], b[:, t]).statistic / 9 for t in range(8)]
    assert run_probability(ALGO_A, ALGO_B) == pytest.approx(float(np.mean(u)), abs=1e-12)
    found = compare_runs(ALGO_A, ALGO_B, resamples=RESAMPLES, seed=3, trajectories=(20, 22))
    assert (found.runs_a, found.runs_b, found.strata) == (3, 3, 8)
    assert found.iqm_a == pooled_iqm(ALGO_A) and found.iqm_b == pooled_iqm(ALGO_B)
    assert found.probability == run_probability(ALGO_A, ALGO_B)
    rng = np.random.default_rng(7)
    x, y = (numpy_bootstrap(s, REFERENCE_RESAMPLES, rng) for s in (a, b))
    assert_same_interval(found.ci95, numpy_probability(x, y))
    for ours, resampled in ((found.iqm_ci95_a, x), (found.iqm_ci95_b, y)):
        flat = resampled.reshape(REFERENCE_RESAMPLES, -1)
        assert_same_interval(ours, stats.trim_mean(flat, 0.25, axis=1))
    assert found.ci95[0] <= found.probability <= found.ci95[1]
    assert found.iqm_ci95_a[0] <= found.iqm_a <= found.iqm_ci95_a[1]


def test_rliable_itself_where_installed() -> None:
    """rliable's own metric functions (Agarwal et al. 2021), where the package imports: the
    point estimates exactly, each interval as rliable's functions give it over stratified
    resamples. Its StratifiedBootstrap class is not used: rliable 1.2.0 hands arch
    `random_state`, which arch 8 no longer takes, and arch 7 fails under pandas 3; the resamples
    are numpy_bootstrap's, rliable's scheme."""
    metrics = pytest.importorskip("rliable.metrics")
    a, b = np.array(ALGO_A), np.array(ALGO_B)
    assert pooled_iqm(ALGO_A) == pytest.approx(metrics.aggregate_iqm(a), abs=1e-9)
    assert run_probability(ALGO_A, ALGO_B) == pytest.approx(
        metrics.probability_of_improvement(a, b), abs=1e-12
    )
    found = compare_runs(ALGO_A, ALGO_B, resamples=RESAMPLES, seed=3)
    rng = np.random.default_rng(11)
    x = numpy_bootstrap(a, REFERENCE_RESAMPLES, rng)
    assert_same_interval(found.iqm_ci95_a, np.array([metrics.aggregate_iqm(s) for s in x]))
    # 4,000 resamples of scipy's U (slower): sqrt(.025·.975·(2/4000)) ≈ 0.0035, 0.012 over 3 of it
    x, y = (numpy_bootstrap(s, 4000, rng) for s in (a, b))
    pairs = zip(x, y, strict=True)
    reference = np.array([metrics.probability_of_improvement(u, v) for u, v in pairs])
    assert_same_interval(found.ci95, reference)


def test_separated_algorithms_and_a_side_of_one_trajectory() -> None:
    strong = [[v + 1000 for v in run] for run in ALGO_A]
    found = compare_runs(strong, ALGO_B, resamples=500, trajectories=(24, 24))
    assert found.probability == 1.0 and found.better == "a" and found.conclusive
    same = compare_runs(strong, ALGO_B, resamples=500, trajectories=(1, 24))
    assert not same.conclusive and same.better is None
    assert same.trajectories_a == 1 and same.probability == 1.0


def test_the_interval_narrows_with_more_runs() -> None:
    width = []
    for copies in (1, 4):
        low, high = iqm_interval(ALGO_A * copies, resamples=1000)
        width.append(high - low)
    assert width[1] < width[0] / 1.5  # ~ 1/sqrt(4) of it


@pytest.mark.parametrize(
    ("a", "message"),
    [
        ([[1.0, 2.0]], "a: 1 run(s); a comparison over runs needs at least 2"),
        ([[1.0, 2.0], [1.0]], "a: runs of [1, 2] episodes"),
        ([[1.0], [math.nan]], "a: scores must be finite"),
        ([[1.0], [2.0]], "a has 1 episodes per run and b 8"),
    ],
)
def test_a_matrix_rliable_would_not_take_is_refused(a: list[list[float]], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        compare_runs(a, ALGO_B)
