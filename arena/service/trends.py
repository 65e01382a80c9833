"""A board's trend (docs/api.md, "Pictures"): one point per evaluation of each agent (GET
/leaderboards/{name}/history/{agent}) and, where the workload declares an interval in the
score's units, that statistic with its 95% band as the evaluating batch stored it (GET
/batches/{id}: `batch.entries`).

The band of a point is read from its batch's record, the whole of it: kept here per evaluation,
so the trend of one agent (a row of the page, a picture each) reads its history, not twenty
batch records. The key is the batch, board, agent and the time of the batch's latest
evaluation in the history: a batch run again (`fresh`) adds a point, and its new entries are
read again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any
from weakref import WeakKeyDictionary

from pydantic import BaseModel

from arena.service.boards import Board
from arena.service.numbers import as_number, stat
from tasks.store import BatchInfo, LeaderboardRow, Store
from tasks.workloads.base import Workload

Pair = list[float]  # a 95% interval [low, high], as the stats hold it
Band = tuple[float | None, Pair | None]
MAX_KEPT = 100_000  # bands per Store (a few floats each)


class TrendPoint(BaseModel):
    batch: str
    at: float
    score: float
    point: float | None = None  # the interval's statistic in that evaluation
    ci95: Pair | None = None


class AgentTrend(BaseModel):
    agent: str
    points: list[TrendPoint]


class TrendPicture(BaseModel):
    board: str
    score: str  # the primary score's header
    interval: str | None  # the band's header (None: the workload declares none)
    agents: list[AgentTrend]


class KeptBands:
    """(batch, board, agent, latest evaluation, statistic) -> the band, per Store."""

    def __init__(self) -> None:
        self._bands: WeakKeyDictionary[Store, OrderedDict[tuple[Any, ...], Band]] = (
            WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self, db: Store, key: tuple[Any, ...]) -> Band | None:
        with self._lock:
            kept = self._bands.get(db)
            return None if kept is None else kept.get(key)

    def put(self, db: Store, key: tuple[Any, ...], band: Band) -> None:
        with self._lock:
            kept = self._bands.setdefault(db, OrderedDict())
            kept[key] = band
            while len(kept) > MAX_KEPT:
                kept.popitem(last=False)


KEPT = KeptBands()


def band_of(workload: Workload) -> tuple[str, str, str] | None:
    """The statistic a trend draws as a band: (point key, interval key, header) of the
    workload's interval, else of its first interval column in the score's units."""
    if workload.interval is not None:
        spec = workload.interval
        return spec.point, spec.ci95, spec.header
    for column in workload.board_page_columns():
        if column.shown_as == "interval" and column.ci95 and column.fmt != "percent":
            return column.key, column.ci95, column.header
    return None


def trend_picture(db: Store, board: Board, rows: list[LeaderboardRow]) -> TrendPicture:
    assert board.workload is not None  # board_kinds: a trend needs rows
    band = band_of(board.workload)
    read: dict[str, BatchInfo | None] = {}  # each evaluating batch read at most once
    agents = []
    for row in rows:
        history = db.history(board.name, row.agent)
        latest = {p["batch"]: p["at"] for p in history}  # oldest first: the last one stays
        points = []
        for raw in history:
            point = TrendPoint(batch=raw["batch"], at=raw["at"], score=raw["score"])
            if band is not None:
                key = (point.batch, board.name, row.agent, latest[point.batch], band)
                kept = KEPT.get(db, key)
                if kept is None:
                    if point.batch not in read:
                        read[point.batch] = db.batch(point.batch)
                    stats = entry_stats(read[point.batch], board.name, row.agent)
                    kept = (as_number(stat(stats, band[0])), pair(stat(stats, band[1])))
                    KEPT.put(db, key, kept)
                point.point, point.ci95 = kept
            points.append(point)
        agents.append(AgentTrend(agent=row.agent, points=points))
    return TrendPicture(
        board=board.name,
        score=board.workload.score_header,
        interval=band[2] if band else None,
        agents=agents,
    )


def entry_stats(info: BatchInfo | None, board: str, agent: str) -> dict[str, Any]:
    """The stats a batch wrote for `agent` on `board` ({} when it wrote none)."""
    if info is None or not info.boards:
        return {}
    first = next(iter(info.boards))
    for entry in info.entries:
        if entry.agent == agent and (entry.board or first) == board:
            return entry.stats
    return {}


def pair(value: Any) -> Pair | None:
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    low, high = (as_number(v) for v in value)
    return None if low is None or high is None else [low, high]
