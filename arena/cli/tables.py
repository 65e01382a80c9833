"""Leaderboards as rich tables that fit a 100-column terminal without cutting a header or a name.

Which columns appear is the workload's declaration (`Workload.score_header`, `interval`,
`table_columns`, `errors_column`), never a guess from the values of one row.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from arena.service.boards import Board
from arena.service.numbers import (
    as_number,
    format_value,
    interval_of,
    overlaps_above,
    stat,
    with_interval,
)
from tasks.store import LeaderboardRow
from tasks.workloads.base import Column, IntervalSpec

OVERLAP_MARK = "≈"
OVERLAP_CAPTION = f"{OVERLAP_MARK} interval overlaps the row above: not separated"


@dataclass(frozen=True)
class _Cells:
    """A column as rendered text: the declared header, its cells, how they align, and whether
    the column may give way (wrap) when the terminal is narrower than the table."""

    header: str
    cells: list[str]
    justify: JustifyMethod = "right"
    flexible: bool = False


def _interval_cells(rows: Sequence[LeaderboardRow], s: IntervalSpec) -> list[str]:
    return [with_interval(stat(r.stats, s.point), interval_of(r.stats, s), s.fmt) for r in rows]


def _stat_cells(rows: Sequence[LeaderboardRow], column: Column) -> _Cells:
    cells = [format_value(stat(r.stats, column.key), column.fmt) for r in rows]
    return _Cells(column.header, cells)


def shown(rows: Sequence[LeaderboardRow], column: Column) -> bool:
    """A declared column, unless it is optional and no row has its value."""
    return not column.optional or any(stat(r.stats, column.key) is not None for r in rows)


def _has_errors(rows: Sequence[LeaderboardRow], column: Column) -> bool:
    return any((as_number(stat(r.stats, column.key)) or 0) > 0 for r in rows)


def _columns(board: Board) -> list[_Cells]:
    """Rank, agent, score, then what the workload declares, in that order."""
    rows, workload = board.rows, board.workload
    columns = [
        _Cells("#", [str(rank) for rank in board.ranks]),
        _Cells("Agent", [r.agent for r in rows], justify="left", flexible=True),
        _Cells(
            workload.score_header if workload else "Score",
            [format_value(r.score, "number") for r in rows],
        ),
    ]
    if workload is None:
        return columns
    if workload.interval is not None:
        spec = workload.interval
        marks = overlaps_above([interval_of(r.stats, spec) for r in rows])
        columns.append(_Cells(spec.header, _interval_cells(rows, spec)))
        if any(marks):
            columns.append(_Cells("", [OVERLAP_MARK if m else "" for m in marks], justify="left"))
    columns += [_stat_cells(rows, c) for c in workload.table_columns if shown(rows, c)]
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


def leaderboard_table(board: Board) -> Table:
    """The board as a table, in its rank order, with the columns its workload declares."""
    columns = _columns(board)
    marked = any(OVERLAP_MARK in column.cells for column in columns)
    table = Table(
        title=f"Leaderboard: {board.name}",
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
    for i in range(len(board.rows)):
        table.add_row(*(Text(column.cells[i]) for column in columns))
    return table
