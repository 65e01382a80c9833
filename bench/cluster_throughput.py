"""Dispatch cost of the cluster: N trivial bandit units in one process vs through Celery + Redis,
against a bare Celery app (no Arena code: a trivial task, one stored result per task) on the same
Redis (embedded, unix socket, append-only file fsynced on every write) as the ceiling.

Run from the repository root: .venv/bin/python bench/cluster_throughput.py [--units N]
[--workers W] [--repeat R]. Every figure in one run is measured side by side on the same machine;
Arena's and bare Celery's runs alternate.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from statistics import median
from typing import Any

import psutil
from _cluster import bare_cluster, bare_run, bench_cluster  # beside this script
from rich.console import Console
from rich.table import Table

from tasks.execute import execute_unit
from tasks.store import FINISHED, Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import ValidatedBatch

AGENTS = ["random", "greedy", "epsilon-greedy", "ucb1", "thompson"]
POLL_S = 0.02
console = Console()
if not console.is_terminal:  # piped into a file: no wrapped table
    console.width = max(console.width, 120)


@dataclass
class Row:
    mode: str
    units: int
    wall_s: float
    submit_s: float | None = None  # until submit() returned (chord built and published)
    reduce_s: float | None = None  # from the last unit result stored until status `done`
    cpu_ms: float | None = None  # CPU ms per unit of every process: submitter, workers, Redis
    kind: str = "arena"  # "in-process", "arena" (the cluster) or "bare" (bare Celery)

    def dispatch_ms(self, baseline: float, workers: int) -> float | None:
        """Worker-process ms per unit spent on anything but the unit, the reducer left out
        (bare Celery's unit does nothing and has no reducer: all of its time is dispatch)."""
        if self.kind == "in-process":
            return None
        busy = self.wall_s - (self.reduce_s or 0.0)
        return (busy * workers - (baseline if self.kind == "arena" else 0.0)) / self.units * 1000


def make_batch(units: int, seed: int, unit_time_limit_s: float | None = None) -> ValidatedBatch:
    """5 built-in agents × 1 item × ceil(units / 5) episodes of one pull each."""
    protocol: dict[str, Any] = {"episodes": math.ceil(units / len(AGENTS)), "seed": seed}
    if unit_time_limit_s is not None:  # chunks above 11 units need less than the default 600 s
        protocol["unit_time_limit_s"] = unit_time_limit_s
    spec: dict[str, Any] = {
        "workload": "bandit",
        "agents": AGENTS,
        "items": [{"name": "coin", "arms": [0.4, 0.6]}],
        "protocol": protocol,
        "params": {"pulls": 1},
    }
    return validate_batch(spec)


def in_process(units: int) -> Row:
    batch = make_batch(units, seed=0)
    workload = get_workload("bandit")
    expanded = workload.expand(batch)
    started = time.perf_counter()
    for unit in expanded:
        result = execute_unit(workload, unit).result
        assert result.status == "ok", result.reason
    return Row("in-process", len(expanded), time.perf_counter() - started, kind="in-process")


def cpu_meter(pool: subprocess.Popen[bytes]) -> Callable[[], float]:
    """CPU seconds used so far by this process, the worker pool (main process and children)
    and the embedded Redis: the machine is shared, so CPU time is steadier than wall time."""
    me = psutil.Process()
    redis_server = [p for p in me.children(recursive=True) if "redis-server" in p.name()]

    def used() -> float:
        pool_main = psutil.Process(pool.pid)
        total = 0.0
        for process in [me, *redis_server, pool_main, *pool_main.children(recursive=True)]:
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:
                continue  # a worker child that ended counts no more (children's times below)
            total += times.user + times.system + times.children_user + times.children_system
        return total

    return used


def through_cluster(
    store: Store,
    batch: ValidatedBatch,
    chunk_size: int,
    pool: subprocess.Popen[bytes],
    timeout_s: float = 600.0,
) -> Row:
    """Time from submit() until the batch is `done` (chunking happens here, at submit time)."""
    from tasks.submit import submit

    workload_cls = type(get_workload("bandit"))
    original = workload_cls.chunk_size
    workload_cls.chunk_size = chunk_size
    cpu = cpu_meter(pool)
    cpu_before = cpu()
    try:
        started = time.perf_counter()
        sub = submit(store, batch)
        submitted = time.perf_counter()
    finally:
        workload_cls.chunk_size = original
    assert sub.state == "enqueued", sub
    last_unit: float | None = None
    while True:
        done, status = store.progress(sub.batch_id)
        now = time.perf_counter()
        if last_unit is None and done >= sub.total:
            last_unit = now
        if status in FINISHED:
            break
        if pool.poll() is not None or now - started > timeout_s:
            raise RuntimeError(f"batch {sub.batch_id} stuck at {done}/{sub.total} ({status})")
        time.sleep(POLL_S)
    if status != "done":
        raise RuntimeError(f"batch {sub.batch_id} ended {status}: {store.batch(sub.batch_id)}")
    return Row(
        f"cluster chunk {chunk_size}",
        sub.total,
        now - started,
        submitted - started,
        now - (last_unit or now),
        (cpu() - cpu_before) / sub.total * 1000,
    )


def through_bare(client: Any, pool: subprocess.Popen[bytes], units: int, chunk: int) -> Row:
    """The same number of units through bare Celery in chunks of `chunk` (1: a task each)."""
    cpu = cpu_meter(pool)
    cpu_before = cpu()
    wall = bare_run(client, units, chunk, pool)
    cpu_ms = (cpu() - cpu_before) / units * 1000
    return Row(f"bare Celery chunk {chunk}", units, wall, cpu_ms=cpu_ms, kind="bare")


def check_board(store: Store, batch: ValidatedBatch) -> str:
    """Every agent's row on the batch's board counts exactly its episodes, none in error."""
    episodes = batch.spec.protocol.episodes
    rows = store.leaderboard(batch.leaderboard_name())
    counts = {row.agent: (row.stats["episodes"], row.stats["errors"]) for row in rows}
    wanted = {agent: (episodes, 0) for agent in AGENTS}
    if counts != wanted:
        raise RuntimeError(f"board counts {counts}, expected {wanted}")
    return f"{len(rows)} agents × {episodes} episodes, 0 errors"


def table(rows: list[Row], baseline: float, workers: int) -> Table:
    out = Table(title=f"{rows[0].units} trivial bandit units, {workers} worker processes")
    for name in (
        "mode",
        "units",
        "wall s",
        "units/s",
        "× in-process",
        "overhead ms/unit",
        "dispatch ms/unit",
        "CPU ms/unit",
        "submit s",
        "reduce s",
    ):
        out.add_column(name, justify="left" if name == "mode" else "right")
    for r in rows:
        arena = r.kind == "arena"
        overhead = (r.wall_s * workers - baseline) / r.units * 1000 if arena else None
        dispatch = r.dispatch_ms(baseline, workers)
        out.add_row(
            r.mode,
            str(r.units),
            f"{r.wall_s:.3f}",
            f"{r.units / r.wall_s:,.0f}",
            f"{baseline / r.wall_s:.4f}",
            f"{overhead:.2f}" if overhead is not None else "—",
            f"{dispatch:.2f}" if dispatch is not None else "—",
            f"{r.cpu_ms:.2f}" if r.cpu_ms is not None else "—",
            f"{r.submit_s:.3f}" if r.submit_s is not None else "—",
            f"{r.reduce_s:.3f}" if r.reduce_s is not None else "—",
        )
    return out


def ratio_table(rows: list[Row], baseline: float, workers: int) -> Table:
    """Arena's dispatch ms/unit over bare Celery's, per chunk size (and fsync policy): the
    ratio of the medians, and each round's own ratio (the runs of a round are side by side)."""
    out = Table(title="Arena's dispatch against bare Celery's (same Redis, same chunk size)")
    for name in ("chunk", "Arena ms/unit", "bare Celery ms/unit", "Arena / bare", "rounds"):
        out.add_column(name, justify="left" if name == "chunk" else "right")
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        dispatch = r.dispatch_ms(baseline, workers)
        if dispatch is not None:
            arena, bare = pairs.setdefault(r.mode.split("chunk ", 1)[1], ([], []))
            (arena if r.kind == "arena" else bare).append(dispatch)
    for chunk, (arena, bare) in pairs.items():
        rounds = ", ".join(f"{a / b:.2f}" for a, b in zip(arena, bare, strict=True))
        ratio = median(arena) / median(bare)
        out.add_row(chunk, f"{median(arena):.3f}", f"{median(bare):.3f}", f"{ratio:.2f}×", rounds)
    return out


def scale_table(runs: dict[int, list[tuple[Row, float]]]) -> Table:
    """One row per size: medians over its runs (sizes alternate, so load hits them alike)."""
    out = Table(title="How batch time grows with the number of units (workload's chunk size)")
    for name in (
        "units",
        "runs",
        "wall s (median)",
        "all runs",
        "units/s",
        "× time",
        "× units",
        "CPU ms/unit",
        "validate s",
        "submit s",
        "reduce s",
        "reduce share",
    ):
        out.add_column(name, justify="right")
    first = median(r.wall_s for r, _ in next(iter(runs.values())))
    smallest = min(runs)
    for units, rows in runs.items():
        wall = median(r.wall_s for r, _ in rows)
        reduce_s = median(r.reduce_s or 0 for r, _ in rows)
        out.add_row(
            f"{units:,}",
            str(len(rows)),
            f"{wall:.2f}",
            " ".join(f"{r.wall_s:.1f}" for r, _ in rows),
            f"{units / wall:,.0f}",
            f"{wall / first:.2f}",
            f"{units / smallest:g}",
            f"{median(r.cpu_ms or 0 for r, _ in rows):.2f}",
            f"{median(v for _, v in rows):.2f}",
            f"{median(r.submit_s or 0 for r, _ in rows):.2f}",
            f"{reduce_s:.2f}",
            f"{reduce_s / wall:.0%}",
        )
    return out


def run_scale(
    store: Store, pool: subprocess.Popen[bytes], sizes: list[int], repeat: int, seeds: Iterator[int]
) -> None:
    chunk = get_workload("bandit").chunk_size
    runs: dict[int, list[tuple[Row, float]]] = {units: [] for units in sizes}
    for _ in range(repeat):
        for units in sizes:
            started = time.perf_counter()
            batch = make_batch(units, next(seeds))  # the spec validated, agents fingerprinted
            validate_s = time.perf_counter() - started
            row = through_cluster(store, batch, chunk, pool, timeout_s=1800)
            runs[units].append((row, validate_s))
            board = check_board(store, batch)
            console.print(f"{units:,} units: {row.wall_s:.2f}s; board: {board}")
    console.print(scale_table(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--units", type=int, default=2000, help="units per run (default 2000)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each mode (default 1)")
    parser.add_argument(
        "--fsync",
        default="always",
        metavar="POLICY,...",
        help="Redis appendfsync policies to "
        "run side by side (default always, what Arena runs; e.g. always,everysec)",
    )
    parser.add_argument(
        "--scale",
        metavar="N,N,...",
        help="instead: one chunked batch of each size, e.g. "
        "1000,10000, and how its time grows; each board's counts are checked",
    )
    args = parser.parse_args()
    if args.units < 1 or args.workers < 1 or args.repeat < 1:
        parser.error("--units, --workers and --repeat must be at least 1")
    try:
        sizes = [int(n) for n in args.scale.split(",")] if args.scale else []
    except ValueError:
        parser.error("--scale takes sizes separated by commas, e.g. 1000,10000")
    policies = args.fsync.split(",")
    if not set(policies) <= {"always", "everysec", "no"}:
        parser.error("--fsync: policies are always, everysec and no")
    if any(n < len(AGENTS) for n in sizes):
        parser.error(f"--scale: every size must be at least {len(AGENTS)} (one episode each)")

    rows = [] if sizes else [in_process(args.units) for _ in range(args.repeat)]
    seeds = iter(range(1, 1_000_000))
    with bench_cluster(args.workers, console) as (store, pool):
        # Warm-up: waits for the workers to consume, and makes every child import the workload.
        warm = through_cluster(store, make_batch(20 * args.workers, next(seeds)), 1, pool, 120)
        console.print(f"workers ready; warm-up batch took {warm.wall_s:.2f}s")
        if sizes:
            run_scale(store, pool, sizes, args.repeat, seeds)
            return
        with bare_cluster(store, args.workers) as (client, bare_pool):
            for _ in range(args.repeat):
                for policy in policies:
                    store.r.config_set("appendfsync", policy)
                    rows += side_by_side(store, pool, (client, bare_pool), args.units, seeds)
                    if policies != ["always"]:
                        for row in rows[-4:]:
                            row.mode += f", fsync {policy}"
                store.r.config_set("appendfsync", "always")
    explain(rows, args.workers)


def side_by_side(
    store: Store,
    pool: subprocess.Popen[bytes],
    bare: tuple[Any, subprocess.Popen[bytes]],
    units: int,
    seeds: Iterator[int],
) -> list[Row]:
    """Arena and bare Celery, alternated: the workload's chunk size, then a unit per task."""
    rows = []
    for size in (get_workload("bandit").chunk_size, 1):
        rows.append(through_cluster(store, make_batch(units, next(seeds)), size, pool))
        rows.append(through_bare(*bare, units, size))
    return rows


def explain(rows: list[Row], workers: int) -> None:
    baseline = min(r.wall_s for r in rows if r.kind == "in-process")
    console.print(table(rows, baseline, workers))
    console.print(
        f"in-process baseline for the ratios and overhead: the fastest in-process run, "
        f"{baseline:.3f}s.\noverhead ms/unit = (cluster wall s × {workers} worker processes"
        " − in-process s) / units × 1000: process time per unit spent on anything but the unit"
        " itself (broker, result backend, store writes, reducer, submit); the submitting process,"
        " Redis and the worker's main process share the same cores, so it is an upper bound.\n"
        "submit s: until submit() returned; reduce s: last unit result stored → batch `done`"
        " (the reducer, one process); dispatch ms/unit: the overhead with wall s − reduce s,"
        " i.e. dispatch alone (bare Celery: wall s × workers / units, all of it dispatch; its"
        " task does nothing and nothing reduces). CPU ms/unit: CPU time of every process (this"
        " one, the workers, Redis) per unit, Arena's reducer included: steadier than wall time"
        " on a shared machine.\nBare Celery: the same Redis (its own database), Arena's worker"
        " flags and reliability settings (acks late, prefetch 1), a trivial task; chunks are"
        " Celery's own (Task.chunks: one task and one stored result per chunk)."
    )
    console.print(ratio_table(rows, baseline, workers))
    console.print("target (issue 23): Arena / bare ≤ 1.5× for the chunked dispatch")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Redis and the workers are already stopped
        raise SystemExit(130) from None
