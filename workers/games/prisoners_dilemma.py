"""Repeated Prisoner's Dilemma with the Axelrod library's default payoffs R=3, P=1, S=0, T=5.

raw = mean payoff per round, so mutual defection gives 1 (normalised 0) and mutual cooperation 3
(normalised 100). A faulting player cooperates that round, so the opponent's game goes on, but
the fault earns it nothing: the round is credited at most 1 (mutual defection, normalised 0)
and counts as a defection in its cooperation rate.
"""

from __future__ import annotations

from collections.abc import Sequence
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

    def default_action(self, player: int) -> str:
        return "C"

    def parse_action(self, player: int, action: Any) -> str:
        if isinstance(action, str) and action.strip().upper() in ALIASES:
            return ALIASES[action.strip().upper()]
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


def _opponent_moves(observation: dict[str, Any]) -> list[str]:
    opponent = 1 - int(observation["player"])
    return [entry["actions"][opponent] for entry in observation["history"]]


class TitForTat(SeededStrategy):
    """Cooperate first, then copy the opponent's previous move."""

    label = "tit-for-tat"

    def act(self, observation: dict[str, Any]) -> str:
        moves = _opponent_moves(observation)
        return moves[-1] if moves else "C"


class AlwaysDefect(SeededStrategy):
    label = "always-defect"

    def act(self, observation: dict[str, Any]) -> str:
        return "D"
