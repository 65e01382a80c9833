"""Mario episodes per second on the embedded cluster with 1 and 2 worker processes, and in one
process without the cluster, all in one run on the same machine (target: ≥ 1.8× with 2).

Run from the repository root: .venv/bin/python bench/mario_scale.py [--episodes N] [--repeat R]
Every batch plays the same episodes (same spec, a fresh batch each time), so the rates compare.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import subprocess
import time
from typing import Any

from _cluster import bench_cluster, timed_batch  # beside this script
from rich.console import Console
from rich.table import Table

from tasks.execute import execute_batch
from tasks.store import Store
from tasks.workloads import validate_batch
from tasks.workloads.base import ValidatedBatch

console = Console()
if not console.is_terminal:
    console.width = max(console.width, 120)


def make_batch(episodes: int, leaderboard: str) -> ValidatedBatch:
    """jump-right and random on 1-1 with sticky actions: episodes of a few hundred steps."""
    spec: dict[str, Any] = {
        "workload": "mario",
        "leaderboard": leaderboard,
        "agents": ["jump-right", "random"],
        "items": ["1-1"],
        "protocol": {"episodes": episodes, "seed": 3},
        "params": {"sticky_p": 0.25, "max_steps": 4500},
    }
    return validate_batch(spec)


def on_cluster(
    store: Store, batch: ValidatedBatch, pool: subprocess.Popen[bytes]
) -> tuple[float, int]:
    """Seconds from submit() to `done`, and the emulator frames the batch played."""
    wall, batch_id = timed_batch(store, batch, pool)
    frames = sum(r.result["frames"] for r in store.unit_results(batch_id).values())
    return wall, frames


def cluster_runs(workers: int, episodes: int, repeat: int) -> list[tuple[float, int]]:
    """`repeat` runs of the batch on a fresh embedded cluster of `workers` processes."""
    with bench_cluster(workers, console) as (store, pool):
        on_cluster(store, make_batch(2, "warm-up"), pool)  # every child imports the emulator
        return [on_cluster(store, make_batch(episodes, "bench-mario"), pool) for _ in range(repeat)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--episodes", type=int, default=12, help="episodes per agent (2 agents)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each setting")
    args = parser.parse_args()
    if args.episodes < 1 or args.repeat < 1:
        parser.error("--episodes and --repeat must be at least 1")
    batch = make_batch(args.episodes, "bench-mario")
    units = 2 * args.episodes
    rows: dict[str, list[tuple[float, int]]] = {}
    started = time.perf_counter()
    execute_batch(batch)  # warms the emulator's imports in this process
    rows["in one process (no cluster)"] = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        results = execute_batch(batch)
        rows["in one process (no cluster)"].append(
            (time.perf_counter() - t0, sum(r.result["frames"] for r in results))
        )
    spawn = multiprocessing.get_context("spawn")  # a fresh Celery app per cluster
    for workers in (1, 2):
        with spawn.Pool(1) as pool:
            name = f"cluster, {workers} worker process{'es' if workers > 1 else ''}"
            rows[name] = pool.apply(cluster_runs, (workers, args.episodes, args.repeat))
    table = Table(title=f"Mario: {units} episodes of 1-1 (jump-right, random; sticky 0.25)")
    for name in ("setting", "wall s (median)", "episodes/s", "frames/s", "× 1 worker"):
        table.add_column(name, justify="left" if name == "setting" else "right")
    one = statistics.median(w for w, _ in rows["cluster, 1 worker process"])
    for name, runs in rows.items():
        wall = statistics.median(w for w, _ in runs)
        frames = runs[0][1]
        table.add_row(name, f"{wall:.2f}", f"{units / wall:.2f}", f"{frames / wall:,.0f}",
                      f"{one / wall:.2f}" if name.startswith("cluster") else "—")  # fmt: skip
    console.print(table)
    console.print(
        f"{args.repeat} runs each, medians; whole benchmark {time.perf_counter() - started:.0f}s."
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
