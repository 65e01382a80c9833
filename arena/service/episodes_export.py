"""Episodes as a table, one row per episode (unit), for pandas and spreadsheets: `arena
leaderboard NAME --csv`, `arena mario series BOARD RUN --csv`, `arena report ID --csv`
(docs/reports.md, "Episodes as CSV"). Nothing is scored here: each row is a stored unit result,
its scalar numbers as the worker stored them (a Mario episode's `arena_score`, `max_x`, `steps`,
`completed`, `coins`, ...); long strings (the action log) stay in the report."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from arena.service.boards import Board, read_board
from arena.service.series import Series, series_of
from tasks.store import LeaderboardRow, Store
from tasks.workloads.base import UnitResult

UNIT_COLUMNS = ("batch", "agent", "item", "episode", "status", "error_kind", "reason", "duration_s")


def scalars(result: dict[str, Any]) -> dict[str, Any]:
    """The result's numbers and flags (and None): what a column of a table can hold."""
    return {k: v for k, v in result.items() if v is None or isinstance(v, bool | int | float)}


def unit_row(batch: str, unit: UnitResult) -> dict[str, Any]:
    own = {
        "batch": batch,
        "agent": unit.agent,
        "item": unit.item,
        "episode": unit.episode,
        "status": unit.status,
        "error_kind": unit.error_kind,
        "reason": unit.reason,
        "duration_s": unit.duration_s,
    }
    return {**scalars(unit.result), **own}


def batch_episodes(db: Store, batch_id: str) -> list[dict[str, Any]]:
    """Every unit of a batch, by agent, item and episode."""
    units = sorted(db.unit_results(batch_id).values(), key=lambda u: (u.agent, u.item, u.episode))
    return [unit_row(batch_id, u) for u in units]


def row_episodes(db: Store, board: str, rows: Iterable[LeaderboardRow]) -> list[dict[str, Any]]:
    """The episodes behind each row: its batch's units of its agent (on its level, where the
    row names one, as a Mario board's do), in row order, each with the board's name first."""
    read: dict[str, dict[str, UnitResult]] = {}  # batch -> its units, read once
    table = []
    for row in rows:
        if row.batch not in read:
            read[row.batch] = db.unit_results(row.batch)
        level = row.stats.get("level")
        mine = [
            u
            for u in read[row.batch].values()
            if u.agent == row.agent and (level is None or u.item == level)
        ]
        for unit in sorted(mine, key=lambda u: (u.item, u.episode)):
            table.append({"board": board, **unit_row(row.batch, unit)})
    return table


def board_episodes(db: Store, board: Board) -> list[dict[str, Any]]:
    """A board's episodes, row by row in rank order, with the row's rank."""
    table = []
    for rank, row in zip(board.ranks, board.rows, strict=True):
        table += [{**e, "rank": rank} for e in row_episodes(db, board.name, [row])]
    return table


def series_episodes(db: Store, board: Board, series: Series) -> list[dict[str, Any]]:
    """A run's episodes, checkpoint by checkpoint in training order, with its training steps
    (`training_steps`; `steps` is an episode's own, as the worker stored it)."""
    rows = {r.agent: r for r in board.rows}
    table = []
    for point in series.points:
        found = row_episodes(db, board.name, [rows[point.agent]])
        table += [{**e, "training_steps": point.steps} for e in found]
    return table


def to_csv(table: list[dict[str, Any]], first: tuple[str, ...] = ()) -> str:
    """The table as CSV: `first`, the unit's own columns, then every other key in the order
    first seen; a row without a key leaves it empty. A header alone when there are no rows."""
    columns = list(dict.fromkeys([*first, *UNIT_COLUMNS]))
    for row in table:
        columns += [k for k in row if k not in columns]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return out.getvalue()


def board_csv(db: Store, name: str) -> str:
    """`arena leaderboard NAME --csv`; InputError for an unknown board, as the table's."""
    return to_csv(board_episodes(db, read_board(db, name)), ("board", "rank"))


def series_csv(db: Store, name: str, run: str) -> str:
    """`arena mario series BOARD RUN --csv`; InputError as the series' own."""
    board = read_board(db, name)
    return to_csv(series_episodes(db, board, series_of(board, run)), ("board", "training_steps"))


def batch_csv(db: Store, batch_id: str) -> str:
    """`arena report ID --csv`: every unit of the batch."""
    return to_csv(batch_episodes(db, batch_id))
