"""A Bernoulli multi-armed bandit and classic strategies: a small real workload.

Randomness: each arm has its own reward stream seeded from the environment seed, so every agent
facing the same (item, episode) sees the same reward on its k-th pull of an arm (common random
numbers), and the agent's own randomness comes from a separate seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol


class BanditAgent(Protocol):
    """The agent contract (docs/agents.md) for bandits: `reset(seed=, n_arms=)`, then one
    `act(observation) -> arm` per pull, where the observation is {"n_arms", "pull" (0-based),
    "last_arm", "last_reward"} (the last two None on the first pull)."""

    def reset(self, *, seed: int, n_arms: int) -> None: ...
    def act(self, observation: dict[str, Any]) -> int: ...


class BernoulliBandit:
    def __init__(self, probabilities: Sequence[float]) -> None:
        self.probabilities = list(probabilities)
        self._streams: list[random.Random] = []

    def reset(self, seed: int) -> None:
        self._streams = [random.Random(f"{seed}:{arm}") for arm in range(len(self.probabilities))]

    def pull(self, arm: int) -> float:
        return 1.0 if self._streams[arm].random() < self.probabilities[arm] else 0.0


class _Counting:
    """Shared book-keeping: pulls and mean reward per arm, learnt from the observations."""

    def reset(self, *, seed: int, n_arms: int) -> None:
        self.rng = random.Random(seed)
        self.counts = [0] * n_arms
        self.means = [0.0] * n_arms
        self.t = 0

    def act(self, observation: dict[str, Any]) -> int:
        arm = observation["last_arm"]
        if arm is not None:
            self.t += 1
            self.counts[arm] += 1
            self.means[arm] += (observation["last_reward"] - self.means[arm]) / self.counts[arm]
        return self.choose()

    def choose(self) -> int:
        raise NotImplementedError

    def untried(self) -> int | None:
        return next((a for a, c in enumerate(self.counts) if c == 0), None)

    def best(self) -> int:
        top = max(self.means)
        return self.rng.choice([a for a, m in enumerate(self.means) if m == top])


class RandomAgent(_Counting):
    def choose(self) -> int:
        return self.rng.randrange(len(self.counts))


class GreedyAgent(_Counting):
    def choose(self) -> int:
        first = self.untried()
        return self.best() if first is None else first


class EpsilonGreedyAgent(_Counting):
    epsilon = 0.1

    def choose(self) -> int:
        if self.rng.random() < self.epsilon:
            return self.rng.randrange(len(self.counts))
        first = self.untried()
        return self.best() if first is None else first


class UCB1Agent(_Counting):
    def choose(self) -> int:
        first = self.untried()
        if first is not None:
            return first
        bonus = [math.sqrt(2 * math.log(self.t) / c) for c in self.counts]
        values = [m + b for m, b in zip(self.means, bonus, strict=True)]
        return values.index(max(values))


class ThompsonAgent(_Counting):
    def choose(self) -> int:
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
    agent.reset(seed=agent_seed, n_arms=len(probabilities))
    best = max(probabilities)
    total = expected = 0.0
    on_best = 0
    arm: int | None = None
    reward: float | None = None
    for pull in range(pulls):
        observation = {
            "n_arms": len(probabilities),
            "pull": pull,
            "last_arm": arm,
            "last_reward": reward,
        }
        arm = agent.act(observation)
        if isinstance(arm, bool) or not isinstance(arm, int) or not 0 <= arm < len(probabilities):
            raise ValueError(f"agent chose arm {arm!r}; arms are 0..{len(probabilities) - 1}")
        reward = env.pull(arm)
        total += reward
        expected += probabilities[arm]
        on_best += probabilities[arm] == best
    return {
        "total_reward": total,
        "mean_reward": total / pulls,
        "regret": pulls * best - expected,
        "best_arm_rate": on_best / pulls,
    }
