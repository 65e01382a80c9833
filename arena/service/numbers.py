"""How a board's values read, the same in the terminal table and on the page: a dotted stats
path, at most four significant digits, percentages, and a 95% interval beside its point."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tasks.workloads.base import ColumnFormat, IntervalSpec

MISSING = "—"
Interval = tuple[float, float]


def stat(stats: dict[str, Any], key: str) -> Any:
    """The value at a dotted path (categories.fairness), None where any step is missing."""
    value: Any = stats
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def as_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def significant(value: float, digits: int = 4, max_decimals: int = 4) -> str:
    """At most `digits` significant digits, fixed point with thousands separators: a regret of
    12,345.6 reads 12,346, never 1.235e+04."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    # The magnitude after rounding, so that 9.9996 gives 10.00 rather than 10.000.
    magnitude = math.floor(math.log10(abs(float(f"{value:.{digits - 1}e}"))))
    decimals = min(max(digits - 1 - magnitude, 0), max_decimals)
    return f"{value:,.{decimals}f}"


def format_value(value: Any, fmt: ColumnFormat, digits: int = 4) -> str:
    number = as_number(value)
    if number is None:
        return MISSING
    if fmt == "count":
        return f"{round(number):,}"
    if fmt == "percent":
        return f"{significant(number * 100, digits - 1, max_decimals=1)}%"
    return significant(number, digits)


def with_interval(point: Any, ci: Any, fmt: ColumnFormat) -> str:
    """A point and its 95% interval, `12.5% [3.1%, 40%]`: three digits, enough to compare
    neighbours and narrow enough for a whole table to fit."""
    text = format_value(point, fmt, digits=3)
    if isinstance(ci, list | tuple) and len(ci) == 2:
        low, high = (format_value(v, fmt, digits=3) for v in ci)
        text += f" [{low}, {high}]"
    return text


def interval_of(stats: dict[str, Any], spec: IntervalSpec) -> Interval | None:
    """The entry's 95% interval; stats come back from JSON, so a list as well as a tuple."""
    raw = stat(stats, spec.ci95)
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        return None
    low, high = (as_number(v) for v in raw)
    return None if low is None or high is None else (low, high)


def overlaps_above(intervals: Sequence[Interval | None]) -> list[bool]:
    """For each row in rank order: does its interval overlap the one of the row above?"""
    marks = [False] * len(intervals)
    for i in range(1, len(intervals)):
        above, this = intervals[i - 1], intervals[i]
        if above is not None and this is not None:
            marks[i] = this[0] <= above[1] and above[0] <= this[1]
    return marks
