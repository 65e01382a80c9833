"""A Bernoulli multi-armed bandit and classic strategies: a small real workload.

Randomness: each arm has its own reward stream seeded from the environment seed, so every agent
facing the same (item, episode) sees the same reward on its k-th pull of an arm (common random
numbers), and the agent's own randomness comes from a separate seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Protocol


class BanditAgent(Protocol):
    def reset(self, n_arms: int, seed: int) -> None: ...
    def act(self) -> int: ...
    def observe(self, arm: int, reward: float) -> None: ...


class BernoulliBandit:
    def __init__(self, probabilities: Sequence[float]) -> None:
        self.probabilities = list(probabilities)
        self._streams: list[random.Random] = []

    def reset(self, seed: int) -> None:
        self._streams = [random.Random(f"{seed}:{arm}") for arm in range(len(self.probabilities))]

    def pull(self, arm: int) -> float:
        return 1.0 if self._streams[arm].random() < self.probabilities[arm] else 0.0


class _Counting:
    """Shared book-keeping: pulls and mean reward per arm."""

    def reset(self, n_arms: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.counts = [0] * n_arms
        self.means = [0.0] * n_arms
        self.t = 0

    def observe(self, arm: int, reward: float) -> None:
        self.t += 1
        self.counts[arm] += 1
        self.means[arm] += (reward - self.means[arm]) / self.counts[arm]

    def untried(self) -> int | None:
        return next((a for a, c in enumerate(self.counts) if c == 0), None)

    def best(self) -> int:
        top = max(self.means)
        return self.rng.choice([a for a, m in enumerate(self.means) if m == top])


class RandomAgent(_Counting):
    def act(self) -> int:
        return self.rng.randrange(len(self.counts))


class GreedyAgent(_Counting):
    def act(self) -> int:
        first = self.untried()
        return self.best() if first is None else first


class EpsilonGreedyAgent(_Counting):
    epsilon = 0.1

    def act(self) -> int:
        if self.rng.random() < self.epsilon:
            return self.rng.randrange(len(self.counts))
        first = self.untried()
        return self.best() if first is None else first


class UCB1Agent(_Counting):
    def act(self) -> int:
        first = self.untried()
        if first is not None:
            return first
        bonus = [math.sqrt(2 * math.log(self.t) / c) for c in self.counts]
        values = [m + b for m, b in zip(self.means, bonus, strict=True)]
        return values.index(max(values))


class ThompsonAgent(_Counting):
    def act(self) -> int:
        samples = [
            self.rng.betavariate(1 + m * c, 1 + (1 - m) * c)
            for m, c in zip(self.means, self.counts, strict=True)
        ]
        return samples.index(max(samples))


BUILTIN_AGENTS: dict[str, Callable[[], BanditAgent]] = {
    "random": RandomAgent,
    "greedy": GreedyAgent,
    "epsilon-greedy": EpsilonGreedyAgent,
    "ucb1": UCB1Agent,
    "thompson": ThompsonAgent,
}


def play_episode(
    agent: BanditAgent, probabilities: Sequence[float], pulls: int, env_seed: int, agent_seed: int
) -> dict[str, float]:
    """One episode: total reward, pseudo-regret and the share of pulls on the best arm."""
    env = BernoulliBandit(probabilities)
    env.reset(env_seed)
    agent.reset(len(probabilities), agent_seed)
    best = max(probabilities)
    total = expected = 0.0
    on_best = 0
    for _ in range(pulls):
        arm = agent.act()
        if not isinstance(arm, int) or not 0 <= arm < len(probabilities):
            raise ValueError(f"agent chose arm {arm!r}; arms are 0..{len(probabilities) - 1}")
        reward = env.pull(arm)
        agent.observe(arm, reward)
        total += reward
        expected += probabilities[arm]
        on_best += probabilities[arm] == best
    return {
        "total_reward": total,
        "mean_reward": total / pulls,
        "regret": pulls * best - expected,
        "best_arm_rate": on_best / pulls,
    }
