"""Human-readable Mario output: the per-episode calculation and the rubric's leaderboard table."""

from __future__ import annotations

from collections.abc import Sequence

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
    ranked: Sequence[RankedAgent], title: str = "MARIO ARENA LEADERBOARD"
) -> str:
    """The rubric's table: Rank, Model Name, Score, Success, Avg Steps."""
    name_width = max([len("Model Name"), *(len(r.name) for r in ranked)]) + 2
    scores = [format_score_display(r.stats.arena_score) for r in ranked]
    score_width = max([len("Score"), *(len(s) for s in scores)])
    header = (
        f"{'Rank':<6}{'Model Name':<{name_width}}{'Score':>{score_width}}   {'Success':<9}Avg Steps"
    )
    rule = "=" * len(header)
    lines = [rule, title.center(len(header)).rstrip(), rule, header, "-" * len(header)]
    for row, score in zip(ranked, scores, strict=True):
        success = f"{row.stats.success_rate:.0%}"
        lines.append(
            f"{row.rank:<6}{row.name:<{name_width}}{score:>{score_width}}   "
            f"{success:<9}{row.stats.avg_steps:.0f}"
        )
    lines.append(rule)
    return "\n".join(lines)
