"""Two agents' per-episode scores compared (rliable's "probability of improvement"): the
probability that an episode of A beats an episode of B, with a stratified bootstrap interval,
and whether the episodes are enough to tell the two apart. Pure Python, seeded."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Literal

from scoring._common import StrictModel

RESAMPLES = 2000
Better = Literal["a", "b"]


class Comparison(StrictModel):
    """P(A beats B) = P(X > Y) + 0.5·P(X = Y), X an episode of A and Y one of B: the
    Mann-Whitney U statistic of A over B divided by n·m."""

    probability: float
    ci95: tuple[float, float]  # percentile interval of the stratified bootstrap
    episodes_a: int
    episodes_b: int
    resamples: int
    seed: int
    better: Better | None  # the interval excludes 0.5; None: not separated
    # Not separated: about how many episodes each agent would need for the interval to exclude
    # 0.5, were the probability to stay where it is (docs/mario.md, "Comparing two agents");
    # None when separated, or when the probability is exactly 0.5 (nothing to separate).
    episodes_needed: int | None
    # How many distinct trajectories each side's episodes are (None: not known). Under two on a
    # side its episodes show one outcome however many there are (a deterministic protocol
    # replays one episode): nothing is concluded, `conclusive` is False, `better` and
    # `episodes_needed` None (docs/mario.md, "What a conclusion needs").
    trajectories_a: int | None = None
    trajectories_b: int | None = None
    conclusive: bool = True


def probability_of_improvement(a: Sequence[float], b: Sequence[float]) -> float:
    """U / (n·m): the exact point estimate."""
    values, ia, ib = _indexed(a, b)
    return _twice_u(_counts(ia, len(values)), _counts(ib, len(values))) / (2 * len(a) * len(b))


def compare_scores(
    a: Sequence[float],
    b: Sequence[float],
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    trajectories: tuple[int, int] | None = None,
) -> Comparison:
    """The probability that A beats B, its bootstrap interval (each agent's episodes resampled
    with replacement, apart: a stratified bootstrap) and the verdict; none when `trajectories`
    (distinct ones of A's and of B's episodes) gives a side fewer than two."""
    if resamples < 1:
        raise ValueError("resamples must be positive")
    values, ia, ib = _indexed(a, b)
    k, n, m = len(values), len(a), len(b)
    point = _twice_u(_counts(ia, k), _counts(ib, k)) / (2 * n * m)
    rng = random.Random(seed)
    estimates = sorted(
        _twice_u(_counts(rng.choices(ia, k=n), k), _counts(rng.choices(ib, k=m), k)) / (2 * n * m)
        for _ in range(resamples)
    )
    tail = (1 - confidence) / 2
    low = estimates[math.floor(tail * (resamples - 1))]
    high = estimates[math.ceil((1 - tail) * (resamples - 1))]
    better: Better | None = "a" if low > 0.5 else "b" if high < 0.5 else None
    conclusive = trajectories is None or min(trajectories) >= 2
    if not conclusive:
        better = None
    return Comparison(
        probability=point,
        ci95=(low, high),
        episodes_a=n,
        episodes_b=m,
        resamples=resamples,
        seed=seed,
        better=better,
        episodes_needed=None
        if better or not conclusive
        else episodes_needed(point, (low, high), n, m),
        trajectories_a=None if trajectories is None else trajectories[0],
        trajectories_b=None if trajectories is None else trajectories[1],
        conclusive=conclusive,
    )


def trajectories_word(count: int) -> str:
    """'1 distinct trajectory', '0 distinct trajectories': what a side too few to conclude on
    is called wherever a comparison or an interval is shown."""
    return f"{count} distinct trajector{'y' if count == 1 else 'ies'}"


def episodes_needed(point: float, ci95: tuple[float, float], n: int, m: int) -> int | None:
    """A rough count of episodes per agent for the interval to exclude 0.5: the interval's
    reach from the point towards 0.5 (h) is taken to shrink as the standard error does, in
    proportion to sqrt(1/n + 1/m), and the point to stay put (d = |point - 0.5|); with N
    episodes each, h·sqrt((2/N) / (1/n + 1/m)) < d gives N > 2·(h/d)² / (1/n + 1/m)."""
    distance = abs(point - 0.5)
    if distance == 0:
        return None
    reach = point - ci95[0] if point > 0.5 else ci95[1] - point
    needed = math.ceil(2 * (reach / distance) ** 2 / (1 / n + 1 / m) - 1e-9)  # float noise
    return max(needed, max(n, m) + 1)


def _indexed(a: Sequence[float], b: Sequence[float]) -> tuple[list[float], list[int], list[int]]:
    """The distinct values in ascending order, and each episode's value as an index into them."""
    if not a or not b:
        raise ValueError("each agent needs at least one episode")
    if not all(math.isfinite(v) for v in [*a, *b]):
        raise ValueError("scores must be finite")
    values = sorted({*a, *b})
    where = {v: i for i, v in enumerate(values)}
    return values, [where[v] for v in a], [where[v] for v in b]


def _counts(indices: Sequence[int], k: int) -> list[int]:
    counts = [0] * k
    for i in indices:
        counts[i] += 1
    return counts


def _twice_u(count_a: list[int], count_b: list[int]) -> int:
    """2·U, an integer: over the distinct values in ascending order, each episode of A scores 2
    for every episode of B below it and 1 for every tie."""
    below = twice = 0
    for x, y in zip(count_a, count_b, strict=True):
        twice += x * (2 * below + y)
        below += y
    return twice
