"""Human-readable Mario output: the per-episode calculation and the rubric's leaderboard table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scoring.compare import trajectories_word
from scoring.mario import (
    AggregateStats,
    AnyEpisode,
    FullGameResult,
    RankedAgent,
    format_score_display,
    score_breakdown,
)


def _num(value: float) -> str:
    """Components print like the rubric: integers plain, fractional penalties with one decimal."""
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def format_episode_breakdown(episode: AnyEpisode) -> str:
    parts = score_breakdown(episode)
    level = f"{episode.world}-{episode.stage}"
    if isinstance(episode, FullGameResult):
        head = [
            "Full game",
            f"Furthest level: {level} (max x {episode.max_x_pos:,})",
            f"Levels completed: {episode.levels_completed}",
            f"Game completed: {'Yes' if episode.completed else 'No'}",
            f"Total steps: {episode.steps:,}",
            f"Lives lost: {episode.lives_lost} (tracked, not scored)",
        ]
        calc = [
            f"- Completion bonus: {_num(parts.completion_bonus)}",
            f"- Progress (furthest level): {_num(parts.progress)}",
            f"- Efficiency penalty: {episode.steps:,} × 0.1 = {_num(parts.efficiency_penalty)}",
        ]
    else:
        head = [
            f"Level: {level}",
            f"Completed: {'Yes' if episode.completed else 'No'}",
            f"Max x-position: {episode.max_x_pos:,}",
            f"Steps: {episode.steps:,} (frame skip {episode.frame_skip})",
            f"Coins: {episode.coins}",
            f"Time remaining: {episode.time_remaining} seconds",
        ]
        calc = [
            f"- Completion bonus: {_num(parts.completion_bonus)}",
            f"- Progress: ({episode.world} × 10,000) + ({episode.stage} × 1,000) + "
            f"{episode.max_x_pos:,} = {_num(parts.progress)}",
            f"- Efficiency penalty: {episode.steps:,} × 0.1 = {_num(parts.efficiency_penalty)}",
            f"- Coin bonus: {episode.coins} × 100 = {_num(parts.coin_bonus)}",
            f"- Time bonus: {_num(parts.time_bonus)}"
            + ("" if episode.completed else " (counts only for a completed level)"),
        ]
    return "\n".join(
        [*head, "", "Calculation:", *calc, "", f"Arena Score: {format_score_display(parts.total)}"]
    )


def format_aggregate(stats: AggregateStats) -> str:
    low, high = stats.success_ci95
    iqm_low, iqm_high = stats.iqm_ci95
    return "\n".join(
        [
            f"Episodes: {stats.episodes} (frame skip {stats.frame_skip})",
            f"Arena Score: {format_score_display(stats.arena_score)} "
            f"(best episode, #{stats.best_episode + 1})",
            f"Success Rate: {stats.success_rate:.0%} (95% CI {low:.0%}-{high:.0%}, Wilson)",
            f"Average score: {format_score_display(stats.mean_score)} "
            f"(std {format_score_display(stats.std_score)})",
            f"Interquartile mean: {format_score_display(stats.iqm_score)} "
            f"(95% CI {format_score_display(iqm_low)} to {format_score_display(iqm_high)},"
            " bootstrap)",
            f"Average steps: {stats.avg_steps:,.1f}",
            f"Average max x: {stats.avg_max_x:,.1f}",
        ]
    )


def format_leaderboard(
    ranked: Sequence[RankedAgent],
    title: str = "MARIO ARENA LEADERBOARD",
    intervals: bool = False,
    trajectories: Mapping[str, int | None] | None = None,
) -> str:
    """The rubric's table: Rank, Model Name, Score, Success, Avg Steps; with `intervals`, the
    success rate's Wilson interval and the interquartile mean with its bootstrap interval beside
    it (and errors, when an agent had any). An agent whose episodes are fewer than two distinct
    `trajectories` shows no interval: its episodes are one outcome repeated."""
    name_width = max([len("Model Name"), *(len(r.name) for r in ranked)]) + 2
    scores = [format_score_display(r.stats.arena_score) for r in ranked]
    score_width = max([len("Score"), *(len(s) for s in scores)])
    counts = trajectories or {}
    cells = [_interval_cells(r.stats, counts.get(r.name)) for r in ranked]
    shown = [i for i in range(3) if i < 2 or any(c[2] for c in cells)]  # errors: only if any
    headers = [EXTRA_HEADERS[i] for i in shown]
    extra = [[c[i] for i in shown] for c in cells]
    widths = [max([len(h), *(len(e[i]) for e in extra)]) for i, h in enumerate(headers)]
    header = (
        f"{'Rank':<6}{'Model Name':<{name_width}}{'Score':>{score_width}}   {'Success':<9}Avg Steps"
    )
    if intervals:
        header += "".join(f"   {h:<{w}}" for h, w in zip(headers, widths, strict=True))
    header = header.rstrip()
    rows = []
    for row, score, row_cells in zip(ranked, scores, extra, strict=True):
        success = f"{row.stats.success_rate:.0%}"
        line = (
            f"{row.rank:<6}{row.name:<{name_width}}{score:>{score_width}}   "
            f"{success:<9}{row.stats.avg_steps:<9.0f}"
        )
        if intervals:
            line += "".join(f"   {c:<{w}}" for c, w in zip(row_cells, widths, strict=True))
        rows.append(line.rstrip())
    width = max([len(header), *(len(r) for r in rows)])
    rule = "=" * width
    lines = [rule, title.center(width).rstrip(), rule, header, "-" * width, *rows, rule]
    return "\n".join(lines)


EXTRA_HEADERS = ("Success 95% CI", "IQM [95% CI]", "Errors")


def _interval_cells(stats: AggregateStats, trajectories: int | None) -> tuple[str, str, str]:
    errors = str(stats.failed) if stats.failed else ""
    if trajectories is not None and trajectories < 2:
        return trajectories_word(trajectories), format_score_display(stats.iqm_score), errors
    low, high = stats.success_ci95
    iqm_low, iqm_high = stats.iqm_ci95
    iqm = (
        f"{format_score_display(stats.iqm_score)} [{format_score_display(iqm_low)}, "
        f"{format_score_display(iqm_high)}]"
    )
    return f"{low:.0%}-{high:.0%}", iqm, errors
