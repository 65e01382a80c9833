"""Repeated public goods game with an optional punishment stage inside each round.

4 players, endowment 10, multiplier 2 (marginal per-capita return 0.5). Each round a player
contributes c in [0, 10] to the pot and may also choose to punish. Punishment is a commitment
made with the contribution (so the round stays one simultaneous move): a punishing player pays
1 for every other player whose contribution is strictly below its own, and each of those
players is fined 3. Payoff of player i:

    10 - c_i + 2 * sum(c) / 4 - 1 * (players i punishes) - 3 * (punishers who punish i)

raw = mean per-round payoff - 10: nobody contributing gives 0 and everyone contributing all gives
10 (with equal contributions nobody is punished). A faulting player contributes 0 without
punishing, so the round goes on for the others, but the fault earns it nothing: the round is
credited at most 10 (raw 0, normalised 0), its contribution counts as 0 and its fairness as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from workers.games.base import (
    EpisodeRecord,
    Game,
    InvalidAction,
    SeededStrategy,
    faulted_flags,
    parse_number,
)

ENDOWMENT = 10.0
MULTIPLIER = 2.0
PUNISHMENT_COST = 1.0  # paid by the punisher, per punished player
PUNISHMENT_FINE = 3.0  # paid by the punished player, per punisher


class PublicGoods(Game):
    name = "public_goods"
    n_players = 4
    raw_offset = ENDOWMENT
    rules = (
        "Repeated public goods game, 4 players. Each round every player receives 10 tokens and "
        "contributes part of them (0 to 10) to a common pot; the pot is doubled and shared "
        "equally among all 4, and a player keeps what it did not contribute. A player may also "
        "punish: it then pays 1 token for every other player who contributed less than it did "
        "this round, and each of those players loses 3 tokens. Maximise your total tokens."
    )
    action_format = (
        'a number from 0 to 10 (your contribution), or {"contribution": <0..10>, '
        '"punish": true|false}'
    )

    def default_action(self, player: int) -> dict[str, Any]:
        return {"contribution": 0.0, "punish": False}

    def parse_action(self, player: int, action: Any) -> dict[str, Any]:
        if isinstance(action, dict):
            unknown = set(action) - {"contribution", "punish"}
            if unknown or "contribution" not in action:
                raise InvalidAction(f"expected {self.action_format}, not {action!r:.80}")
            punish = action.get("punish", False)
            if not isinstance(punish, bool):
                raise InvalidAction(f'"punish" must be true or false, not {punish!r:.40}')
            contribution = action["contribution"]
        else:
            contribution, punish = action, False
        amount = parse_number(contribution, 0.0, ENDOWMENT, "the contribution")
        return {"contribution": amount, "punish": punish}

    def resolve(self, actions: list[Any]) -> tuple[list[float], dict[str, Any]]:
        contributions = [a["contribution"] for a in actions]
        share = MULTIPLIER * sum(contributions) / self.n_players
        costs = [0.0] * self.n_players
        fines = [0.0] * self.n_players
        for punisher, action in enumerate(actions):
            if not action["punish"]:
                continue
            for target, contribution in enumerate(contributions):
                if target != punisher and contribution < action["contribution"]:
                    costs[punisher] += PUNISHMENT_COST
                    fines[target] += PUNISHMENT_FINE
        payoffs = [
            ENDOWMENT - c + share - cost - fine
            for c, cost, fine in zip(contributions, costs, fines, strict=True)
        ]
        return payoffs, {"punishment_costs": costs, "fines": fines}

    def history_entry(self, player: int, round_index: int) -> dict[str, Any]:
        details = self.details[round_index]
        return {
            **super().history_entry(player, round_index),
            "punishment_cost": details["punishment_costs"][player],
            "fine": details["fines"][player],
        }

    @classmethod
    def measures(cls, records: Sequence[EpisodeRecord], player: int) -> dict[str, float]:
        """cooperation: mean contribution / endowment; fairness: how close the player's
        contribution comes to the mean of the others' that round (100 = equal, 0 = a whole
        endowment apart), averaged over rounds. A faulted round contributes 0 and is 0 fair."""
        own, fairness = [], []
        for record in records:
            flags = faulted_flags(record, player)
            for actions, faulted in zip(record.actions, flags, strict=True):
                contributions = [a["contribution"] for a in actions]
                mine = contributions.pop(player)
                gap = abs(mine - fmean(contributions))
                own.append(0.0 if faulted else mine)
                fairness.append(0.0 if faulted else 100 * (1 - gap / ENDOWMENT))
        return {
            **super().measures(records, player),
            "cooperation": 100 * fmean(own) / ENDOWMENT,
            "fairness": fmean(fairness),
        }


def _others_contributions(observation: Mapping[str, Any]) -> list[float]:
    """The other players' contributions in the last round played."""
    actions = observation["history"][-1]["actions"]
    me = int(observation["player"])
    return [a["contribution"] for p, a in enumerate(actions) if p != me]


class FullContributor(SeededStrategy):
    label = "full-contributor"

    def act(self, observation: Mapping[str, Any]) -> float:
        return ENDOWMENT


class FreeRider(SeededStrategy):
    label = "free-rider"

    def act(self, observation: Mapping[str, Any]) -> float:
        return 0.0


class ConditionalCooperator(SeededStrategy):
    """Contribute everything first (an opening of trust), then match the mean contribution of
    the others in the previous round."""

    label = "conditional-cooperator"

    def act(self, observation: Mapping[str, Any]) -> float:
        if not observation["history"]:
            return ENDOWMENT
        return fmean(_others_contributions(observation))


class Punisher(SeededStrategy):
    """Contribute everything and punish whoever contributes less."""

    label = "punisher"

    def act(self, observation: Mapping[str, Any]) -> dict[str, Any]:
        return {"contribution": ENDOWMENT, "punish": True}
