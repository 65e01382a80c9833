"""Small pure helpers shared by the rubric modules."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base for every boundary model: unknown keys are refused, values are not coerced from text."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def competition_ranks(keys: Sequence[Hashable]) -> list[int]:
    """The ranks of items already in rank order, by standard competition ranking ("1, 2, 2, 4"):
    an item whose key equals the one before it is tied with it and shares its rank; the next
    item ranks by its position. Every front door (board, table, --json, page, report, race)
    ranks with this, so tied rows read the same everywhere (docs/reports.md)."""
    ranks: list[int] = []
    for position, key in enumerate(keys, start=1):
        ranks.append(ranks[-1] if ranks and key == keys[position - 2] else position)
    return ranks


def clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


# Digits kept before a display rounds: a decimal half computed in floats may land a hair below
# it (fairness 0*0.4 + 1*0.3 + 24*0.3 = 7.499999999999999, not 7.5) and must still round up.
SETTLE_PLACES = 9


def round_half_up(value: float, places: int = 0) -> Decimal:
    """Round as on paper (93.25 -> 93.3, 7.499999999999999 -> 8): the float's shortest decimal
    repr settled to SETTLE_PLACES places first, then half up."""
    settled = Decimal(repr(value)).quantize(Decimal(1).scaleb(-SETTLE_PLACES), ROUND_HALF_EVEN)
    return settled.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def format_half_up(value: float, places: int = 0) -> str:
    return f"{round_half_up(value, places):.{places}f}"
