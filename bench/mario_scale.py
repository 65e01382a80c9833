"""Mario episodes per second on the embedded cluster with 1 and 2 worker processes, and (unless
--no-in-process) in one process without the cluster, all in one run on the same machine (target:
≥ 1.8× with 2 workers).

Run from the repository root: .venv/bin/python bench/mario_scale.py [--episodes N] [--repeat R]
[--level L] [--max-steps S] [--no-in-process]. The 200-episode batch of docs/performance.md is
--episodes 100 --repeat 1 --no-in-process (2 agents × 100 episodes).
Every batch plays the same episodes (same spec, a fresh batch each time), so the rates compare,
and the script checks that every run produced the same per-episode outcomes.

Ceiling: an episode is one unit (chunk size 1), so 2 workers can at best halve the 1-worker time,
less the tail: no 2-worker run beats max(longest episode, sum of episodes / 2), which the script
prints from the 1-worker run's unit times. Both workers also share the 2 cores with Redis and this
process, so ~1.9× is about the most to expect on a 2-core machine.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from _cluster import timed_batch, warm_then_repeat  # beside this script
from rich.console import Console
from rich.table import Table

from tasks.execute import execute_batch
from tasks.store import Store
from tasks.validation import InputError
from tasks.workloads import validate_batch
from tasks.workloads.base import UnitResult, ValidatedBatch

AGENTS = ("jump-right", "random")
SEED = 3
STICKY_P = 0.25
console = Console()
if not console.is_terminal:
    console.width = max(console.width, 120)

# (agent, level, episode) -> what the episode produced (its result less the wall time).
Outcomes = dict[tuple[str, str, int], tuple[Any, ...]]


@dataclass
class Run:
    wall_s: float
    frames: int
    outcomes: Outcomes
    unit_s: list[float]  # each episode's own duration, as the unit result records it


def make_batch(episodes: int, leaderboard: str, level: str, max_steps: int) -> ValidatedBatch:
    """jump-right and random with sticky actions: 1-1 episodes of a few dozen to ~1,000 steps."""
    spec: dict[str, Any] = {
        "workload": "mario",
        "leaderboard": leaderboard,
        "agents": list(AGENTS),
        "items": [level],
        "protocol": {"episodes": episodes, "seed": SEED},
        "params": {"sticky_p": STICKY_P, "max_steps": max_steps},
    }
    return validate_batch(spec)


def outcome(result: dict[str, Any]) -> tuple[Any, ...]:
    """What an episode produced, less its wall time (the only field that may differ)."""
    return tuple(sorted((k, repr(v)) for k, v in result.items() if k != "wall_s"))


def as_run(wall: float, results: Sequence[UnitResult]) -> Run:
    bad = [r.reason for r in results if r.status != "ok"]
    if bad:
        raise RuntimeError(f"{len(bad)} episodes ended as errors; first: {bad[0]}")
    outcomes = {(r.agent, r.item, r.episode): outcome(r.result) for r in results}
    frames = sum(r.result["frames"] for r in results)
    return Run(wall, frames, outcomes, [r.duration_s for r in results])


def on_cluster(store: Store, batch: ValidatedBatch, pool: subprocess.Popen[bytes]) -> Run:
    """Seconds from submit() to `done`, with the frames and outcomes of the stored results."""
    wall, batch_id = timed_batch(store, batch, pool, timeout_s=3600)
    return as_run(wall, list(store.unit_results(batch_id).values()))


def cluster_runs(workers: int, episodes: int, repeat: int, level: str, max_steps: int) -> list[Run]:
    """`repeat` runs of the batch on a fresh embedded cluster of `workers` processes."""
    warm_up = make_batch(2, "warm-up", level, max_steps)  # imports the emulator
    batch = make_batch(episodes, "bench-mario", level, max_steps)
    return warm_then_repeat(workers, console, warm_up, batch, repeat, on_cluster)


def in_process_runs(batch: ValidatedBatch, repeat: int) -> list[Run]:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        results = execute_batch(batch)
        runs.append(as_run(time.perf_counter() - started, results))
    return runs


def same_outcomes(rows: dict[str, list[Run]]) -> str:
    """Whether every run played every episode the same way (same seeds, same results)."""
    runs = [run for runs in rows.values() for run in runs]
    reference = runs[0].outcomes
    differing = {
        key
        for run in runs[1:]
        for key in reference.keys() | run.outcomes.keys()
        if run.outcomes.get(key) != reference.get(key)
    }
    if not differing:
        return (
            "Same seeds, same results: identical per-episode outcomes (max_x, steps, frames, "
            f"actions, score…) in all {len(runs)} runs."
        )
    return (
        f"[red]Per-episode outcomes DIFFER between runs[/]: {len(differing)} episodes, e.g. "
        f"{sorted(differing)[:3]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--episodes", type=int, default=12, help="episodes per agent (2 agents; default 12)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each setting (default 3)")
    parser.add_argument("--level", default="1-1", help="the level played (default 1-1)")
    parser.add_argument(
        "--max-steps",
        type=int,
        default=4500,
        help="steps (of 4 frames) at most per episode (default 4500, the standard protocol)",
    )
    parser.add_argument(
        "--no-in-process",
        action="store_true",
        help="skip the in-process reference (it takes as long as the 1-worker cluster)",
    )
    args = parser.parse_args()
    if min(args.episodes, args.repeat, args.max_steps) < 1:
        parser.error("--episodes, --repeat and --max-steps must be at least 1")
    try:
        batch = make_batch(args.episodes, "bench-mario", args.level, args.max_steps)
    except InputError as exc:  # an unknown --level
        parser.error(str(exc))
    units = len(AGENTS) * args.episodes
    rows: dict[str, list[Run]] = {}
    started = time.perf_counter()
    if not args.no_in_process:
        execute_batch(make_batch(1, "warm-up", args.level, args.max_steps))  # emulator imports
        rows["in one process (no cluster)"] = in_process_runs(batch, args.repeat)
    spawn = multiprocessing.get_context("spawn")  # a fresh Celery app per cluster
    for workers in (1, 2):
        with spawn.Pool(1) as pool:
            name = f"cluster, {workers} worker process{'es' if workers > 1 else ''}"
            rows[name] = pool.apply(
                cluster_runs, (workers, args.episodes, args.repeat, args.level, args.max_steps)
            )
    table = Table(
        title=f"Mario: {units} episodes of {args.level} ({' and '.join(AGENTS)}, "
        f"{args.episodes} each; sticky {STICKY_P}, max_steps {args.max_steps})"
    )
    for name in ("setting", "wall s (median)", "episodes/s", "frames/s", "× 1 worker"):
        table.add_column(name, justify="left" if name == "setting" else "right")
    one_runs = rows["cluster, 1 worker process"]
    one = statistics.median(r.wall_s for r in one_runs)
    for name, runs in rows.items():
        wall = statistics.median(r.wall_s for r in runs)
        frames = runs[0].frames
        table.add_row(
            name,
            f"{wall:.2f}",
            f"{units / wall:.2f}",
            f"{frames / wall:,.0f}",
            f"{one / wall:.2f}" if name.startswith("cluster") else "—",
        )
    console.print(table)
    frames, unit_s = one_runs[0].frames, one_runs[0].unit_s
    bound = max(max(unit_s), sum(unit_s) / 2)
    console.print(
        f"Protocol: agents {', '.join(AGENTS)}, {args.episodes} episodes each (seed {SEED}), "
        f"level {args.level}, sticky actions {STICKY_P}, frame_skip 4, max_steps "
        f"{args.max_steps}: {frames:,} emulator frames in all ({frames / units:,.0f} per "
        f"episode). {args.repeat} run(s) of each setting, medians; a fresh batch of the same "
        "spec every run, workers warmed up first."
    )
    console.print(
        f"Ceiling with 2 workers (the 1-worker run's unit times): max(longest episode "
        f"{max(unit_s):.2f}s, sum {sum(unit_s):.2f}s / 2) = {bound:.2f}s, i.e. at most "
        f"{sum(unit_s) / bound:.2f}× 1 worker before dispatch and the shared cores."
    )
    console.print(same_outcomes(rows))
    console.print(f"Whole benchmark {time.perf_counter() - started:.0f}s.")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
