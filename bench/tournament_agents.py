"""Fifty simple, deterministic Alympics agents for bench/alympics_tournament.py, all made by one
parametrised class: the entry point `tournament_agents:agent_07` is agent 7 (00 to 49).

Each agent plays the five games with its own parameters: a Prisoner's Dilemma tit-for-tat that
forgives a defection with some probability, a fixed public-goods contribution (punishing or
not), a bid shading factor, a Colonel Blotto allocation (shuffled every round) and a probability
of taking the bridge in the congestion game. Its randomness comes only from the seed `reset`
gets, so an agent plays the same in one process and on any number of workers.

The module must be importable by the worker processes: the benchmark puts this folder on their
PYTHONPATH (arena.embedded.start_workers passes the environment on).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import partial
from typing import Any

N_AGENTS = 50
# Five ways to split 100 troops over 5 fields (each shuffled per round by the agent's seed).
BLOTTO = (
    (20, 20, 20, 20, 20),
    (35, 35, 28, 1, 1),
    (34, 33, 33, 0, 0),
    (25, 25, 25, 25, 0),
    (40, 30, 20, 10, 0),
)


@dataclass(frozen=True)
class Params:
    forgive: float  # PD: chance of cooperating after the opponent defected (else tit-for-tat)
    contribution: float  # public goods: tokens of 10 given every round
    punish: bool  # public goods: fine those who give less (costs 1 per player fined)
    shade: float  # auction: bid = shade × value
    blotto: tuple[int, ...]  # Colonel Blotto: the allocation, in a random order every round
    bridge: float  # congestion: chance of taking the bridge (route 0) rather than the bypass


def params(index: int) -> Params:
    """Agent `index`'s parameters; (index % 5, index // 5) is a distinct (forgive, contribution)
    pair for every index below 50."""
    if not 0 <= index < N_AGENTS:
        raise ValueError(f"agent index {index} not in 0..{N_AGENTS - 1}")
    return Params(
        forgive=(index % 5) / 4,
        contribution=round(10 * (index // 5) / 9, 3),
        punish=index % 3 == 0,
        shade=round(0.3 + 0.7 * ((7 * index) % N_AGENTS) / (N_AGENTS - 1), 3),
        blotto=BLOTTO[(index // 2) % len(BLOTTO)],
        bridge=((3 * index) % 10) / 9,
    )


class TournamentAgent:
    def __init__(self, p: Params) -> None:
        self.p = p
        self.player = 0
        self.rng = random.Random(0)

    def reset(self, *, seed: int, player: int = 0, **context: Any) -> None:
        self.player = player
        self.rng = random.Random(seed)

    def act(self, observation: dict[str, Any]) -> Any:
        game = observation["game"]
        if game == "prisoners_dilemma":
            history = observation["history"]
            if not history or history[-1]["actions"][1 - self.player] == "C":
                return "C"
            return "C" if self.rng.random() < self.p.forgive else "D"
        if game == "public_goods":
            if self.p.punish:
                return {"contribution": self.p.contribution, "punish": True}
            return self.p.contribution
        if game == "auction":
            return float(observation["value"]) * self.p.shade
        if game == "colonel_blotto":
            allocation = list(self.p.blotto)
            self.rng.shuffle(allocation)
            return allocation
        if game == "congestion":
            return 0 if self.rng.random() < self.p.bridge else 1
        raise ValueError(f"unknown game {game!r}")


def make(index: int) -> TournamentAgent:
    return TournamentAgent(params(index))


def __getattr__(name: str) -> Any:
    """`agent_NN`: the factory of agent NN (entry points name a callable taking no arguments)."""
    match = re.fullmatch(r"agent_(\d\d)", name)
    if match and int(match[1]) < N_AGENTS:
        return partial(make, int(match[1]))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
