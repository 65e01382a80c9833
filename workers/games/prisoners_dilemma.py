"""Repeated Prisoner's Dilemma with the Axelrod library's default payoffs R=3, P=1, S=0, T=5.

raw = mean payoff per round, so mutual defection gives 1 (normalised 0) and mutual cooperation 3
(normalised 100). A faulting player cooperates that round, so the opponent's game goes on, but
the fault earns it nothing: the round is credited at most 1 (mutual defection, normalised 0)
and counts as a defection in its cooperation rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workers.games.base import (
    EpisodeRecord,
    Game,
    InvalidAction,
    SeededStrategy,
    faulted_flags,
)

REWARD, PUNISHMENT, SUCKER, TEMPTATION = 3.0, 1.0, 0.0, 5.0
# (my action, their action) -> my payoff
PAYOFF = {
    ("C", "C"): REWARD,
    ("C", "D"): SUCKER,
    ("D", "C"): TEMPTATION,
    ("D", "D"): PUNISHMENT,
}
ALIASES = {"C": "C", "COOPERATE": "C", "D": "D", "DEFECT": "D"}


class PrisonersDilemma(Game):
    name = "prisoners_dilemma"
    n_players = 2
    rules = (
        "Repeated Prisoner's Dilemma, 2 players, simultaneous moves each round. Both cooperate: "
        "3 points each. Both defect: 1 each. One defects while the other cooperates: the "
        "defector gets 5, the cooperator 0. Maximise your total points over all rounds."
    )
    action_format = '"C" to cooperate or "D" to defect'
    scalar_actions = True

    def default_action(self, player: int) -> str:
        return "C"

    def parse_action(self, player: int, action: Any) -> str:
        if isinstance(action, str):
            normal = ALIASES.get(action) or ALIASES.get(action.strip().upper())
            if normal is not None:
                return normal
        raise InvalidAction(f'a Prisoner\'s Dilemma action is "C" or "D", not {action!r:.60}')

    def resolve(self, actions: list[Any]) -> tuple[list[float], dict[str, Any]]:
        first, second = actions
        return [PAYOFF[first, second], PAYOFF[second, first]], {}

    @classmethod
    def measures(cls, records: Sequence[EpisodeRecord], player: int) -> dict[str, float]:
        cooperated = [
            actions[player] == "C" and not faulted
            for record in records
            for actions, faulted in zip(record.actions, faulted_flags(record, player), strict=True)
        ]
        cooperation = 100 * sum(cooperated) / len(cooperated)
        return {**super().measures(records, player), "cooperation": cooperation}


class TitForTat(SeededStrategy):
    """Cooperate first, then copy the opponent's previous move."""

    label = "tit-for-tat"

    def act(self, observation: Mapping[str, Any]) -> str:
        history = observation["history"]
        if not history:
            return "C"
        move: str = history[-1]["actions"][1 - observation["player"]]
        return move


class AlwaysDefect(SeededStrategy):
    label = "always-defect"

    def act(self, observation: Mapping[str, Any]) -> str:
        return "D"
