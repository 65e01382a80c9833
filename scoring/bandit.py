"""Bandit summaries: mean reward per pull with the same interval estimates as the other rubrics."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from scoring._common import StrictModel
from scoring.stats import bootstrap_interval, interquartile_mean


class BanditStats(StrictModel):
    episodes: int
    errors: int
    mean_reward: float  # the primary score: mean reward per pull, errors counting as 0
    iqm_reward: float
    iqm_ci95: tuple[float, float]
    mean_regret: float
    best_arm_rate: float


def summarise_bandit(
    mean_rewards: Sequence[float],
    regrets: Sequence[float],
    best_arm_rates: Sequence[float],
    errors: int,
    bootstrap_seed: int = 0,
) -> BanditStats:
    """Episodes that ended in an error count as zero reward: a crash never helps an agent."""
    rewards = [*mean_rewards, *([0.0] * errors)]
    if not rewards:
        raise ValueError("no episodes")
    return BanditStats(
        episodes=len(rewards),
        errors=errors,
        mean_reward=statistics.fmean(rewards),
        iqm_reward=interquartile_mean(rewards),
        iqm_ci95=bootstrap_interval(rewards, seed=bootstrap_seed),
        mean_regret=statistics.fmean(regrets) if regrets else 0.0,
        best_arm_rate=statistics.fmean(best_arm_rates) if best_arm_rates else 0.0,
    )
