"""First-price sealed-bid auction, 2 bidders, private values uniform on [0, 100].

Each round is a fresh auction: every bidder's value (rounded to cents) is drawn from the game's
seed, as is the order that breaks ties, all at reset, so the draws do not depend on the bids
(every agent facing the same seed sees the same values). The highest bid wins and pays its bid;
profit = value - price for the winner, 0 for the others. raw = mean profit per round, so
winning every auction at price 0 averages 50 (normalised 100) and never profiting gives 0.

Fairness (0-100) reads the agent's bid as the price it pays when it wins and asks how close
that price comes to its value: 100 * max(0, 1 - |value - bid| / value). Paying the value exactly
is 100; paying half of it (the equilibrium shade) 50; paying nothing, or twice the value, 0.
Measuring the bid rather than only the won auctions keeps the measure defined for an agent
that never wins, and it equals "winning price against the winner's value" whenever it wins.
A faulting bidder bids 0, so the auction goes on for the other, but the fault earns it
nothing: the round is credited at most 0 profit and its fairness is 0.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from workers.games.base import EpisodeRecord, Game, SeededStrategy, faulted_flags, parse_number

MAX_VALUE = 100.0


def bid_fairness(value: float, bid: float) -> float:
    if value == 0:
        return 100.0 if bid == 0 else 0.0
    return 100 * max(0.0, 1 - abs(value - bid) / value)


class FirstPriceAuction(Game):
    name = "auction"
    n_players = 2
    rules = (
        "First-price sealed-bid auction, 2 bidders. Each round each bidder privately learns its "
        "value for the item, drawn uniformly from 0 to 100 (the other's value is unknown). Both "
        "bid at once; the highest bid wins (ties broken at random) and pays its own bid. Your "
        "profit: your value minus your bid if you win, 0 otherwise. Maximise your total profit."
    )
    action_format = "your bid: a number from 0 to 100"
    scalar_actions = True

    def reset(self, seed: int) -> None:
        super().reset(seed)
        rng = random.Random(f"auction:{seed}")
        self.values = [
            [round(rng.uniform(0, MAX_VALUE), 2) for _ in range(self.n_players)]
            for _ in range(self.rounds)
        ]
        # Among tied highest bids, the bidder earliest in this round's order wins.
        self.tie_orders = [rng.sample(range(self.n_players), self.n_players) for _ in self.values]

    def private_info(self, player: int) -> dict[str, Any]:
        return {} if self.done else {"value": self.values[self.played][player]}

    def history_entry(self, player: int, round_index: int) -> dict[str, Any]:
        return {
            **super().history_entry(player, round_index),
            "value": self.values[round_index][player],
            "winner": self.details[round_index]["winner"],
        }

    def default_action(self, player: int) -> float:
        return 0.0

    def parse_action(self, player: int, action: Any) -> float:
        return parse_number(action, 0.0, MAX_VALUE, "the bid")

    def resolve(self, actions: list[Any]) -> tuple[list[float], dict[str, Any]]:
        values = self.values[self.played]
        top = max(actions)
        winner = next(p for p in self.tie_orders[self.played] if actions[p] == top)
        payoffs = [0.0] * self.n_players
        payoffs[winner] = values[winner] - top
        return payoffs, {"values": list(values), "winner": winner, "price": top}

    @classmethod
    def measures(cls, records: Sequence[EpisodeRecord], player: int) -> dict[str, float]:
        fairness = [
            0.0 if faulted else bid_fairness(details["values"][player], actions[player])
            for record in records
            for actions, details, faulted in zip(
                record.actions, record.details, faulted_flags(record, player), strict=True
            )
        ]
        return {**super().measures(records, player), "fairness": fmean(fairness)}


class Truthful(SeededStrategy):
    """Bid the value: never overpays, never profits."""

    label = "truthful"

    def act(self, observation: Mapping[str, Any]) -> float:
        return float(observation["value"])


class Shade(SeededStrategy):
    """Bid half the value: the symmetric equilibrium for 2 bidders with values uniform on
    [0, 100] (each bids v * (n - 1) / n)."""

    label = "shade"

    def act(self, observation: Mapping[str, Any]) -> float:
        return float(observation["value"]) / 2
