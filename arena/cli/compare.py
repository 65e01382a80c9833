"""`arena compare BOARD A B`: the probability that A beats B on a board, with its bootstrap
interval, and whether the board's episodes tell the two apart (docs/mario.md, "Comparing two
agents")."""

from __future__ import annotations

import click

from arena.cli.terminal import print_json
from arena.service.cluster import open_store
from arena.service.compare import BoardComparison, compare_agents
from scoring.compare import RESAMPLES, trajectories_word
from tasks.settings import load_settings


@click.command("compare")
@click.argument("board")
@click.argument("a")
@click.argument("b")
@click.option(
    "--resamples",
    type=click.IntRange(100, 100_000),
    default=RESAMPLES,
    show_default=True,
    help="Bootstrap resamples.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The bootstrap's seed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
def compare_command(board: str, a: str, b: str, resamples: int, seed: int, as_json: bool) -> None:
    """The probability that agent A beats agent B on BOARD (an episode of A scores above one of
    B, ties half), its 95% interval, and whether the episodes are enough to tell them apart."""
    with open_store(load_settings()) as db:
        found = compare_agents(db, board, a, b, resamples, seed)
    if as_json:
        print_json(found.model_dump(mode="json"))
    else:
        click.echo("\n".join(comparison_lines(found)))


def comparison_lines(found: BoardComparison) -> list[str]:
    c, a, b = found.comparison, found.a, found.b
    low, high = c.ci95
    if c.trajectories_a is None or c.trajectories_b is None:
        sides = f"{a} ({c.episodes_a} episodes) vs {b} ({c.episodes_b})"
    else:
        sides = (
            f"{a} ({c.episodes_a} episodes, {trajectories_word(c.trajectories_a)}) vs "
            f"{b} ({c.episodes_b}, {trajectories_word(c.trajectories_b)})"
        )
    lines = [f"leaderboard {found.board}: {sides}"]
    if not c.conclusive:
        return [*lines, f"P({a} beats {b}) = {c.probability:.3f}", *inconclusive(found)]
    lines.append(
        f"P({a} beats {b}) = {c.probability:.3f}, 95% interval [{low:.3f}, {high:.3f}] "
        f"(stratified bootstrap, {c.resamples:,} resamples, seed {c.seed})"
    )
    if c.better is not None:
        winner = a if c.better == "a" else b
        lines.append(f"{winner} is better: the interval excludes 0.5")
        return lines
    verdict = (
        f"not separated: {c.episodes_a} and {c.episodes_b} episodes are too few to tell them apart"
    )
    if c.episodes_needed is not None:
        verdict += (
            f" (roughly {c.episodes_needed:,} episodes each would, were the probability to "
            f"stay at {c.probability:.3f})"
        )
    lines.append(verdict)
    return lines


def inconclusive(found: BoardComparison) -> list[str]:
    """Why a pair with a side under two distinct trajectories has no interval nor verdict."""
    c = found.comparison
    few = [
        f"{agent}'s {episodes} episodes are {trajectories_word(count or 0)}"
        for agent, episodes, count in (
            (found.a, c.episodes_a, c.trajectories_a),
            (found.b, c.episodes_b, c.trajectories_b),
        )
        if (count or 0) < 2
    ]
    return [
        f"no conclusion: {' and '.join(few)}: one outcome repeated, which more episodes of the "
        "same protocol would only repeat (a deterministic agent under sticky_p 0); evaluate "
        "under sticky actions (params.sticky_p, 0.25 by default) for episodes that differ"
    ]
