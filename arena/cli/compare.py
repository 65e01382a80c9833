"""`arena compare BOARD A B`: the probability that A beats B on a board, with its bootstrap
interval, and whether the board's episodes tell the two apart (docs/mario.md, "Comparing two
agents")."""

from __future__ import annotations

import click

from arena.cli.terminal import print_json
from arena.service.cluster import open_store
from arena.service.compare import BoardComparison, compare_agents
from arena.service.runs import RunsView, compare_algorithms
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
@click.option(
    "--runs",
    is_flag=True,
    help="A and B are algorithms: their runs (agents A-seed<k>[@<steps>]) compared by rliable.",
)
@click.option(
    "--steps",
    type=click.IntRange(0),
    default=None,
    help="With --runs: each run's checkpoint at these steps (default: each run's latest).",
)
def compare_command(
    board: str,
    a: str,
    b: str,
    resamples: int,
    seed: int,
    as_json: bool,
    runs: bool,
    steps: int | None,
) -> None:
    """The probability that agent A beats agent B on BOARD (an episode of A scores above one of
    B, ties half), its 95% interval, and whether the episodes are enough to tell them apart;
    with --runs, algorithm A's runs against B's (docs/mario.md, "Seeds and runs")."""
    if steps is not None and not runs:
        raise click.UsageError("--steps: only with --runs")
    with open_store(load_settings()) as db:
        found = (
            compare_algorithms(db, board, a, b, steps, resamples, seed)
            if runs
            else compare_agents(db, board, a, b, resamples, seed)
        )
    if as_json:
        print_json(found.model_dump(mode="json"))
    elif isinstance(found, RunsView):
        click.echo("\n".join(runs_lines(found)))
    else:
        click.echo("\n".join(comparison_lines(found)))


def runs_lines(found: RunsView) -> list[str]:
    c, a, b = found.comparison, found.a, found.b
    at = "latest checkpoints" if found.steps is None else f"checkpoints at {found.steps} steps"
    lines = [
        f"leaderboard {found.board}: {a} ({c.runs_a} runs) vs {b} ({c.runs_b} runs), "
        f"{c.strata} episodes each, {at}",
    ]
    for name, iqm, (low, high), count in (
        (a, c.iqm_a, c.iqm_ci95_a, c.trajectories_a),
        (b, c.iqm_b, c.iqm_ci95_b, c.trajectories_b),
    ):
        span = f", 95% interval [{low:.1f}, {high:.1f}]" if c.conclusive else ""
        lines.append(f"IQM {name} = {iqm:.1f}{span} (at least {trajectories_word(count or 0)})")
    if not c.conclusive:
        return [
            *lines,
            f"P({a} > {b}) = {c.probability:.3f}",
            "no conclusion: a side under 2 distinct trajectories shows one outcome repeated; "
            "evaluate under sticky actions (params.sticky_p, 0.25 by default)",
        ]
    low, high = c.ci95
    lines.append(
        f"P({a} > {b}) = {c.probability:.3f}, 95% interval [{low:.3f}, {high:.3f}] "
        f"(stratified bootstrap over runs, {c.resamples:,} resamples, seed {c.seed})"
    )
    if c.better is None:
        lines.append(f"not separated: {c.runs_a} and {c.runs_b} runs do not tell them apart")
    else:
        lines.append(f"{a if c.better == 'a' else b} is better: the interval excludes 0.5")
    return lines


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
