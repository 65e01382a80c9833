"""Two agents of a board compared episode by episode (`arena compare`, the board page's
neighbouring rows; docs/mario.md, "Comparing two agents"). The episodes are the ones the
board's `episodes` picture reads (pictures.episodes_picture: the unit results of the batch
behind each row); the statistic is scoring/compare.py's. A run's series (arena/service/series.py)
is read here too: each checkpoint against the one before it in training order."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel

from arena.service.boards import Board, read_board
from arena.service.pictures import (
    AgentEpisodes,
    SeriesPicture,
    board_kinds,
    episodes_picture,
    picture_of,
)
from arena.service.series import Series, series_of
from scoring.compare import RESAMPLES, Comparison, compare_scores
from tasks.store import Store
from tasks.validation import InputError


class NotOnBoard(InputError):
    """No such board, or no such agent on it: what the API answers 404 (compare's other
    refusals, a board without per-episode scores or an agent against itself, are 422)."""


class BoardComparison(BaseModel):
    board: str
    a: str
    b: str
    scores_a: list[float]  # each episode, a failed one at the rubric's score for it
    scores_b: list[float]
    comparison: Comparison


def episode_scores(agent: AgentEpisodes) -> list[float]:
    """The agent's episodes as its row scored them: those played, then each failed episode at
    the worst its played episodes scored, or 0, whichever is lower (scoring/mario.py)."""
    return agent.scores + [min([0.0, *agent.scores])] * agent.failed


def check_comparable(board: Board) -> None:
    if "episodes" not in board_kinds(board):
        what = f"a board of {board.workload.name}" if board.workload else "an empty board"
        raise InputError(
            f"compare: leaderboard {board.name!r} is {what}: its rows keep no per-episode "
            "scores to compare (a Mario board's do)"
        )


def compare_agents(
    db: Store, name: str, a: str, b: str, resamples: int = RESAMPLES, seed: int = 0
) -> BoardComparison:
    """P(A beats B) on board NAME (`arena compare`, GET /leaderboards/{name}/compare);
    NotOnBoard naming the board or agent that is missing, InputError for the other refusals."""
    try:
        board = read_board(db, name)
    except InputError as exc:
        raise NotOnBoard(str(exc)) from None
    check_comparable(board)
    if a == b:
        raise InputError(f"compare: {a!r} against itself; name two agents")
    rows = {r.agent: r for r in board.rows}
    for agent in (a, b):
        if agent not in rows:
            raise NotOnBoard(f"compare: no agent {agent!r} on leaderboard {name!r}")
    picture = episodes_picture(db, board, [rows[a], rows[b]])
    scores_a, scores_b = (episode_scores(x) for x in picture.agents)
    for agent, scores in ((a, scores_a), (b, scores_b)):
        if not scores:
            raise InputError(f"compare: {agent!r} has no episodes on leaderboard {name!r}")
    comparison = compare_scores(
        scores_a, scores_b, resamples, seed, trajectories=trajectory_pair(*picture.agents)
    )
    return BoardComparison(
        board=name, a=a, b=b, scores_a=scores_a, scores_b=scores_b, comparison=comparison
    )


def neighbour_comparisons(db: Store, board: Board) -> dict[str, Comparison]:
    """Each row against the row below it, keyed by the upper row's agent (the board page): none
    on a board without per-episode scores, nor for a pair where one has no episodes."""
    if "episodes" not in board_kinds(board):
        return {}
    agents = episodes_picture(db, board, board.rows).agents
    scores = [episode_scores(x) for x in agents]
    return {
        upper.agent: kept_comparison(
            tuple(scores[i]), tuple(scores[i + 1]), trajectory_pair(agents[i], agents[i + 1])
        )
        for i, upper in enumerate(board.rows[:-1])
        if scores[i] and scores[i + 1]
    }


def against_previous(db: Store, board: Board, series: Series) -> Series:
    """The series with each point after the first compared with the checkpoint before it in
    training order (`vs_previous`: P(this beats the previous), what `arena compare BOARD THIS
    PREVIOUS` answers); None for the first point, on a board without per-episode scores, and
    where either checkpoint has no episodes. Each point's `trajectories` as the episodes
    read them (a row from before the stats kept them included)."""
    if "episodes" not in board_kinds(board):
        return series
    rows = {r.agent: r for r in board.rows}
    agents = episodes_picture(db, board, [rows[p.agent] for p in series.points]).agents
    scores = [tuple(episode_scores(x)) for x in agents]
    points = [
        point.model_copy(update={"trajectories": agent.trajectories})
        for point, agent in zip(series.points, agents, strict=True)
    ]
    for i in range(1, len(points)):
        if scores[i] and scores[i - 1]:
            versus = kept_comparison(
                scores[i], scores[i - 1], trajectory_pair(agents[i], agents[i - 1])
            )
            points[i] = points[i].model_copy(update={"vs_previous": versus})
    return series.model_copy(update={"points": points})


def read_series(db: Store, name: str, run: str) -> Series:
    """The run's series on board NAME, each point against the previous (GET
    /leaderboards/{name}/series/{run}, `arena mario series`); InputError naming the board or
    the run when missing."""
    board = read_board(db, name)
    return against_previous(db, board, series_of(board, run))


def series_picture(db: Store, board: Board, run: str | None = None) -> SeriesPicture:
    """The board's `series` picture (pictures.picture_of: every run's learning curve, or RUN's
    alone), each series as read_series answers it; InputError as picture_of's."""
    picture = picture_of(db, board, "series", run=run)
    assert isinstance(picture, SeriesPicture)
    runs = [against_previous(db, board, s) for s in picture.series]
    return picture.model_copy(update={"series": runs})


def trajectory_pair(a: AgentEpisodes, b: AgentEpisodes) -> tuple[int, int] | None:
    """Each side's distinct trajectories, when both are known (compare_scores' `trajectories`:
    under two on a side nothing is concluded)."""
    if a.trajectories is None or b.trajectories is None:
        return None
    return a.trajectories, b.trajectories


@lru_cache(maxsize=256)
def kept_comparison(
    a: tuple[float, ...], b: tuple[float, ...], trajectories: tuple[int, int] | None = None
) -> Comparison:
    """compare_scores with the defaults, kept per process by the scores themselves: the page
    bootstraps each pair once (2,000 resamples of 1,000 distinct episodes each take about a
    second), not on every load."""
    return compare_scores(a, b, trajectories=trajectories)
