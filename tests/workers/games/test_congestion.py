"""Congestion: the network, the rubric's latency extremes, optimum and equilibrium, baselines."""

from __future__ import annotations

import itertools

import pytest

from scoring.alympics import normalise
from tests.workers.games.helpers import Scripted, payoffs_of, play
from workers.games import InvalidAction, game_measures, opponent_lineup
from workers.games.congestion import (
    SOCIAL_OPTIMUM,
    SOCIAL_OPTIMUM_ROUTES,
    BestResponder,
    Congestion,
    EpsilonGreedy,
    SelfishRouter,
    SocialOptimum,
    route_loads,
    total_latency,
)

PROFILES = list(itertools.product((0, 1), repeat=4))


@pytest.mark.parametrize(
    ("routes", "payoffs"),
    [
        ((0, 0, 0, 0), [-20, -20, -20, -20]),
        ((0, 1, 1, 1), [-1, -5, -5, -5]),
        ((0, 0, 1, 1), [-2, -2, -5, -5]),
        ((1, 0, 0, 0), [-5, -4, -4, -4]),
        ((1, 1, 1, 1), [-5, -5, -5, -5]),
    ],
)
def test_latencies(routes, payoffs):
    assert payoffs_of(Congestion(1), list(routes)) == payoffs


def test_best_own_latency_is_1_and_worst_20_over_every_profile():
    own = {-payoffs_of(Congestion(1), list(p))[0] for p in PROFILES}
    assert min(own) == 1 and max(own) == 20


def test_alone_on_the_bridge_is_100_and_gridlock_is_0():
    alone = play(Congestion(1), [Scripted(0), *[Scripted(1) for _ in range(3)]])
    gridlock = play(Congestion(1), [Scripted(0) for _ in range(4)])
    assert game_measures([alone])["raw"] == -1 and normalise("congestion", -1) == 100
    assert game_measures([alone])["strategic"] == 100
    assert game_measures([gridlock])["raw"] == -20 and normalise("congestion", -20) == 0
    assert game_measures([gridlock])["strategic"] == 0


def test_social_optimum_and_the_selfish_equilibrium_differ():
    assert SOCIAL_OPTIMUM == 14 == min(total_latency(p) for p in PROFILES)
    assert SOCIAL_OPTIMUM_ROUTES == (0, 0, 1, 1)

    def is_equilibrium(profile):
        for player, route in enumerate(profile):
            mine = -payoffs_of(Congestion(1), list(profile))[player]
            moved = list(profile)
            moved[player] = 1 - route
            if -payoffs_of(Congestion(1), moved)[player] < mine:
                return False
        return True

    equilibria = {tuple(route_loads(p)) for p in PROFILES if is_equilibrium(p)}
    assert equilibria == {(3, 1)}
    assert total_latency((0, 0, 0, 1)) == 17


def test_fairness_is_optimum_over_achieved_total_latency():
    def fairness(*routes):
        return game_measures([play(Congestion(1), [Scripted(r) for r in routes])])["fairness"]

    assert fairness(0, 0, 1, 1) == 100
    assert fairness(0, 1, 1, 1) == pytest.approx(100 * 14 / 16)
    assert fairness(0, 0, 0, 0) == pytest.approx(100 * 14 / 80)
    two_rounds = play(Congestion(2), [Scripted(0, 1), Scripted(0), Scripted(1), Scripted(1)])
    assert game_measures([two_rounds])["fairness"] == pytest.approx((100 + 100 * 14 / 16) / 2)


def test_selfish_routers_all_take_the_bridge_then_oscillate():
    record = play(Congestion(3), [SelfishRouter() for _ in range(4)])
    assert record.actions == [[0] * 4, [1] * 4, [0] * 4]


def test_social_optimum_players_take_their_place():
    record = play(Congestion(2), [SocialOptimum() for _ in range(4)])
    assert record.actions == [[0, 0, 1, 1]] * 2
    lineup = opponent_lineup("congestion", "social-optimum")
    agent_on_bridge = play(Congestion(1), [Scripted(0), *lineup])
    assert agent_on_bridge.payoffs == [[-2, -2, -5, -5]]


def test_epsilon_greedy_explores_from_its_seed_then_exploits():
    first_routes = {
        play(Congestion(1), [EpsilonGreedy(), *[Scripted(1) for _ in range(3)]], seed).actions[0][0]
        for seed in range(20)
    }
    assert first_routes == {0, 1}
    # Alone against three bypass users the bridge (1) beats the bypass (5): it settles there.
    record = play(Congestion(60), [EpsilonGreedy(), *[Scripted(1) for _ in range(3)]], seed=3)
    later = [a[0] for a in record.actions[2:]]
    assert later.count(0) > 0.8 * len(later)


def test_builtin_opens_on_the_bypass_then_best_responds():
    record = play(Congestion(3), [BestResponder(), *[Scripted(1, 0, 0) for _ in range(3)]])
    # Round 2 answers round 1 (three on the bypass): the bridge, alone, takes 1.
    # Round 3 answers round 2 (three on the bridge): the bypass.
    assert [a[0] for a in record.actions] == [1, 0, 1]


@pytest.mark.parametrize(
    ("action", "route"), [(0, 0), (1, 1), (1.0, 1), ("bridge", 0), (" Bypass", 1)]
)
def test_parse_accepts_numbers_and_names(action, route):
    assert Congestion(1).parse_action(0, action) == route


@pytest.mark.parametrize("action", [2, -1, True, "2", "ferry", None, 0.5, [0]])
def test_parse_rejects(action):
    with pytest.raises(InvalidAction):
        Congestion(1).parse_action(0, action)
