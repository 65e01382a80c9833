"""Summary statistics used by the aggregations: pure Python, deterministic for a given seed."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

# z for a two-sided 95% interval.
Z_95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (well behaved at 0% and 100%)."""
    if trials <= 0:
        raise ValueError("trials must be positive")
    if not 0 <= successes <= trials:
        raise ValueError("successes must lie in [0, trials]")
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def interquartile_mean(values: Sequence[float]) -> float:
    """Mean of the middle half: cuts int(n/4) values from each end (scipy's trim_mean(x, 0.25))."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    cut = int(0.25 * len(ordered))
    return statistics.fmean(ordered[cut : len(ordered) - cut])


def bootstrap_interval(
    values: Sequence[float],
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the interquartile mean.

    Seeded, so the same scores always give the same interval (no dependence on run order).
    """
    if not values:
        raise ValueError("no values")
    rng = random.Random(seed)
    n = len(values)
    # rng.choices draws a resample in one call: ~3x faster than n randrange calls.
    estimates = sorted(interquartile_mean(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = estimates[math.floor(tail * (resamples - 1))]
    high = estimates[math.ceil((1 - tail) * (resamples - 1))]
    return low, high
