"""An Alympics tournament of 50 agents (--agents N): every agent plays the alympics_lite suite,
50 × 13 match sets = 650 units, on the embedded cluster with 1 and with 2 worker processes and
(unless --no-in-process) in one process, all in one run on the same machine (target: ≥ 1.8×
with 2 workers).

Run from the repository root: .venv/bin/python bench/alympics_tournament.py [--agents N]
[--episodes E] [--repeat R] [--no-in-process]. The agents are 50 distinct deterministic Python
agents, `tournament_agents:agent_00` … `agent_49` (bench/tournament_agents.py), which the worker
processes import through PYTHONPATH (this folder is put on it before they start). Every run
plays the same batch (same spec and seed, a fresh batch each time); the script checks that the
boards of every run give each agent the same composite score.

Ceiling: a Celery task is a chunk of 4 units (the workload's chunk size), 163 chunks for 650
units, so with 2 workers no run beats max(slowest chunk, sum of chunks / 2): about 2× 1 worker,
which the script prints from the 1-worker run's unit times; the 2 workers also share the 2 cores
with Redis and this process.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from _cluster import timed_batch, warm_then_repeat  # beside this script
from rich.console import Console
from rich.table import Table
from tournament_agents import N_AGENTS  # beside this script

from scoring.alympics import GAMES
from tasks.execute import execute_batch
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import ValidatedBatch

BENCH = Path(__file__).resolve().parent
SEED = 1
BOARD = "bench-tournament"
console = Console()
if not console.is_terminal:
    console.width = max(console.width, 120)

# (wall s, composite score per agent on the board, each unit's own duration, in unit order)
Run = tuple[float, dict[str, float], list[float]]


def agent_name(index: int) -> str:
    return f"agent-{index:02d}"


def make_batch(agents: int, episodes: int | None, board: str) -> ValidatedBatch:
    spec: dict[str, Any] = {
        "workload": "alympics",
        "leaderboard": board,
        "agents": [
            {"name": agent_name(i), "entry_point": f"tournament_agents:agent_{i:02d}"}
            for i in range(agents)
        ],
        "items": list(GAMES),
        "protocol": {"seed": SEED},
        "params": {"suite": "alympics_lite", "episodes": episodes},
    }
    return validate_batch(spec)


def on_cluster(store: Store, batch: ValidatedBatch, pool: subprocess.Popen[bytes]) -> Run:
    """Seconds from submit() to `done`; the board's composites once the batch is done."""
    wall, batch_id = timed_batch(store, batch, pool, timeout_s=3600)
    info = store.batch(batch_id)
    if info is None or info.errors:
        first = next((r.reason for r in store.unit_results(batch_id).values() if r.reason), None)
        raise RuntimeError(f"tournament {batch_id} ended with errors; first: {first}")
    board = {row.agent: row.score for row in store.leaderboard(BOARD)}
    stored = store.unit_results(batch_id)
    units = get_workload("alympics").expand(batch)
    return wall, board, [stored[u.id].duration_s for u in units]


def cluster_runs(workers: int, agents: int, episodes: int | None, repeat: int) -> list[Run]:
    """`repeat` runs of the tournament on a fresh embedded cluster of `workers` processes."""
    warm_up = make_batch(agents, 1, "warm-up")  # imports the games and the agents' module
    batch = make_batch(agents, episodes, BOARD)
    return warm_then_repeat(workers, console, warm_up, batch, repeat, on_cluster)


def in_process_runs(batch: ValidatedBatch, repeat: int) -> list[Run]:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        results = execute_batch(batch)
        reduction = get_workload("alympics").reduce(batch, results)
        wall = time.perf_counter() - started
        bad = [r.reason for r in results if r.status != "ok"]
        if bad:
            raise RuntimeError(f"{len(bad)} match sets ended as errors; first: {bad[0]}")
        board = {e.agent: e.score for e in reduction.entries}
        runs.append((wall, board, [r.duration_s for r in results]))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--agents", type=int, default=N_AGENTS, help=f"agents, 1 to {N_AGENTS} (default {N_AGENTS})"
    )
    parser.add_argument(
        "--episodes", type=int, default=None, help="episodes per match set (default: the suite's)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each setting (default 3)")
    parser.add_argument(
        "--no-in-process", action="store_true", help="skip the in-process reference"
    )
    args = parser.parse_args()
    if not 1 <= args.agents <= N_AGENTS or min(args.episodes or 1, args.repeat) < 1:
        parser.error(f"--agents from 1 to {N_AGENTS}; --episodes and --repeat at least 1")
    # The worker processes import tournament_agents from this folder (start_workers passes the
    # environment on, with the working directory first).
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH), path]))
    batch = make_batch(args.agents, args.episodes, BOARD)
    units = len(get_workload("alympics").expand(batch))
    chunk = get_workload("alympics").chunk_size
    rows: dict[str, list[Run]] = {}
    started = time.perf_counter()
    if not args.no_in_process:
        execute_batch(make_batch(args.agents, 1, "warm-up"))  # imports, first-call costs
        rows["in one process (no cluster)"] = in_process_runs(batch, args.repeat)
    spawn = multiprocessing.get_context("spawn")  # a fresh Celery app per cluster
    for workers in (1, 2):
        with spawn.Pool(1) as pool:
            name = f"cluster, {workers} worker process{'es' if workers > 1 else ''}"
            rows[name] = pool.apply(
                cluster_runs, (workers, args.agents, args.episodes, args.repeat)
            )
    table = Table(
        title=f"Alympics tournament: {args.agents} agents × 13 match sets = {units} units "
        f"(alympics_lite, episodes {args.episodes or 'from the suite'}, seed {SEED})"
    )
    for name in ("setting", "wall s (median)", "units/s", "× 1 worker"):
        table.add_column(name, justify="left" if name == "setting" else "right")
    one_runs = rows["cluster, 1 worker process"]
    one = statistics.median(run[0] for run in one_runs)
    for name, runs in rows.items():
        wall = statistics.median(run[0] for run in runs)
        table.add_row(
            name,
            f"{wall:.2f}",
            f"{units / wall:.1f}",
            f"{one / wall:.2f}" if name.startswith("cluster") else "—",
        )
    console.print(table)
    unit_s = one_runs[0][2]
    chunk_s = [sum(unit_s[i : i + chunk]) for i in range(0, len(unit_s), chunk)]
    bound = max(max(chunk_s), sum(chunk_s) / 2)
    console.print(
        f"{len(chunk_s)} Celery tasks of up to {chunk} units. Ceiling with 2 workers (the "
        f"1-worker run's unit times): max(slowest chunk {max(chunk_s):.2f}s, sum "
        f"{sum(chunk_s):.2f}s / 2) = {bound:.2f}s, at most {sum(chunk_s) / bound:.2f}× 1 worker "
        "before dispatch and the shared cores."
    )
    boards = [run[1] for runs in rows.values() for run in runs]
    scores = sorted(boards[0].values())
    if len(boards[0]) == args.agents and all(board == boards[0] for board in boards):
        console.print(
            f"Same composite score per agent on the boards of all {len(boards)} runs: "
            f"{len(set(scores))} distinct composites among {args.agents} agents, "
            f"{scores[0]:.2f} to {scores[-1]:.2f}."
        )
    else:
        differ = sorted(a for a in boards[0] if any(b.get(a) != boards[0][a] for b in boards))
        console.print(f"[red]Composite scores DIFFER between runs[/]: {differ[:5]}")
    console.print(
        f"{args.repeat} run(s) of each setting, medians; a fresh batch of the same spec every "
        f"run, workers warmed up first; whole benchmark {time.perf_counter() - started:.0f}s."
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
