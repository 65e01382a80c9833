"""Two algorithms of a board compared over their runs (`arena compare BOARD A B --runs`, GET
/leaderboards/{name}/compare-runs; docs/mario.md, "Seeds and runs"). A run of algorithm A is
an agent named `A-seed<k>` (or `A_seed<k>`, `A.seed<k>`), a checkpoint of it `A-seed<k>@<steps>`;
each run gives the board its latest checkpoint, or the one at `steps`. Each run's episodes, by
their index on the board (the same sticky draws for every agent: a stratum), are a row of the
matrix scoring/runs.py compares as rliable does."""

from __future__ import annotations

import re

from pydantic import BaseModel

from arena.service.boards import Board, read_board
from arena.service.compare import NotOnBoard, check_comparable
from arena.service.pictures import episodes_picture
from arena.service.series import parse_checkpoint
from scoring.runs import RESAMPLES, RunsComparison, compare_runs
from tasks.store import LeaderboardRow, Store
from tasks.validation import InputError

SEEDED_RUN = re.compile(
    r"^(?P<algorithm>[A-Za-z0-9][A-Za-z0-9._-]*?)[-_.]seed(?P<seed>[0-9]{1,6})$"
)


class RunsView(BaseModel):
    board: str
    a: str
    b: str
    steps: int | None  # the checkpoint each run gave; None: each run's latest
    agents_a: list[str]  # the row of each run, by seed
    agents_b: list[str]
    episodes: list[int]  # the episode indices every run has: the matrix's columns
    scores_a: list[list[float]]  # runs × episodes, a failed episode at the rubric's score for it
    scores_b: list[list[float]]
    comparison: RunsComparison


def seeded_run(agent: str) -> tuple[str, int, int | None] | None:
    """(algorithm, seed, steps) of an agent named `<algorithm>-seed<k>[@<steps>]`; None else."""
    checkpoint = parse_checkpoint(agent)
    run, steps = checkpoint if checkpoint else (agent, None)
    found = SEEDED_RUN.match(run)
    return None if found is None else (found["algorithm"], int(found["seed"]), steps)


def runs_of(board: Board, algorithm: str, steps: int | None) -> list[LeaderboardRow]:
    """One row per seed of ALGORITHM, by seed: the checkpoint at STEPS, or the latest."""
    chosen: dict[int, tuple[int, LeaderboardRow]] = {}
    for row in board.rows:
        parsed = seeded_run(row.agent)
        if parsed is None or parsed[0] != algorithm:
            continue
        _, seed, at = parsed
        if steps is not None and at != steps:
            continue
        order = -1 if at is None else at
        if seed not in chosen or order > chosen[seed][0]:
            chosen[seed] = (order, row)
    rows = [chosen[seed][1] for seed in sorted(chosen)]
    if len(rows) < 2:
        where = "" if steps is None else f" with a checkpoint at {steps} steps"
        named = ", ".join(r.agent for r in rows) or "none"
        raise InputError(
            f"compare --runs: {len(rows)} run(s) of {algorithm!r} on leaderboard {board.name!r}"
            f"{where} ({named}); at least 2 needed, agents named {algorithm}-seed<k>[@<steps>]"
        )
    return rows


def compare_algorithms(
    db: Store,
    name: str,
    a: str,
    b: str,
    steps: int | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> RunsView:
    """A's runs against B's on board NAME; NotOnBoard for a missing board, InputError for the
    other refusals (too few runs, A = B, no episode every run has)."""
    try:
        board = read_board(db, name)
    except InputError as exc:
        raise NotOnBoard(str(exc)) from None
    check_comparable(board)
    if a == b:
        raise InputError(f"compare --runs: {a!r} against itself; name two algorithms")
    rows_a, rows_b = runs_of(board, a, steps), runs_of(board, b, steps)
    by_episode = [episode_slots(db, row) for row in (*rows_a, *rows_b)]
    common = sorted(set(by_episode[0]).intersection(*by_episode[1:]))
    if not common:
        raise InputError(f"compare --runs: the runs of {a!r} and {b!r} share no episode index")
    matrix = [[slots[e] for e in common] for slots in by_episode]
    scores_a, scores_b = matrix[: len(rows_a)], matrix[len(rows_a) :]
    comparison = compare_runs(
        scores_a,
        scores_b,
        resamples,
        seed,
        trajectories=(
            least_trajectories(db, board, rows_a, scores_a),
            least_trajectories(db, board, rows_b, scores_b),
        ),
    )
    return RunsView(
        board=name,
        a=a,
        b=b,
        steps=steps,
        agents_a=[r.agent for r in rows_a],
        agents_b=[r.agent for r in rows_b],
        episodes=common,
        scores_a=scores_a,
        scores_b=scores_b,
        comparison=comparison,
    )


def episode_slots(db: Store, row: LeaderboardRow) -> dict[int, float]:
    """The row's score on each episode index: a played episode's, a failed one's the worst its
    played episodes scored or 0, whichever is lower (compare.episode_scores' rule)."""
    level = row.stats.get("level")
    mine = [
        r for r in db.unit_results(row.batch).values() if r.agent == row.agent and r.item == level
    ]
    played = {r.episode: float(r.result["arena_score"]) for r in mine if r.status == "ok"}
    failed = min([0.0, *played.values()])
    return {r.episode: played.get(r.episode, failed) for r in mine if r.status in ("ok", "error")}


def least_trajectories(
    db: Store, board: Board, rows: list[LeaderboardRow], scores: list[list[float]]
) -> int:
    """How many distinct trajectories a side's episodes are at least: its runs' counts say so
    only run by run (two runs may play the same episode), and different scores are different
    trajectories, so the larger of its most varied run's count and its distinct scores."""
    counted = [x.trajectories or 1 for x in episodes_picture(db, board, rows).agents]
    return max(max(counted), len({v for run in scores for v in run}))
