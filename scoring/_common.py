"""Small pure helpers shared by the rubric modules."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base for every boundary model: unknown keys are refused, values are not coerced from text."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def round_half_up(value: float, places: int = 0) -> Decimal:
    """Round as on paper (93.25 -> 93.3), via the shortest decimal repr of the float."""
    quantum = Decimal(1).scaleb(-places)
    return Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP)


def format_half_up(value: float, places: int = 0) -> str:
    return f"{round_half_up(value, places):.{places}f}"
