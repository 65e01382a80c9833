"""A race of 8 agents (--agents N) on a small Python project (pytest, ruff): its checks (the
baseline and one per branch) one after the other in one process, and on the embedded cluster with
1 and 2 worker processes, all in one run on the same machine (docs/performance.md, "Race").

Run from the repository root: .venv/bin/python bench/race_parallel.py [--agents N] [--repeat R]
The sample repository is the tests' (tests/race/projects.py), built in a temporary folder; its
branches clean, adds-tests, breaks-test and lint-errors are the first four agents, and further
agents get variants of them made here (the same change, with "(variant K)" in a module docstring),
so that every check runs the build, pytest and ruff.

Ceiling: a check is one unit (chunk size 1) of about the same length, so N + 1 checks on 2
workers take ceil((N + 1) / 2) rounds: with 8 agents, 9 checks in 5 rounds, at most 9/5 = 1.8×
one after the other (4 agents: 5 checks in 3 rounds, 1.67×), before the cores the workers share
with Redis, this process and the tools' own start-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _cluster import timed_batch, warm_then_repeat  # beside this script
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.race.projects
from tasks.execute import execute_batch
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import ValidatedBatch
from tests.race.projects import (
    BASE,
    PY_BRANCH_COMMITS,
    RaceRepo,
    agent_spec_entries,
    git,
    make_python_repo,
)

console = Console()
if not console.is_terminal:
    console.width = max(console.width, 120)
# The kinds every agent branch is one of: each runs all three commands (no broken build, whose
# check skips tests and lint, and no hanging test).
KINDS = ("clean", "adds-tests", "breaks-test", "lint-errors")
AUTHOR_DATE = "2026-11-26T11:00:00+00:00"


def variant(text: str, k: int) -> str:
    """`text` with "(variant k)" in its module docstring's first line (when it starts with one)."""
    if not text.startswith('"""'):
        return text
    return text.replace('."""', f' (variant {k})."""', 1)


def add_branches(repo: RaceRepo, agents: int) -> tuple[RaceRepo, list[str]]:
    """The repository with `agents` agent branches: the kinds first, then their variants
    (`clean-2`, `adds-tests-2`, …, `clean-3`, …) forked from the base's tip. A variant is
    listed with its kind's facts, which only agent_spec_entries() reads (its diff may differ by
    the docstring line)."""
    branches, facts = [], dict(repo.facts)
    for index in range(agents):
        kind, k = KINDS[index % len(KINDS)], index // len(KINDS) + 1
        if k == 1:
            branches.append(kind)
            continue
        branch = f"{kind}-{k}"
        git(repo.path, "checkout", "-q", "-b", branch, BASE)
        for message, files in PY_BRANCH_COMMITS[kind]:
            for rel, text in files.items():
                assert text is not None
                (repo.path / rel).parent.mkdir(parents=True, exist_ok=True)
                (repo.path / rel).write_text(variant(text, k))
            git(repo.path, "add", "-A")
            git(repo.path, "commit", "-q", "--no-verify", "-m", message, date=AUTHOR_DATE)
        facts[branch] = facts[kind]
        branches.append(branch)
    git(repo.path, "checkout", "-q", BASE)
    return dataclasses.replace(repo, facts=facts), branches


def make_batch(repo: RaceRepo, branches: list[str]) -> ValidatedBatch:
    spec: dict[str, Any] = {
        "workload": "race",
        "task": "bench",
        "repo": str(repo.path),
        "agents": agent_spec_entries(repo, branches),
    }
    return validate_batch(spec, asker="operator")  # a benchmark is the operator's run


def on_cluster(
    store: Store, batch: ValidatedBatch, pool: subprocess.Popen[bytes]
) -> tuple[float, dict[str, float]]:
    """(wall s, the batch's composite score per agent)."""
    wall, batch_id = timed_batch(store, batch, pool)
    info = store.batch(batch_id)
    if info is None or info.errors:
        raise RuntimeError(f"race {batch_id} ended with errors")
    return wall, {e.agent: e.score for e in info.entries}


def cluster_runs(
    workers: int, repo: RaceRepo, branches: list[str], repeat: int
) -> list[tuple[float, dict[str, float]]]:
    batch = make_batch(repo, branches)  # its own warm-up: every worker imports the race code
    return warm_then_repeat(workers, console, batch, batch, repeat, on_cluster)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--agents", type=int, default=8, help="agents (branches; default 8)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each setting (default 3)")
    args = parser.parse_args()
    if args.repeat < 1 or not 1 <= args.agents <= 200:
        parser.error("--repeat must be at least 1, --agents from 1 to 200")
    checks = args.agents + 1
    started = time.perf_counter()
    scores: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="arena-bench-race-") as tmp:
        repo, branches = add_branches(make_python_repo(Path(tmp) / "repo"), args.agents)
        batch = make_batch(repo, branches)
        execute_batch(batch)  # warm-up
        serial_name = "one after the other (one process)"
        rows: dict[str, list[float]] = {serial_name: []}
        scores[serial_name] = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            results = execute_batch(batch)
            rows[serial_name].append(time.perf_counter() - t0)
            if any(r.status != "ok" for r in results):
                raise RuntimeError([r.reason for r in results if r.status != "ok"])
            entries = get_workload("race").reduce(batch, results).entries
            scores[serial_name].append({e.agent: e.score for e in entries})
        spawn = multiprocessing.get_context("spawn")  # a fresh Celery app per cluster
        for workers in (1, 2):
            with spawn.Pool(1) as pool:
                name = f"cluster, {workers} worker process{'es' if workers > 1 else ''}"
                measured = pool.apply(cluster_runs, (workers, repo, branches, args.repeat))
                rows[name] = [wall for wall, _ in measured]
                scores[name] = [board for _, board in measured]
    table = Table(
        title=f"Race: {args.agents} agents + baseline = {checks} checks (build, pytest, ruff)"
    )
    for name in ("setting", "wall s (median)", "checks/s", "× one after the other"):
        table.add_column(name, justify="left" if name == "setting" else "right")
    serial = statistics.median(rows[serial_name])
    for name, runs in rows.items():
        wall = statistics.median(runs)
        table.add_row(name, f"{wall:.2f}", f"{checks / wall:.2f}", f"{serial / wall:.2f}")
    console.print(table)
    rounds = math.ceil(checks / 2)
    console.print(
        f"Agents: {', '.join(branches)}. Ceiling with 2 workers: {checks} checks in {rounds} "
        f"rounds, at most {checks / rounds:.2f}× one after the other."
    )
    boards = [board for runs in scores.values() for board in runs]
    if all(board == boards[0] for board in boards):
        console.print(f"Same composite score per agent in all {len(boards)} runs.")
    else:
        console.print("[red]Composite scores DIFFER between runs[/]")
    console.print(
        f"{args.repeat} run(s) of each setting, medians; a fresh batch of the same spec every run, "
        f"workers warmed up first; whole benchmark {time.perf_counter() - started:.0f}s."
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
