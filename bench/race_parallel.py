"""A race of 4 agents on a small Python project (pytest, ruff): its 5 checks (the baseline and
one per branch) one after the other in one process, and on the embedded cluster with 1 and 2
worker processes, all in one run on the same machine (docs/performance.md, "Race").

Run from the repository root: .venv/bin/python bench/race_parallel.py [--repeat R]
The sample repository is the tests' (tests/race/projects.py), built in a temporary folder.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _cluster import bench_cluster, timed_batch  # beside this script
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.race.projects
from tasks.execute import execute_batch
from tasks.store import Store
from tasks.workloads import validate_batch
from tasks.workloads.base import ValidatedBatch
from tests.race.projects import RaceRepo, agent_spec_entries, make_python_repo

console = Console()
if not console.is_terminal:
    console.width = max(console.width, 120)
BRANCHES = ["clean", "adds-tests", "breaks-test", "lint-errors"]


def make_batch(repo: RaceRepo) -> ValidatedBatch:
    spec: dict[str, Any] = {
        "workload": "race", "task": "bench", "repo": str(repo.path),
        "agents": agent_spec_entries(repo, BRANCHES),
    }  # fmt: skip
    return validate_batch(spec)


def on_cluster(store: Store, batch: ValidatedBatch, pool: subprocess.Popen[bytes]) -> float:
    wall, batch_id = timed_batch(store, batch, pool)
    info = store.batch(batch_id)
    if info is None or info.errors:
        raise RuntimeError(f"race {batch_id} ended with errors")
    return wall


def cluster_runs(workers: int, repo: RaceRepo, repeat: int) -> list[float]:
    with bench_cluster(workers, console) as (store, pool):
        batch = make_batch(repo)
        on_cluster(store, batch, pool)  # warm-up: every worker process imports the race code
        return [on_cluster(store, batch, pool) for _ in range(repeat)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each setting")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="arena-bench-race-") as tmp:
        repo = make_python_repo(Path(tmp) / "repo")
        batch = make_batch(repo)
        execute_batch(batch)  # warm-up
        rows: dict[str, list[float]] = {"one after the other (one process)": []}
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            results = execute_batch(batch)
            rows["one after the other (one process)"].append(time.perf_counter() - t0)
            if any(r.status != "ok" for r in results):
                raise RuntimeError([r.reason for r in results if r.status != "ok"])
        spawn = multiprocessing.get_context("spawn")  # a fresh Celery app per cluster
        for workers in (1, 2):
            with spawn.Pool(1) as pool:
                name = f"cluster, {workers} worker process{'es' if workers > 1 else ''}"
                rows[name] = pool.apply(cluster_runs, (workers, repo, args.repeat))
    table = Table(title=f"Race: {len(BRANCHES)} agents + baseline = 5 checks (build, pytest, ruff)")
    for name in ("setting", "wall s (median)", "checks/s", "× one after the other"):
        table.add_column(name, justify="left" if name == "setting" else "right")
    serial = statistics.median(rows["one after the other (one process)"])
    for name, runs in rows.items():
        wall = statistics.median(runs)
        table.add_row(name, f"{wall:.2f}", f"{5 / wall:.2f}", f"{serial / wall:.2f}")
    console.print(table)
    console.print(
        f"{args.repeat} runs each, medians; whole benchmark {time.perf_counter() - started:.0f}s."
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
