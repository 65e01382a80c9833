"""scoring/compare.py against an independent computation: the point is scipy's Mann-Whitney
U / (n·m) exactly, the interval scipy.stats.bootstrap's percentile interval (each sample
resampled apart) within the bootstrap's own error; the interval holds the point and narrows with
more episodes; a pair the episodes separate and one they do not."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from scoring.compare import compare_scores, episodes_needed, probability_of_improvement

# Two percentile intervals of 2,000 resamples each differ by Monte-Carlo error: the 2.5% point
# of 2,000 draws moves by about sqrt(.025·.975/2000)/density, a few hundredths at these sizes.
BOOTSTRAP_ERROR = 0.03


def draw(seed: int, n: int, shift: float) -> list[float]:
    """Scores rounded to one decimal, so that ties occur."""
    rng = random.Random(seed)
    return [round(rng.gauss(shift, 1.0), 1) for _ in range(n)]


def u_over_nm(a: list[float], b: list[float]) -> float:
    return float(stats.mannwhitneyu(a, b).statistic) / (len(a) * len(b))


def scipy_interval(a: list[float], b: list[float]) -> tuple[float, float]:
    found = stats.bootstrap(
        (np.array(a), np.array(b)),
        lambda x, y: u_over_nm(list(x), list(y)),
        paired=False,
        vectorized=False,
        method="percentile",
        n_resamples=2000,
        random_state=0,
    )
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


@pytest.mark.parametrize(("n", "m", "shift"), [(10, 10, 0.5), (40, 25, 0.5), (30, 30, -0.3)])
def test_equals_scipy_within_the_bootstrap_error(n: int, m: int, shift: float) -> None:
    a, b = draw(n, n, shift), draw(100 + m, m, 0.0)
    found = compare_scores(a, b)
    assert found.probability == u_over_nm(a, b) == probability_of_improvement(a, b)
    low, high = scipy_interval(a, b)
    assert abs(found.ci95[0] - low) < BOOTSTRAP_ERROR
    assert abs(found.ci95[1] - high) < BOOTSTRAP_ERROR
    assert found.ci95[0] <= found.probability <= found.ci95[1]
    assert (found.episodes_a, found.episodes_b, found.resamples) == (n, m, 2000)


def test_known_scores() -> None:
    """A: 3, 2, 1; B: 2, 0. Pairs: 3>2, 3>0, 2=2, 2>0, 1<2, 1>0: (4 + 0.5) / 6 = 0.75."""
    assert probability_of_improvement([3, 2, 1], [2, 0]) == 0.75
    assert probability_of_improvement([2, 0], [3, 2, 1]) == 0.25  # 1 - P(A beats B)
    assert probability_of_improvement([5, 5], [5]) == 0.5


def test_the_interval_narrows_with_more_episodes() -> None:
    widths = []
    for n in (8, 32, 128):
        found = compare_scores(draw(1, n, 0.4), draw(2, n, 0.0))
        low, high = found.ci95
        assert low <= found.probability <= high
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]
    assert widths[2] < widths[0] / 2.5  # about 1/sqrt(n): a quarter for 16 times the episodes


def test_separated_and_not() -> None:
    better, worse = draw(3, 30, 1.5), draw(4, 30, 0.0)
    found = compare_scores(better, worse)
    assert found.better == "a" and found.ci95[0] > 0.5 and found.episodes_needed is None
    swapped = compare_scores(worse, better)
    assert swapped.better == "b" and swapped.ci95[1] < 0.5
    assert swapped.probability == pytest.approx(1 - found.probability)
    alike = compare_scores(draw(5, 8, 0.0), draw(6, 8, 0.0))
    assert alike.better is None and alike.ci95[0] <= 0.5 <= alike.ci95[1]


def test_the_estimate_of_episodes_needed() -> None:
    """P about 0.68 is not separated by 10 episodes each; the estimate (25) is right: 40 drawn
    from the same distributions are."""
    few = compare_scores(draw(1, 10, 0.5), draw(2, 10, 0.0))
    assert few.better is None and few.episodes_needed is not None
    assert 10 < few.episodes_needed <= 40
    more = compare_scores(draw(1, 40, 0.5), draw(2, 40, 0.0))
    assert more.better == "a"
    # By hand: 0.7 reaches 0.4 towards 0.5 (h), 0.2 from it (d); 10 and 10 episodes:
    # 2·(h/d)² / (1/10 + 1/10) = 40 each; 8 and 32: 2·4 / (5/32) = 51.2, so 52.
    assert episodes_needed(0.7, (0.3, 0.9), 10, 10) == 40
    assert episodes_needed(0.3, (0.1, 0.7), 8, 32) == 52
    assert episodes_needed(0.5, (0.2, 0.8), 10, 10) is None


def test_identical_scores_and_the_seed() -> None:
    same = compare_scores([7.0] * 5, [7.0] * 9)
    assert (same.probability, same.ci95, same.better, same.episodes_needed) == (
        0.5,
        (0.5, 0.5),
        None,
        None,
    )
    a, b = draw(7, 12, 0.2), draw(8, 12, 0.0)
    assert compare_scores(a, b, seed=3) == compare_scores(a, b, seed=3)
    assert compare_scores(a, b, seed=3).ci95 != compare_scores(a, b, seed=4).ci95


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [([], [1.0], "at least one episode"), ([1.0], [math.nan], "finite")],
)
def test_refused(a: list[float], b: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compare_scores(a, b)


def test_no_conclusion_from_a_side_of_one_trajectory() -> None:
    """Four episodes that are one trajectory (a deterministic agent, sticky_p 0) against
    anything: the point and interval are computed, but no verdict and no episodes needed."""
    one, other = [1000.0] * 4, [900.0, 950.0, 980.0, 990.0]
    told = compare_scores(one, other)
    assert told.better == "a" and told.conclusive and told.trajectories_a is None
    for trajectories in ((1, 4), (4, 1), (0, 1)):
        c = compare_scores(one, other, trajectories=trajectories)
        assert (c.probability, c.ci95) == (told.probability, told.ci95)
        assert not c.conclusive and c.better is None and c.episodes_needed is None
        assert (c.trajectories_a, c.trajectories_b) == trajectories
    tied = compare_scores(one, one, trajectories=(1, 1))
    assert tied.probability == 0.5 and tied.episodes_needed is None and not tied.conclusive
    two = compare_scores([1000.0, 1001.0] * 2, other, trajectories=(2, 4))
    assert two.conclusive and two.better == "a"
