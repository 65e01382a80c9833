"""The bandit environment and strategies: reset(seed) contracts and determinism."""

from __future__ import annotations

import pytest

from workers.bandit import BUILTIN_AGENTS, BernoulliBandit, play_episode


@pytest.mark.parametrize("name", sorted(BUILTIN_AGENTS))
def test_same_seeds_same_episode(name: str):
    run = lambda: play_episode(BUILTIN_AGENTS[name](), [0.2, 0.5, 0.8], 500, 17, 4)  # noqa: E731
    assert run() == run()


def test_environment_reset_replays_the_same_rewards():
    env = BernoulliBandit([0.3, 0.6])
    env.reset(5)
    first = [env.pull(i % 2) for i in range(200)]
    env.reset(5)
    assert [env.pull(i % 2) for i in range(200)] == first
    env.reset(6)
    assert [env.pull(i % 2) for i in range(200)] != first


def test_arm_streams_are_independent_of_the_other_arms():
    # Common random numbers: the k-th pull of an arm pays the same whatever else was pulled.
    a, b = BernoulliBandit([0.5, 0.5, 0.5]), BernoulliBandit([0.5, 0.5, 0.5])
    a.reset(9)
    b.reset(9)
    only_zero = [a.pull(0) for _ in range(50)]
    mixed = []
    for _ in range(50):
        b.pull(1)
        mixed.append(b.pull(0))
    assert only_zero == mixed


def test_learning_strategies_beat_random_and_regret_is_consistent():
    arms = [0.1, 0.2, 0.9]
    results = {n: play_episode(f(), arms, 3000, 1, 2) for n, f in BUILTIN_AGENTS.items()}
    for name in ("ucb1", "thompson", "epsilon-greedy"):
        assert results[name]["mean_reward"] > results["random"]["mean_reward"] + 0.2
    for r in results.values():
        assert r["regret"] >= 0
        assert 0 <= r["best_arm_rate"] <= 1
