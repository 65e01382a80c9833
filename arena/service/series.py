"""Series (docs/mario.md, "Series"): the checkpoints of one training run on a board, agents named
`<run>@<steps>` (`ppo-a@500k`), read as a learning curve: each checkpoint's score and success
rate, with their intervals, against its training steps. The board keeps each checkpoint as a
row; a series is read from those rows (GET /leaderboards/{name}/series/{run}, `arena mario
series`, the board page's learning curves), nothing scored again. Each checkpoint after the first
is compared with the one before it (`vs_previous`) where the episodes are read:
arena/service/compare.py, read_series."""

from __future__ import annotations

import re

from pydantic import BaseModel

from arena.service.boards import Board
from arena.service.numbers import as_number, stat
from arena.service.trends import Pair, pair
from scoring.compare import Comparison
from tasks.store import LeaderboardRow
from tasks.validation import InputError

CHECKPOINT = re.compile(r"^(?P<run>[A-Za-z0-9][A-Za-z0-9._-]{0,63})@(?P<steps>[0-9]{1,12}[kM]?)$")
UNITS = {"": 1, "k": 1_000, "M": 1_000_000}


def steps_label(steps: int) -> str:
    """Training steps written compactly: 500000 -> 500k, 1000000 -> 1M, 2048 -> 2048 (only an
    exact multiple takes a unit, so the label gives the steps back exactly)."""
    if steps < 0:
        raise ValueError(f"steps: {steps} is negative")
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if steps >= size and steps % size == 0:
            return f"{steps // size}{unit}"
    return str(steps)


def checkpoint_name(run: str, steps: int) -> str:
    """The agent a checkpoint is on a board: `<run>@<steps>`."""
    name = f"{run}@{steps_label(steps)}"
    if not CHECKPOINT.match(name) or len(name) > 64:
        raise ValueError(f"run: {run!r} does not make an agent name with {steps} steps ({name!r})")
    return name


def parse_checkpoint(name: str) -> tuple[str, int] | None:
    """(run, steps) of an agent named `<run>@<steps>`; None for any other name."""
    found = CHECKPOINT.match(name)
    if found is None:
        return None
    label = found["steps"]
    unit = label[-1] if label[-1] in "kM" else ""
    return found["run"], int(label[: len(label) - len(unit)]) * UNITS[unit]


# SB3's CheckpointCallback(save_freq, save_path, name_prefix) saves the model as
# `<name_prefix>_<num_timesteps>_steps.zip` (its replay buffer and VecNormalize files are .pkl).
SB3_CHECKPOINT = re.compile(
    r"^(?P<run>[A-Za-z0-9][A-Za-z0-9._-]{0,63})_(?P<steps>[0-9]{1,12})_steps$"
)


def checkpoint_file(stem: str) -> tuple[str, int] | None:
    """(agent, steps) of a checkpoint file's stem: `<run>@<steps>` names its agent itself;
    SB3's `<prefix>_<steps>_steps` is the agent `<prefix>@<steps>` as `save_name` would write it
    (`ppo_mario_1024_steps` -> `ppo_mario@1024`, `_2000_steps` -> `@2k`), so a run's board and
    series are the same whichever names its files have. None for any other name."""
    parsed = parse_checkpoint(stem)
    if parsed is not None:
        return stem, parsed[1]
    found = SB3_CHECKPOINT.match(stem)
    if found is None:
        return None
    run, steps = found["run"], int(found["steps"])
    name = f"{run}@{steps_label(steps)}"
    if len(name) > 64:
        raise InputError(
            f"{stem}.zip: its agent {name} is {len(name)} characters (at most 64): "
            "a shorter name_prefix"
        )
    return checkpoint_name(run, steps), steps


class SeriesPoint(BaseModel):
    """One checkpoint of the run: its row on the board."""

    agent: str
    steps: int
    batch: str  # the evaluation that wrote the row
    score: float  # the board's score (Mario: the best episode)
    success_rate: float | None = None
    success_ci95: Pair | None = None  # Wilson 95%
    iqm_score: float | None = None  # interquartile mean of the episodes' scores
    iqm_ci95: Pair | None = None  # bootstrap 95%
    mean_score: float | None = None
    # The distance view beside the composite score: the mean over episodes of how far right
    # Mario got (the rubric's max x, in pixels), which no coin or step term moves.
    avg_max_x: float | None = None
    episodes: int | None = None
    failed: int | None = None
    # distinct trajectories of its episodes (None: a row from before they were counted); under
    # two its intervals and vs_previous say nothing the one episode does not (docs/mario.md)
    trajectories: int | None = None
    # P(this checkpoint beats the previous one) as `arena compare BOARD THIS PREVIOUS` gives it
    # (arena/service/compare.py, against_previous); None for the first point, or where either
    # checkpoint's row keeps no per-episode scores.
    vs_previous: Comparison | None = None


class Series(BaseModel):
    """A run's learning curve on a board: one point per checkpoint, by training steps."""

    board: str
    run: str
    points: list[SeriesPoint]


def point_of(row: LeaderboardRow, steps: int) -> SeriesPoint:
    stats = row.stats
    episodes, failed = as_number(stat(stats, "episodes")), as_number(stat(stats, "failed"))
    return SeriesPoint(
        agent=row.agent,
        steps=steps,
        batch=row.batch,
        score=row.score,
        success_rate=as_number(stat(stats, "success_rate")),
        success_ci95=pair(stat(stats, "success_ci95")),
        iqm_score=as_number(stat(stats, "iqm_score")),
        iqm_ci95=pair(stat(stats, "iqm_ci95")),
        mean_score=as_number(stat(stats, "mean_score")),
        avg_max_x=as_number(stat(stats, "avg_max_x")),
        episodes=None if episodes is None else int(episodes),
        failed=None if failed is None else int(failed),
        trajectories=stats.get("trajectories"),
    )


def board_series(board: Board) -> list[Series]:
    """Every series of a board (a run with at least one checkpoint row), by run name."""
    runs: dict[str, list[SeriesPoint]] = {}
    for row in board.rows:
        parsed = parse_checkpoint(row.agent)
        if parsed is not None:
            runs.setdefault(parsed[0], []).append(point_of(row, parsed[1]))
    return [
        Series(board=board.name, run=run, points=sorted(points, key=lambda p: p.steps))
        for run, points in sorted(runs.items())
    ]


def series_of(board: Board, run: str) -> Series:
    """The run's series on a board already read; InputError when it has no checkpoint there."""
    for series in board_series(board):
        if series.run == run:
            return series
    raise InputError(
        f"series: no checkpoints of run {run!r} on leaderboard {board.name!r} "
        f"(agents named {run}@STEPS)"
    )
