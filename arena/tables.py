"""Leaderboards as rich tables that fit a 100-column terminal without cutting a header or a name.

Which columns appear is the workload's declaration (`Workload.score_header`, `interval`,
`table_columns`, `errors_column`), never a guess from the values of one row.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from tasks.store import LeaderboardRow, as_entries
from tasks.workloads.base import Column, ColumnFormat, IntervalSpec, Workload

OVERLAP_MARK = "≈"
OVERLAP_CAPTION = f"{OVERLAP_MARK} interval overlaps the row above: not separated"
MISSING = "—"
Interval = tuple[float, float]


@dataclass(frozen=True)
class _Cells:
    """A column as rendered text: the declared header, its cells, how they align, and whether
    the column may give way (wrap) when the terminal is narrower than the table."""

    header: str
    cells: list[str]
    justify: JustifyMethod = "right"
    flexible: bool = False


def stat(stats: dict[str, Any], key: str) -> Any:
    """The value at a dotted path (categories.fairness), None where any step is missing."""
    value: Any = stats
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _number(value: Any) -> float | None:
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
    number = _number(value)
    if number is None:
        return MISSING
    if fmt == "count":
        return f"{round(number):,}"
    if fmt == "percent":
        return f"{significant(number * 100, digits - 1, max_decimals=1)}%"
    return significant(number, digits)


def interval_of(stats: dict[str, Any], spec: IntervalSpec) -> Interval | None:
    """The entry's 95% interval; stats come back from JSON, so a list as well as a tuple."""
    raw = stat(stats, spec.ci95)
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        return None
    low, high = (_number(v) for v in raw)
    return None if low is None or high is None else (low, high)


def overlaps_above(intervals: Sequence[Interval | None]) -> list[bool]:
    """For each row in rank order: does its interval overlap the one of the row above?"""
    marks = [False] * len(intervals)
    for i in range(1, len(intervals)):
        above, this = intervals[i - 1], intervals[i]
        if above is not None and this is not None:
            marks[i] = this[0] <= above[1] and above[0] <= this[1]
    return marks


def ranked(rows: Sequence[LeaderboardRow], workload: Workload | None) -> list[LeaderboardRow]:
    """Rows in the workload's rank order (the store's order, by score, when it is unknown)."""
    if workload is None:
        return list(rows)
    by_agent = {r.agent: r for r in rows}
    return [by_agent[e.agent] for e in workload.rank(as_entries(rows))]


def _interval_cells(rows: Sequence[LeaderboardRow], spec: IntervalSpec) -> list[str]:
    cells = []
    for row in rows:
        point, ci = stat(row.stats, spec.point), interval_of(row.stats, spec)
        # 3 digits: enough to compare neighbours, narrow enough for the whole table to fit.
        text = format_value(point, spec.fmt, digits=3)
        if ci is not None:
            low, high = (format_value(v, spec.fmt, digits=3) for v in ci)
            text += f" [{low}, {high}]"
        cells.append(text)
    return cells


def _stat_cells(rows: Sequence[LeaderboardRow], column: Column) -> _Cells:
    cells = [format_value(stat(r.stats, column.key), column.fmt) for r in rows]
    return _Cells(column.header, cells)


def _has_errors(rows: Sequence[LeaderboardRow], column: Column) -> bool:
    return any((_number(stat(r.stats, column.key)) or 0) > 0 for r in rows)


def _columns(rows: Sequence[LeaderboardRow], workload: Workload | None) -> list[_Cells]:
    """Rank, agent, score, then what the workload declares, in that order."""
    columns = [
        _Cells("#", [str(rank) for rank in range(1, len(rows) + 1)]),
        _Cells("Agent", [r.agent for r in rows], justify="left", flexible=True),
        _Cells(workload.score_header if workload else "Score",
               [format_value(r.score, "number") for r in rows]),
    ]  # fmt: skip
    if workload is None:
        return columns
    if workload.interval is not None:
        spec = workload.interval
        marks = overlaps_above([interval_of(r.stats, spec) for r in rows])
        columns.append(_Cells(spec.header, _interval_cells(rows, spec)))
        if any(marks):
            columns.append(_Cells("", [OVERLAP_MARK if m else "" for m in marks], justify="left"))
    columns += [_stat_cells(rows, c) for c in workload.table_columns]
    if workload.errors_column is not None and _has_errors(rows, workload.errors_column):
        columns.append(_stat_cells(rows, workload.errors_column))
    return columns


def _wrapped_headers(columns: Sequence[_Cells]) -> list[str]:
    """Each header wrapped at spaces to its column's widest cell (never inside a word), and
    padded on top so that every header sits on the rule: columns stay as narrow as their data."""
    wrapped = []
    for column in columns:
        if not column.cells:  # an empty board: nothing to be as narrow as
            wrapped.append([column.header])
            continue
        words = column.header.split()
        width = max([cell_len(c) for c in column.cells] + [cell_len(w) for w in words])
        wrapped.append(textwrap.wrap(column.header, width) or [""])
    height = max(len(lines) for lines in wrapped)
    return ["\n".join([""] * (height - len(lines)) + lines) for lines in wrapped]


def leaderboard_view(
    name: str, rows: Sequence[LeaderboardRow], workload: Workload | None
) -> tuple[Table, list[dict[str, Any]]]:
    """The table to print and the JSON payload (`{"rank", **row}`), both in rank order."""
    ordered = ranked(rows, workload)
    columns = _columns(ordered, workload)
    marked = any(OVERLAP_MARK in column.cells for column in columns)
    table = Table(
        title=f"Leaderboard: {name}",
        caption=OVERLAP_CAPTION if marked else None,
        caption_justify="left",
        # No frame and two spaces between columns, a rule under the headers: the narrowest
        # table that still reads as columns, so that nine of them fit in 100 characters.
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for column, header in zip(columns, _wrapped_headers(columns), strict=True):
        table.add_column(
            Text(header),
            justify=column.justify,
            # Only the agent column gives way (folded, never "…") when the terminal is narrower
            # than the table; numbers never wrap, and where even that is not enough they are
            # visibly cut ("…"), never silently cropped.
            no_wrap=not column.flexible,
            overflow="fold" if column.flexible else "ellipsis",
        )
    for i in range(len(ordered)):
        table.add_row(*(Text(column.cells[i]) for column in columns))
    payload = [{"rank": rank, **row.model_dump()} for rank, row in enumerate(ordered, start=1)]
    return table, payload
