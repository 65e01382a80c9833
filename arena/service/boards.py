"""Leaderboards as every front door reads them: one reader, in the workload's rank order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from scoring._common import competition_ranks
from tasks.store import LeaderboardRow, Store, as_entries
from tasks.validation import InputError
from tasks.workloads import get_workload
from tasks.workloads.base import LeaderboardEntry, Workload


@dataclass(frozen=True)
class Board:
    """A board's rows in rank order and the workload that declares its columns (None for a
    board with no rows yet)."""

    name: str
    rows: list[LeaderboardRow]
    workload: Workload | None

    @property
    def ranks(self) -> list[int]:
        """Each row's rank (`ranks_of`): what the table, --json and the page show."""
        return ranks_of(as_entries(self.rows), self.workload)

    def payload(self) -> list[dict[str, Any]]:
        """The rows as JSON (`arena leaderboard NAME --json`, GET /leaderboards/{name})."""
        return [
            {"rank": rank, **row.model_dump()}
            for rank, row in zip(self.ranks, self.rows, strict=True)
        ]

    def rubric_text(self) -> str | None:
        """The board as its workload's rubric prints it, if it has its own table."""
        if self.workload is None or not self.rows:
            return None
        return self.workload.format_board(self.name, as_entries(self.rows))


def ranks_of(ordered: Sequence[LeaderboardEntry], workload: Workload | None) -> list[int]:
    """The ranks of entries in the workload's rank order, the one tie rule of every front door
    (table, --json, page, report; the rubric's own tables rank alike): standard competition
    ranking, "1, 2, 2, 4": entries the workload cannot tell apart (equal on its rank key: Mario's
    score and tiebreakers, others' score) share the best rank, the next ranks by its position."""
    if workload is None:  # no rows, or a board whose workload is gone: by score, as stored
        return competition_ranks([-e.score for e in ordered])
    return competition_ranks([workload.rank_key(e) for e in ordered])


def ranked(rows: list[LeaderboardRow], workload: Workload | None) -> list[LeaderboardRow]:
    """Rows in the workload's rank order (the store's order, by score, when it is unknown)."""
    if workload is None:
        return list(rows)
    by_agent = {r.agent: r for r in rows}
    return [by_agent[e.agent] for e in workload.rank(as_entries(rows))]


def read_board(db: Store, name: str) -> Board:
    """The board NAME; InputError naming it when there is none."""
    if name not in db.leaderboard_names():
        raise InputError(f"leaderboard: no leaderboard {name!r}")
    rows = db.leaderboard(name)
    # The workload's name alone, not the whole record of the batch that wrote the first row.
    workload_name = db.workload_of(rows[0].batch) if rows else None
    workload = get_workload(workload_name) if workload_name else None
    return Board(name, ranked(rows, workload), workload)


def version_key(db: Store, name: str) -> str:
    """Where the board's version lives: a random token that every batch published to the
    board replaces, in the MULTI/EXEC that writes its rows (tasks/store_boards.py, _publish),
    and that the Store keeps its rows by. What was built from a board's rows stays true while
    this token does (the API's encoded answers, arena/web/state.py BoardAnswers)."""
    return db.keys.board_version(name)


def board_version(db: Store, name: str) -> str | None:
    """The board's version (version_key); None when there is no such board. One GET."""
    version: str | None = db.r.get(version_key(db, name))
    return version


def boards_made(db: Store, names: Iterable[str]) -> list[Board]:
    """The boards of `names` that exist: a batch that put nobody on a board (a race that
    failed at the start) never made it."""
    made = set(db.leaderboard_names())
    return [read_board(db, name) for name in names if name in made]


def history(db: Store, name: str, agent: str) -> list[dict[str, Any]]:
    """One point per evaluation of the agent on the board, oldest first; InputError when the
    board or the agent is unknown."""
    if name not in db.leaderboard_names():
        raise InputError(f"leaderboard: no leaderboard {name!r}")
    points = db.history(name, agent)
    if not points:
        raise InputError(f"history: no agent {agent!r} on leaderboard {name!r}")
    return points
