"""Alympics: the alympics_lite suite in one process vs on the embedded cluster, and Prisoner's
Dilemma matches/s of our game engine vs the Axelrod library.

Run from the repository root: .venv/bin/python bench/alympics_suite.py [--episodes N]
[--workers W] [--repeat R] [--matches M] [--blocks B] [--no-cluster | --only-games]. Every figure
in one run is measured side by side on the same machine; read the ratios, not single figures.
--no-cluster times the suite in one process only (no Redis, no workers); --only-games skips the
suite and measures only Prisoner's Dilemma against Axelrod.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

from _cluster import bench_cluster, timed_batch  # beside this script
from rich.console import Console

from arena.service.alympics import benchmark_spec, result_of
from tasks.execute import execute_batch
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import UnitResult, ValidatedBatch
from workers.games import GAMES, play_episode
from workers.games.prisoners_dilemma import AlwaysDefect, TitForTat

PD_ROUNDS = 100
console = Console(soft_wrap=True)  # long lines are not wrapped (they are copied into docs)


def make_batch(episodes: int | None, seed: int) -> ValidatedBatch:
    return validate_batch(benchmark_spec("builtin", episodes, seed))


def in_process(batch: ValidatedBatch) -> tuple[float, float, list[UnitResult]]:
    """(wall s, composite score, unit results) of the whole suite in this process."""
    started = time.perf_counter()
    results = execute_batch(batch)
    return time.perf_counter() - started, result_of(batch, results).composite_score, results


def on_cluster(
    store: Store, batch: ValidatedBatch, pool: subprocess.Popen[bytes], timeout_s: float = 600
) -> tuple[float, float]:
    """(wall s from submit() until the batch is `done`, composite score of the stored results)."""
    wall, batch_id = timed_batch(store, batch, pool, timeout_s)
    stored = store.unit_results(batch_id)
    results = [stored[u.id] for u in get_workload("alympics").expand(batch)]
    assert all(r.status == "ok" for r in results), [r.reason for r in results if r.reason]
    return wall, result_of(batch, results).composite_score


def suite_in_process(args: argparse.Namespace) -> None:
    """--no-cluster: the suite in this process only, one row per seed."""
    in_process(make_batch(1, 1_000_000))  # warm-up: imports, first-call costs
    console.print(
        f"\n[bold]alympics_lite, agent builtin, in one process[/] (no cluster); episodes per "
        f"match set: {args.episodes or 'from the suite'}"
    )
    walls = []
    for seed in range(1, args.repeat + 1):
        wall, score, results = in_process(make_batch(args.episodes, seed))
        walls.append(wall)
        slowest = max(results, key=lambda r: r.duration_s)
        console.print(
            f"seed {seed}: in-process {wall:6.3f}s  composite {score:.4f}  (slowest unit "
            f"{slowest.item} {slowest.duration_s:.3f}s)"
        )
    console.print(f"median in-process: {statistics.median(walls):.3f}s")


def suite(args: argparse.Namespace) -> None:
    from tasks.submit import chunked

    workload = get_workload("alympics")
    durations: list[UnitResult] = []  # the last in-process run's unit results
    rows: list[tuple[int, float, float, float, float]] = []  # seed, in-process s/score, cluster
    with bench_cluster(args.workers, console) as (store, pool):
        # Warm-up: waits for the workers to consume, and makes every child import the games.
        warm, _ = on_cluster(store, make_batch(1, 1_000_000), pool, 120)
        console.print(f"workers ready; warm-up batch (1 episode per match set): {warm:.2f}s")
        for seed in range(1, args.repeat + 1):  # alternated: in-process, then cluster, per seed
            ip_s, ip_score, durations = in_process(make_batch(args.episodes, seed))
            cl_s, cl_score = on_cluster(store, make_batch(args.episodes, seed), pool)
            rows.append((seed, ip_s, ip_score, cl_s, cl_score))

    chunks = chunked(workload.expand(make_batch(args.episodes, args.repeat)), workload.chunk_size)
    took = {r.unit_id: r.duration_s for r in durations}
    chunk_s = [sum(took[u.id] for u in c) for c in chunks]
    bound = max(max(chunk_s), sum(chunk_s) / args.workers)
    console.print(
        f"\n[bold]alympics_lite, agent builtin[/]: {len(durations)} units (match sets: 5 games × "
        f"their baselines), {len(chunks)} Celery tasks of up to {workload.chunk_size} units, "
        f"{args.workers} worker processes; episodes per match set: "
        f"{args.episodes or 'from the suite'}"
    )
    for seed, ip_s, ip_score, cl_s, cl_score in rows:
        same = "same" if ip_score == cl_score else "[red]DIFFERENT[/]"
        console.print(
            f"seed {seed}: in-process {ip_s:6.2f}s  cluster {cl_s:6.2f}s  cluster/in-process "
            f"{cl_s / ip_s:5.2f}  composite {ip_score:.4f} / {cl_score:.4f} ({same})"
        )
    slowest = max(durations, key=lambda r: r.duration_s)
    console.print(
        f"median cluster/in-process: {statistics.median(r[3] / r[1] for r in rows):.2f}; "
        f"slowest unit {slowest.item} {slowest.duration_s:.2f}s, slowest chunk "
        f"{max(chunk_s):.2f}s of {sum(chunk_s):.2f}s in all (last in-process run): no cluster run "
        f"can beat {bound:.2f}s = max(slowest chunk, total / {args.workers} workers), "
        f"{bound / sum(chunk_s):.2f} × in-process"
    )


def ours(matches: int) -> tuple[float, list[float]]:
    started = time.perf_counter()
    for i in range(matches):
        game = GAMES["prisoners_dilemma"](PD_ROUNDS)
        record = play_episode(game, [TitForTat(), AlwaysDefect()], i)
    wall = time.perf_counter() - started
    return wall, [sum(p[player] for p in record.payoffs) for player in (0, 1)]


def theirs(axl: Any, matches: int) -> tuple[float, list[float]]:
    started = time.perf_counter()
    for _ in range(matches):
        match = axl.Match((axl.TitForTat(), axl.Defector()), turns=PD_ROUNDS, seed=1)
        match.play()
    wall = time.perf_counter() - started
    return wall, [float(s) for s in match.final_score()]


def prisoners_dilemma(matches: int, blocks: int) -> None:
    started = time.perf_counter()
    # ~20 s on a small machine (it classifies its strategies on import): outside the timing
    import axelrod as axl  # type: ignore[import-untyped]

    console.print(f"\naxelrod imported in {time.perf_counter() - started:.1f}s (not timed below)")
    sides: dict[str, Callable[[int], tuple[float, list[float]]]] = {
        "ours": ours,
        "axelrod": lambda n: theirs(axl, n),
    }
    theirs(axl, 1)  # first-call costs out of the timing
    per_block = [matches // blocks + (b < matches % blocks) for b in range(blocks)]
    walls: dict[str, list[float]] = {"ours": [], "axelrod": []}
    totals: dict[str, list[float]] = {}
    for b, n in enumerate(per_block):  # alternate which side goes first
        for name in list(sides)[:: 1 if b % 2 == 0 else -1]:
            wall, totals[name] = sides[name](n)
            walls[name].append(wall)
    same = "same" if totals["ours"] == totals["axelrod"] else "[red]DIFFERENT[/]"
    console.print(
        f"[bold]Prisoner's Dilemma[/], tit-for-tat vs always-defect, {PD_ROUNDS} rounds: {matches}"
        f" matches each, in {blocks} alternated blocks; final scores ours {totals['ours']}, "
        f"axelrod {totals['axelrod']} ({same})"
    )
    rate = {name: matches / sum(w) for name, w in walls.items()}
    for name, w in walls.items():
        console.print(
            f"{name:8} {rate[name]:8,.0f} matches/s  ({sum(w):.2f}s; blocks "
            + ", ".join(f"{n / s:,.0f}" for n, s in zip(per_block, w, strict=True))
            + " matches/s)"
        )
    ratios = [a / o for o, a in zip(walls["ours"], walls["axelrod"], strict=True)]
    console.print(
        f"ours / axelrod: {rate['ours'] / rate['axelrod']:.3f} "
        f"(per block {min(ratios):.3f}–{max(ratios):.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--episodes", type=int, default=None, help="episodes per match set")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--repeat", type=int, default=2, help="suite runs of each mode (default 2)")
    parser.add_argument("--matches", type=int, default=2000, help="PD matches each (default 2000)")
    parser.add_argument("--blocks", type=int, default=4, help="alternated PD blocks (default 4)")
    parts = parser.add_mutually_exclusive_group()
    parts.add_argument(
        "--no-cluster", action="store_true", help="time the suite in one process only"
    )
    parts.add_argument(
        "--only-games", action="store_true", help="skip the suite: PD vs Axelrod only"
    )
    args = parser.parse_args()
    if min(args.episodes or 1, args.workers, args.repeat, args.matches, args.blocks) < 1:
        parser.error("--episodes, --workers, --repeat, --matches and --blocks must be at least 1")
    if args.blocks > args.matches:
        parser.error("--blocks must not exceed --matches")
    if args.no_cluster:
        suite_in_process(args)
    elif not args.only_games:
        suite(args)
    prisoners_dilemma(args.matches, args.blocks)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Redis and the workers are already stopped
        raise SystemExit(130) from None
