"""Congestion game: 4 players each choose one of two routes from A to B at once.

The network (latency of a route as a function of how many players take it):

    route 0, "bridge": 1, 2, 4, 20 for 1, 2, 3, 4 users (fast when empty; 4 cars gridlock it)
    route 1, "bypass": 5 whatever the load

Payoff = raw = -(own latency). The best possible own latency is 1 (alone on the bridge) and the
worst 20 (all four on the bridge): the rubric's bounds. The social optimum (least total latency,
14) puts 2 on each route; the pure Nash equilibrium puts 3 on the bridge and 1 on the bypass
(total 17): selfish routing costs the group. A faulting player takes route 0, the bridge, so
the others' round goes on, but the fault earns it nothing: the round is credited latency 20 (the
worst, normalised 0) and its fairness term is 0.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from workers.games.base import (
    EpisodeRecord,
    Game,
    InvalidAction,
    SeededStrategy,
    faulted_flags,
)

N_PLAYERS = 4
ROUTE_NAMES = ("bridge", "bypass")
# LATENCY[route][users - 1]
LATENCY = ((1.0, 2.0, 4.0, 20.0), (5.0, 5.0, 5.0, 5.0))


def latency(route: int, users: int) -> float:
    return LATENCY[route][users - 1]


def route_loads(routes: Sequence[int]) -> list[int]:
    counts = Counter(routes)
    return [counts[route] for route in range(len(LATENCY))]


def total_latency(routes: Sequence[int]) -> float:
    loads = route_loads(routes)
    return sum(latency(route, loads[route]) for route in routes)


def _optimal_assignment() -> tuple[int, ...]:
    """Routes in player order for the least total latency (first such, players sorted by route)."""
    assignments = itertools.combinations_with_replacement(range(len(LATENCY)), N_PLAYERS)
    return min(assignments, key=total_latency)


SOCIAL_OPTIMUM_ROUTES = _optimal_assignment()
SOCIAL_OPTIMUM = total_latency(SOCIAL_OPTIMUM_ROUTES)


class Congestion(Game):
    name = "congestion"
    n_players = N_PLAYERS
    rules = (
        "Congestion game, 4 players. Each player picks a route from A to B; all choose at once. "
        "Route 0 (bridge) takes 1, 2, 4 or 20 minutes when 1, 2, 3 or 4 players use it. "
        "Route 1 (bypass) always takes 5 minutes. Your payoff is minus your travel time: "
        "minimise your own time."
    )
    action_format = '0 or 1 (the route number), or "bridge" / "bypass"'
    scalar_actions = True

    def default_action(self, player: int) -> int:
        return 0

    def parse_action(self, player: int, action: Any) -> int:
        if isinstance(action, str) and action.strip().lower() in ROUTE_NAMES:
            return ROUTE_NAMES.index(action.strip().lower())
        if isinstance(action, float) and action.is_integer():
            action = int(action)
        if isinstance(action, bool) or not isinstance(action, int):
            raise InvalidAction(f"expected {self.action_format}, not {action!r:.60}")
        if not 0 <= action < len(LATENCY):
            raise InvalidAction(f"there is no route {action}: routes are 0 and 1")
        return action

    def resolve(self, actions: list[Any]) -> tuple[list[float], dict[str, Any]]:
        loads = route_loads(actions)
        return [-latency(route, loads[route]) for route in actions], {"loads": loads}

    @classmethod
    def measures(cls, records: Sequence[EpisodeRecord], player: int) -> dict[str, float]:
        """fairness: social optimum / total latency achieved, as a percentage (100 = the group
        travels as fast as it possibly can), averaged over rounds; 0 in a round whose move
        faulted."""
        welfare = [
            0.0 if faulted else 100 * SOCIAL_OPTIMUM / total_latency(actions)
            for record in records
            for actions, faulted in zip(record.actions, faulted_flags(record, player), strict=True)
        ]
        return {**super().measures(records, player), "fairness": fmean(welfare)}


def best_response(observation: Mapping[str, Any]) -> int:
    """The fastest route for me if the others repeat their last round (ties: lower route)."""
    me = int(observation["player"])
    others = [r for p, r in enumerate(observation["history"][-1]["actions"]) if p != me]
    loads = route_loads(others)
    times = [latency(route, loads[route] + 1) for route in range(len(LATENCY))]
    return times.index(min(times))


class SelfishRouter(SeededStrategy):
    """Myopic selfish routing: first the route that is fastest when empty (the bridge), then
    the best response to the others' previous choices."""

    label = "selfish-router"

    def act(self, observation: Mapping[str, Any]) -> int:
        if not observation["history"]:
            return min(range(len(LATENCY)), key=lambda route: latency(route, 1))
        return best_response(observation)


class SocialOptimum(SeededStrategy):
    """Take this player's place in the social optimum (players 0-1 bridge, 2-3 bypass)."""

    label = "social-optimum"

    def act(self, observation: Mapping[str, Any]) -> int:
        return SOCIAL_OPTIMUM_ROUTES[int(observation["player"])]


class EpsilonGreedy(SeededStrategy):
    """Learns its own mean latency per route: tries untried routes first (in random order),
    then explores a random route with probability 0.1 and otherwise takes the fastest so far."""

    label = "epsilon-greedy"
    epsilon = 0.1

    def act(self, observation: Mapping[str, Any]) -> int:
        times: dict[int, list[float]] = {route: [] for route in range(len(LATENCY))}
        me = int(observation["player"])
        for entry in observation["history"]:
            times[entry["actions"][me]].append(-entry["payoff"])
        untried = [route for route, seen in times.items() if not seen]
        if untried:
            return self.rng.choice(untried)
        if self.rng.random() < self.epsilon:
            return self.rng.randrange(len(LATENCY))
        return min(times, key=lambda route: fmean(times[route]))


class BestResponder(SeededStrategy):
    """The built-in: with nothing observed, the route with the best worst case (the bypass, 5
    at most); afterwards the best response to the others' previous choices."""

    label = "best-responder"

    def act(self, observation: Mapping[str, Any]) -> int:
        if not observation["history"]:
            return min(range(len(LATENCY)), key=lambda route: latency(route, N_PLAYERS))
        return best_response(observation)
