"""Mario Arena scoring (seeds/mario-arena-scoring.md), with the readings of SEED-NOTES.

Scores are computed in floats; displays round half to even (see ``format_score_display``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, model_validator

from scoring._common import StrictModel, competition_ranks
from scoring.stats import bootstrap_interval, interquartile_mean, wilson_interval

LEVEL_COMPLETION_BONUS = 1_000_000
GAME_COMPLETION_BONUS = 10_000_000
WORLD_POINTS = 10_000
STAGE_POINTS = 1_000
PENALTY_PER_STEP = 0.1
COIN_POINTS = 100
TIME_POINTS = 10
LEVELS_IN_GAME = 32
FEWEST_TO_FINISH = 8  # through both warp zones: 1-1, 1-2, 4-1, 4-2, 8-1, 8-2, 8-3, 8-4
DEFAULT_FRAME_SKIP = 4

# Input bounds: generous for any real run, but finite, so that no input can make a score
# overflow or print as a 23-digit number (docs/scoring.md, "Input bounds").
MAX_X_POS = 65_535  # the game keeps x in two bytes (page, pixel); real levels end before 7,000
# A level's clock (at most 400 game seconds, ~9,600 frames) needs a few thousand steps; a million
# also keeps the rubric's promise that a completed level always outscores an uncompleted one.
MAX_LEVEL_STEPS = 1_000_000
MAX_GAME_STEPS = LEVELS_IN_GAME * MAX_LEVEL_STEPS  # a full game: at most 32 levels' worth
MAX_FRAME_SKIP = 60  # one decision per second of game time (60 frames) at the least
MAX_LIVES_LOST = 10_000  # lives can be won back, so more than the 255 a byte counts

World = Annotated[int, Field(ge=1, le=8)]
Stage = Annotated[int, Field(ge=1, le=4)]
XPos = Annotated[int, Field(ge=0, le=MAX_X_POS)]
# The game's own counters: coins wrap at 100, the timer shows three digits.
Coins = Annotated[int, Field(ge=0, le=99)]
Timer = Annotated[int, Field(ge=0, le=999)]
FrameSkip = Annotated[int, Field(ge=1, le=MAX_FRAME_SKIP)]


class EpisodeResult(StrictModel):
    """One episode on one level."""

    full_game: Literal[False] = False
    world: World
    stage: Stage
    completed: bool
    max_x_pos: XPos
    steps: Annotated[int, Field(ge=0, le=MAX_LEVEL_STEPS)]
    coins: Coins = 0
    time_remaining: Timer = 0
    frame_skip: FrameSkip = DEFAULT_FRAME_SKIP


def level_index(world: int, stage: int) -> int:
    """0 for 1-1 ... 31 for 8-4."""
    return (world - 1) * 4 + (stage - 1)


class FullGameResult(StrictModel):
    """A run from 1-1 to game over or the end of 8-4; world/stage/max_x_pos: the furthest level."""

    full_game: Literal[True]
    world: World
    stage: Stage
    max_x_pos: XPos
    steps: Annotated[int, Field(ge=0, le=MAX_GAME_STEPS)]
    levels_completed: Annotated[int, Field(ge=0, le=LEVELS_IN_GAME)]
    completed: bool = False
    lives_lost: Annotated[int, Field(ge=0, le=MAX_LIVES_LOST)] = 0  # tracked, not scored
    coins: Coins = 0  # tracked, not scored in the full game
    frame_skip: FrameSkip = DEFAULT_FRAME_SKIP

    @model_validator(mode="after")
    def _consistent(self) -> FullGameResult:
        reached = level_index(self.world, self.stage)
        if self.completed:
            # Warp zones skip levels: the shortest route clears 1-1, 1-2, 4-1, 4-2, 8-1..8-4.
            if (self.world, self.stage) != (8, 4) or self.levels_completed < FEWEST_TO_FINISH:
                raise ValueError(
                    "completed: a completed full game ends in 8-4 with at least "
                    f"{FEWEST_TO_FINISH} levels completed (the warp zones' route)"
                )
        elif self.levels_completed > reached:
            # Warp zones skip levels, so fewer completed levels than the index is fine; more is not.
            raise ValueError(
                f"levels_completed: {self.levels_completed} levels cannot be completed "
                f"before reaching {self.world}-{self.stage}"
            )
        return self


AnyEpisode = EpisodeResult | FullGameResult


class ScoreBreakdown(StrictModel):
    """The rubric's components; ``total`` is the arena score."""

    completion_bonus: float
    progress: float
    efficiency_penalty: float
    coin_bonus: float
    time_bonus: float
    total: float


def progress_score(world: int, stage: int, max_x_pos: int) -> float:
    return float(world * WORLD_POINTS + stage * STAGE_POINTS + max_x_pos)


def efficiency_penalty(steps: int) -> float:
    # steps / 10 rather than steps * 0.1: exact for the rubric's 41.5 (see format_score_display).
    return steps / round(1 / PENALTY_PER_STEP)


def score_breakdown(episode: AnyEpisode) -> ScoreBreakdown:
    progress = progress_score(episode.world, episode.stage, episode.max_x_pos)
    penalty = efficiency_penalty(episode.steps)
    if isinstance(episode, FullGameResult):
        # SEED-NOTES: the furthest level reached is scored, not a sum; no minor bonuses.
        bonus = float(GAME_COMPLETION_BONUS if episode.completed else 0)
        coins = time = 0.0
    else:
        bonus = float(LEVEL_COMPLETION_BONUS if episode.completed else 0)
        coins = float(episode.coins * COIN_POINTS)
        # The time bonus counts only for a completed level.
        time = float(episode.time_remaining * TIME_POINTS) if episode.completed else 0.0
    total = bonus + progress - penalty + coins + time
    return ScoreBreakdown(
        completion_bonus=bonus,
        progress=progress,
        efficiency_penalty=penalty,
        coin_bonus=coins,
        time_bonus=time,
        total=total,
    )


def compute_arena_score(episode: AnyEpisode) -> float:
    return score_breakdown(episode).total


def compute_full_game_score(run: FullGameResult) -> float:
    return score_breakdown(run).total


def format_score_display(score: float) -> str:
    """Integer with thousands separators, rounded half to even.

    Half-to-even is the one common rule that reproduces all three rubric examples:
    1,018,181.8 -> 1,018,182; 13,066.8 -> 13,067; 1,039,026.5 -> 1,039,026.
    """
    return f"{round(score):,}"


class AggregateStats(StrictModel):
    episodes: int  # played and failed
    arena_score: float  # best episode
    best_episode: int  # index of the best episode in the input (-1: none was played)
    success_rate: float
    success_ci95: tuple[float, float]  # Wilson
    mean_score: float
    std_score: float  # population standard deviation
    iqm_score: float
    iqm_ci95: tuple[float, float]  # percentile bootstrap
    avg_steps: float  # over the episodes played
    avg_max_x: float  # over the episodes played
    frame_skip: int
    failed: int = 0  # episodes that ended in an error (the agent raised, hung, cheated)


def aggregate_scores(
    episodes: Sequence[AnyEpisode],
    bootstrap_seed: int = 0,
    failed: int = 0,
    frame_skip: int | None = None,
) -> AggregateStats:
    """Best-of-N plus the rubric's side statistics and interval estimates.

    `failed` episodes (errors) count too: not completed, and scored as the worst the agent
    played or 0, whichever is lower — a fault never scores better than play."""
    if not episodes and not failed:
        raise ValueError("episodes: at least one episode is needed")
    frame_skips = sorted({e.frame_skip for e in episodes} | ({frame_skip} if frame_skip else set()))
    if len(frame_skips) > 1:
        raise ValueError(f"frame_skip: episodes mix frame skips {frame_skips}; protocols differ")
    played = [compute_arena_score(e) for e in episodes]
    scores = played + [min([0.0, *played])] * failed
    best = max(range(len(played)), key=played.__getitem__) if played else -1
    successes = sum(e.completed for e in episodes)
    return AggregateStats(
        episodes=len(scores),
        arena_score=max(scores),
        best_episode=best,
        success_rate=successes / len(scores),
        success_ci95=wilson_interval(successes, len(scores)),
        mean_score=statistics.fmean(scores),
        std_score=statistics.pstdev(scores),
        iqm_score=interquartile_mean(scores),
        iqm_ci95=bootstrap_interval(scores, seed=bootstrap_seed),
        avg_steps=statistics.fmean(e.steps for e in episodes) if episodes else 0.0,
        avg_max_x=statistics.fmean(e.max_x_pos for e in episodes) if episodes else 0.0,
        frame_skip=frame_skips[0] if frame_skips else DEFAULT_FRAME_SKIP,
        failed=failed,
    )


class RankedAgent(StrictModel):
    rank: int
    name: str
    stats: AggregateStats


def rank_key(stats: AggregateStats) -> tuple[float, float, float, float]:
    """Best score, then the rubric's tiebreakers: success rate, average score, fewer steps."""
    return (-stats.arena_score, -stats.success_rate, -stats.mean_score, stats.avg_steps)


def rank(agents: dict[str, AggregateStats]) -> list[RankedAgent]:
    """Competition ranking (1, 1, 3): agents equal on every tiebreaker share a rank."""
    ordered = sorted(agents.items(), key=lambda item: (rank_key(item[1]), item[0]))
    ranks = competition_ranks([rank_key(stats) for _, stats in ordered])
    return [
        RankedAgent(rank=r, name=name, stats=stats)
        for r, (name, stats) in zip(ranks, ordered, strict=True)
    ]
