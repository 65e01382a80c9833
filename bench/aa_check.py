"""A/A check of `arena compare` under the default evaluation protocol (sticky actions 0.25):
each built-in agent evaluated twice on 1-1 with different master seeds, the two evaluations
compared as `arena compare` compares two rows (P(A beats B), its 95% stratified bootstrap
interval, the distinct trajectories of each side). The agent is the same, so a verdict
("better") is a false positive; at 95% about 1 pair in 20 is expected to be one by chance
(target: at most 2 of 20). docs/mario.md, "The evaluation protocol", records a run.

Run from the repository root: .venv/bin/python bench/aa_check.py [--pairs 20] [--episodes 16]
[--max-steps 1000] [--processes 2]. Pair k plays agent AGENTS[k % 3] with master seeds 1000 + 2k
and 1001 + 2k; every unit runs in this machine's processes (tasks.execute.execute_batch: the
workload's own seeds, episodes and scores), no cluster.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from typing import Any

from scoring.compare import compare_scores
from tasks.execute import execute_batch
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import UnitResult

AGENTS = ("jump-right", "random", "right")


def evaluate(job: tuple[str, int, int, int]) -> tuple[list[float], int]:
    """One evaluation: the episodes' scores and their distinct trajectories (the row's)."""
    agent, seed, episodes, max_steps = job
    spec: dict[str, Any] = {
        "workload": "mario",
        "agents": [agent],
        "items": ["1-1"],
        "protocol": {"episodes": episodes, "seed": seed},
        "params": {"max_steps": max_steps},  # sticky_p: the default
    }
    batch = validate_batch(spec, asker="operator")
    results: list[UnitResult] = execute_batch(batch, {})
    failed = [r.reason for r in results if r.status != "ok"]
    if failed:
        raise RuntimeError(f"{agent} seed {seed}: {failed[0]}")
    (entry,) = get_workload("mario").reduce(batch, results).entries
    scores = [float(r.result["arena_score"]) for r in sorted(results, key=lambda r: r.episode)]
    return scores, int(entry.stats["trajectories"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    jobs = [
        (AGENTS[k % len(AGENTS)], 1000 + 2 * k + side, args.episodes, args.max_steps)
        for k in range(args.pairs)
        for side in (0, 1)
    ]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
        done = pool.map(evaluate, jobs)
    positives = 0
    print(f"{'pair':>4}  {'agent':<11} {'seeds':<11} {'trajectories':<13} P(A beats B) [95%]")
    for k in range(args.pairs):
        (a, ta), (b, tb) = done[2 * k], done[2 * k + 1]
        c = compare_scores(a, b, trajectories=(ta, tb))
        verdict = "better: FALSE POSITIVE" if c.better else "" if c.conclusive else "no conclusion"
        positives += c.better is not None
        seeds = f"{jobs[2 * k][1]}/{jobs[2 * k + 1][1]}"
        print(
            f"{k:>4}  {jobs[2 * k][0]:<11} {seeds:<11} {f'{ta} / {tb}':<13} "
            f"{c.probability:.3f} [{c.ci95[0]:.3f}, {c.ci95[1]:.3f}] {verdict}".rstrip()
        )
    print(
        f"false positives: {positives} of {args.pairs} at 95% (target <= 2); {args.episodes} "
        f"episodes a side, 1-1, sticky actions 0.25, max_steps {args.max_steps}; "
        f"{time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
