"""The numbers behind the pictures (docs/api.md, "Pictures"): what each chart of a board or a
race shows, read with the readers the JSON endpoints use and nothing scored again. The web
layer draws them (arena/web/charts/) and puts the same numbers on the page, in data-
attributes and in each SVG's <desc>, so a test can compare them with the API's.

- `episodes` (a Mario board): each agent's episode scores (the `arena_score` its units
  stored, GET /batches/{id}'s report), its success rate with the Wilson interval and its
  average max x (GET /leaderboards/{name}).
- `trend` (any board): one point per evaluation, with its band (arena/service/trends.py).
- `bars` (a board whose workload shows bars: Alympics' categories, a race's dimensions).
- `heatmap` (an Alympics board): every agent's normalised per-game values, by category.
- `series` (a board with checkpoints `<run>@<steps>`): each run's learning curve, the numbers
  of GET /leaderboards/{name}/series/{run} (arena/service/series.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from arena.service.boards import Board, read_board
from arena.service.numbers import as_number, stat
from arena.service.series import Series, board_series, series_of
from arena.service.trends import TrendPicture, trend_picture
from tasks.store import LeaderboardRow, Store
from tasks.validation import InputError
from tasks.workloads import get_workload
from tasks.workloads.base import UnitResult
from tasks.workloads.mario import row_trajectories
from workers.mario.protocol import MarioProtocol

BoardKind = Literal["episodes", "trend", "bars", "heatmap", "series"]
BOARD_KINDS: tuple[BoardKind, ...] = ("episodes", "trend", "bars", "heatmap", "series")
Pair = list[float]  # a 95% interval [low, high], as the stats hold it


class AgentEpisodes(BaseModel):
    agent: str
    batch: str  # the evaluation the row is (its replay's batch)
    level: str | None
    scores: list[float]  # each episode played, in episode order
    failed: int  # episodes that ended in an error (scored as the rubric says, not shown)
    best: float  # the board's score: the best episode
    success_rate: float
    success_ci95: Pair
    avg_max_x: float
    # distinct trajectories of the episodes played (tasks/workloads/mario.py, row_trajectories)
    trajectories: int | None = None


class EpisodesPicture(BaseModel):
    board: str
    agents: list[AgentEpisodes]


class AgentBars(BaseModel):
    agent: str
    score: float
    values: dict[str, float | None]  # column key -> 0-100 value


class BarsPicture(BaseModel):
    board: str
    columns: dict[str, str]  # key -> header, in the workload's order
    agents: list[AgentBars]


class HeatPicture(BaseModel):
    board: str
    columns: list[tuple[str, str]]  # (category, game), in the rubric's order
    agents: list[str]
    values: list[list[float | None]]  # agent x column, 0-100


class RaceAgent(BaseModel):
    name: str
    rank: int
    composite: float
    scores: dict[str, float | None]  # dimension -> 0-100


class RacePicture(BaseModel):
    batch_id: str
    verdict: str | None
    winner: str | None
    dimensions: list[str]
    agents: list[RaceAgent]


class SeriesPicture(BaseModel):
    board: str
    series: list[Series]  # one learning curve per run, by run name


Picture = EpisodesPicture | TrendPicture | BarsPicture | HeatPicture | RacePicture | SeriesPicture


def board_kinds(board: Board) -> list[BoardKind]:
    """The pictures a board has: a trend for every board with rows, the others where its
    workload's numbers hold them."""
    workload = board.workload
    if workload is None or not board.rows:
        return []
    kinds: list[BoardKind] = []
    if workload.name == "mario":
        kinds.append("episodes")
    kinds.append("trend")
    if any(c.shown_as == "bar" for c in workload.board_page_columns()):
        kinds.append("bars")
    if workload.name == "alympics":
        kinds.append("heatmap")
    if board_series(board):
        kinds.append("series")
    return kinds


def board_picture(
    db: Store, name: str, kind: BoardKind, agent: str | None = None, run: str | None = None
) -> Picture:
    """The numbers of one picture of board NAME (`agent`: the trend of that agent alone; `run`:
    that run's learning curve alone); InputError naming what is missing."""
    return picture_of(db, read_board(db, name), kind, agent, run)


def picture_of(
    db: Store, board: Board, kind: BoardKind, agent: str | None = None, run: str | None = None
) -> Picture:
    """board_picture of a board already read."""
    name = board.name
    if kind not in board_kinds(board):
        what = f"a board of {board.workload.name}" if board.workload else "an empty board"
        raise InputError(f"chart: leaderboard {name!r} is {what}: it has no {kind} chart")
    if kind == "series":
        runs = board_series(board) if run is None else [series_of(board, run)]
        return SeriesPicture(board=name, series=runs)
    rows = board.rows
    if agent is not None:
        rows = [r for r in rows if r.agent == agent]
        if not rows:
            raise InputError(f"chart: no agent {agent!r} on leaderboard {name!r}")
    builders: dict[BoardKind, Callable[[Store, Board, list[LeaderboardRow]], Picture]] = {
        "episodes": episodes_picture,
        "trend": trend_picture,
        "bars": bars_picture,
        "heatmap": heat_picture,
    }
    return builders[kind](db, board, rows)


def episodes_picture(db: Store, board: Board, rows: list[LeaderboardRow]) -> EpisodesPicture:
    results: dict[str, dict[str, UnitResult]] = {}  # batch -> its unit results, read once
    agents = []
    for row in rows:
        if row.batch not in results:
            results[row.batch] = db.unit_results(row.batch)
        level = row.stats.get("level")
        mine = sorted(
            (r for r in results[row.batch].values() if r.agent == row.agent and r.item == level),
            key=lambda r: r.episode,
        )
        scores = [float(r.result["arena_score"]) for r in mine if r.status == "ok"]
        agents.append(
            AgentEpisodes(
                agent=row.agent,
                batch=row.batch,
                level=level,
                scores=scores,
                failed=sum(r.status == "error" for r in mine),
                best=row.score,
                success_rate=row.stats["success_rate"],
                success_ci95=list(row.stats["success_ci95"]),
                avg_max_x=row.stats["avg_max_x"],
                trajectories=trajectories_of(db, row, mine),
            )
        )
    return EpisodesPicture(board=board.name, agents=agents)


def trajectories_of(db: Store, row: LeaderboardRow, results: list[UnitResult]) -> int | None:
    """The row's distinct trajectories: as its stats keep them, or, for a row written before they
    did, counted from its unit results with its batch's seed; None when they cannot be."""
    kept = row.stats.get("trajectories")
    if isinstance(kept, int):
        return kept
    info = db.batch(row.batch)
    try:
        seed = int(info.spec["protocol"]["seed"]) if info else 0
        params = MarioProtocol.model_validate(row.stats["protocol"], strict=False)
        return row_trajectories(results, params, seed) if info else None
    except (KeyError, TypeError, ValueError):  # results of another shape: not known
        return None


def bars_picture(db: Store, board: Board, rows: list[LeaderboardRow]) -> BarsPicture:
    assert board.workload is not None
    columns = {c.key: c.header for c in board.workload.board_page_columns() if c.shown_as == "bar"}
    agents = [
        AgentBars(
            agent=row.agent,
            score=row.score,
            values={key: as_number(stat(row.stats, key)) for key in columns},
        )
        for row in rows
    ]
    return BarsPicture(board=board.name, columns=columns, agents=agents)


def heat_picture(db: Store, board: Board, rows: list[LeaderboardRow]) -> HeatPicture:
    """Alympics' stats.games: category -> game -> the rubric's normalised value (0-100)."""
    columns: list[tuple[str, str]] = []
    for row in rows:
        for category, games in (row.stats.get("games") or {}).items():
            columns += [(category, g) for g in games if (category, g) not in columns]
    values = [[as_number(stat(row.stats, f"games.{c}.{g}")) for c, g in columns] for row in rows]
    return HeatPicture(
        board=board.name, columns=columns, agents=[r.agent for r in rows], values=values
    )


def race_dimensions() -> list[str]:
    """The race's scored dimensions, as its workload declares them (build, tests, ...)."""
    return [c.css for c in get_workload("race").board_page_columns()]


def race_picture(summary: dict[str, Any], dimensions: list[str]) -> RacePicture:
    """A reduced race (races.results_payload, GET /races/{id}): each scored agent's dimensions
    and composite, in rank order, and the verdict."""
    agents = [
        RaceAgent(
            name=row["name"],
            rank=row["rank"],
            composite=row["composite"],
            scores={d: as_number((row.get("scores") or {}).get(d)) for d in dimensions},
        )
        for row in summary.get("agents", [])
    ]
    return RacePicture(
        batch_id=summary["batch_id"],
        verdict=summary.get("verdict"),
        winner=summary.get("winner"),
        dimensions=dimensions,
        agents=agents,
    )
