"""Colonel Blotto: 2 players each split 100 troops over 5 battlefields (whole numbers summing to
100); a field goes to whoever sends more troops, a tie counts half to each. Payoff = raw =
fraction of the 5 fields won. A faulting player sends the uniform allocation (20 each), the
allocation that favours no field, so the opponent's game goes on; the fault earns nothing (the
round is credited 0 fields).

The rubric's bounds (0 = losing all fields, 1 = winning all) are the formula's, but with equal
armies neither extreme can happen: winning every field takes more troops than the opponent in
total. The reachable range is 1/5 to 4/5 of the fields (normalised 20 to 80).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workers.games.base import Game, InvalidAction, SeededStrategy

TROOPS = 100
FIELDS = 5


def fields_won(mine: list[int], theirs: list[int]) -> float:
    """Fraction of fields won, ties half."""
    won = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(mine, theirs, strict=True))
    return won / FIELDS


class ColonelBlotto(Game):
    name = "colonel_blotto"
    n_players = 2
    rules = (
        f"Colonel Blotto, 2 players. Each player secretly splits {TROOPS} troops over "
        f"{FIELDS} battlefields. Each battlefield is won by whoever sends more troops there "
        "(a tie counts half). Your payoff is the fraction of battlefields you win."
    )
    action_format = (
        f"a list of {FIELDS} non-negative whole numbers summing to {TROOPS}, "
        "e.g. [20, 20, 20, 20, 20]"
    )

    def default_action(self, player: int) -> list[int]:
        return [TROOPS // FIELDS] * FIELDS

    def parse_action(self, player: int, action: Any) -> list[int]:
        if not isinstance(action, list | tuple) or len(action) != FIELDS:
            raise InvalidAction(f"expected {self.action_format}, not {action!r:.80}")
        troops = []
        for count in action:
            # Whole floats (20.0) are whole numbers: JSON encoders may write them so.
            whole = isinstance(count, int) or (isinstance(count, float) and count.is_integer())
            if isinstance(count, bool) or not whole or count < 0:
                raise InvalidAction(f"troops must be non-negative whole numbers, not {count!r:.40}")
            troops.append(int(count))
        if sum(troops) != TROOPS:
            raise InvalidAction(f"the troops must sum to {TROOPS}, not {sum(troops)}")
        return troops

    def resolve(self, actions: list[Any]) -> tuple[list[float], dict[str, Any]]:
        first, second = actions
        return [fields_won(first, second), fields_won(second, first)], {}


class Uniform(SeededStrategy):
    label = "uniform"

    def act(self, observation: Mapping[str, Any]) -> list[int]:
        return [TROOPS // FIELDS] * FIELDS


class Concentrated(SeededStrategy):
    """34, 33, 33 on three fields drawn from the strategy's seed, nothing on the other two: it
    beats the uniform allocation (3 fields of 5) but leaves two fields open to any troops."""

    label = "concentrated"

    def act(self, observation: Mapping[str, Any]) -> list[int]:
        allocation = [0] * FIELDS
        for field, troops in zip(self.rng.sample(range(FIELDS), 3), (34, 33, 33), strict=True):
            allocation[field] = troops
        return allocation


class Skirmisher(SeededStrategy):
    """The built-in: 35, 35, 28, 1, 1 in an order drawn from its seed. It beats the uniform
    allocation every time (3 fields of 5) and the concentrated one 9 times in 10: the two 35s
    beat anything, and a single troop takes each field the concentrated player left empty. (An
    exhaustive search finds no allocation, played in a random order, that beats both more
    often.)"""

    label = "skirmisher"

    def act(self, observation: Mapping[str, Any]) -> list[int]:
        allocation = [35, 35, 28, 1, 1]
        self.rng.shuffle(allocation)
        return allocation
