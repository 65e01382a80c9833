"""Small pure helpers shared by the rubric modules."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base for every boundary model: unknown keys are refused, values are not coerced from text."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


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
