"""What Arena reads back from Redis: a batch's record and a leaderboard's rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tasks.identity import BatchIdentity
from tasks.provenance import Provenance
from tasks.workloads.base import LeaderboardEntry

# incomplete: every unit ran, but some could not be run for infrastructure reasons (lost
# worker, lost unit): no score is written, and resubmitting retries those units.
BatchStatus = Literal["running", "done", "incomplete", "failed", "cancelled"]
FINISHED: tuple[BatchStatus, ...] = ("done", "incomplete", "failed", "cancelled")


class BatchInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    workload: str
    leaderboard: str  # the boards it writes, comma-separated (for people)
    boards: dict[str, str] = {}  # board -> the protocol fingerprint it holds
    status: BatchStatus
    total: int
    completed: int = 0
    errors: int = 0  # of which infrastructure_errors are not the agents' doing
    infrastructure_errors: int = 0
    created_at: float
    finished_at: float | None = None
    reason: str | None = None
    summary: dict[str, Any] | None = None
    entries: list[LeaderboardEntry] = []  # this batch's own scores (a board keeps the latest)
    spec: dict[str, Any]  # normalised (tasks.workloads.base.normalise)
    identity: BatchIdentity
    provenance: Provenance
    run_id: str | None = None
    # Sharing (docs/architecture.md): the class and weight it was submitted with, and the team
    # whose token submitted it (None: the CLI's operator, or a token of no team).
    priority: Literal["interactive", "scheduled", "bulk"] = "scheduled"
    weight: float = 1.0
    team: str | None = None


class LeaderboardRow(BaseModel):
    # Frozen: a Store hands the same rows to every read of an unchanged board (Store.leaderboard).
    model_config = ConfigDict(frozen=True)

    agent: str
    score: float
    stats: dict[str, Any]
    batch: str
    updated_at: float
    provenance: dict[str, Any] = {}


def as_entries(rows: Iterable[LeaderboardRow]) -> list[LeaderboardEntry]:
    return [LeaderboardEntry(agent=r.agent, score=r.score, stats=r.stats) for r in rows]


def by_board(
    entries: Sequence[LeaderboardEntry], boards: dict[str, str]
) -> dict[str, list[LeaderboardEntry]]:
    """Entries grouped by the board they go to (an entry without one: the first board)."""
    first = next(iter(boards))
    grouped: dict[str, list[LeaderboardEntry]] = {}
    for entry in entries:
        board = entry.board or first
        if board not in boards:
            raise ValueError(f"entry for {entry.agent!r} names board {board!r}, not the batch's")
        grouped.setdefault(board, []).append(entry)
    return grouped
