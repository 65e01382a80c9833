"""A race's own environment (docs/race.md, "The race's environment"): what building it costs and
what its cache saves. The same race (the tests' sample repository, --agents N branches) runs
twice in one process with an empty environment cache: the first race builds the environment
(its baseline check) and its other checks reuse it; the second race, of the same base, builds
nothing. Printed side by side: both races' times, the build, the reuses, and the time saved.

Run from the repository root: .venv/bin/python bench/race_environment.py [--agents N] [--repeat R]
The wheels come from .test-tools/race-wheels (scripts/install-test-tools fills it), never from an
index: nothing leaves this machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.race.projects
from tasks.execute import execute_batch
from tasks.workloads import validate_batch
from tasks.workloads.base import UnitResult
from tests.race.projects import agent_spec_entries, make_python_repo

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".test-tools" / "race-wheels"
KINDS = ("clean", "adds-tests", "breaks-test", "lint-errors")
console = Console()


def environments(results: list[UnitResult]) -> list[dict[str, Any]]:
    bad = [r.reason for r in results if r.status != "ok"]
    if bad:
        raise RuntimeError(bad)
    return [r.result["environment"] for r in results]


def one_pair(tmp: Path, spec: dict[str, Any]) -> dict[str, float]:
    """The race twice on an empty cache: seconds of each, and of the build and reuses."""
    work = Path(tempfile.mkdtemp(dir=tmp, prefix="work-"))
    os.environ["ARENA_WORK_DIR"] = str(work)
    batch = validate_batch(spec)
    started = time.perf_counter()
    cold = environments(execute_batch(batch))
    cold_s = time.perf_counter() - started
    started = time.perf_counter()
    warm = environments(execute_batch(batch))
    warm_s = time.perf_counter() - started
    built = [e["duration_s"] for e in cold if not e["reused"]]
    if len(built) != 1 or any(not e["reused"] for e in warm):
        raise RuntimeError(f"expected one build, then reuse: {cold} {warm}")
    reuses = [e["duration_s"] for e in cold + warm if e["reused"]]
    return {
        "cold race": cold_s,
        "warm race": warm_s,
        "saved": cold_s - warm_s,
        "environment build": built[0],
        "environment reuse (max)": max(reuses),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=4, help="agent branches (1-4; default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of races (default 3)")
    args = parser.parse_args()
    if not 1 <= args.agents <= len(KINDS) or args.repeat < 1:
        parser.error(f"--agents from 1 to {len(KINDS)}, --repeat at least 1")
    if not (WHEELS / ".complete").is_file():
        parser.error(f"no wheels in {WHEELS}: run scripts/install-test-tools")
    os.environ |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELS)}
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="arena-bench-race-env-") as name:
        tmp = Path(name)
        os.environ["ARENA_REPO_ROOTS"] = str(tmp)
        repo = make_python_repo(tmp / "repo")
        spec = {
            "workload": "race",
            "task": "bench",
            "repo": str(repo.path),
            "agents": agent_spec_entries(repo, list(KINDS[: args.agents])),
        }
        for _ in range(args.repeat):
            for what, seconds in one_pair(tmp, spec).items():
                rows.setdefault(what, []).append(seconds)
    table = Table(title=f"A race of {args.agents} agents ({args.agents + 1} checks), twice")
    table.add_column("what")
    table.add_column("median s", justify="right")
    table.add_column("runs", justify="right")
    for what, values in rows.items():
        runs = " ".join(f"{v:.3f}" for v in values)
        table.add_row(what, f"{statistics.median(values):.3f}", runs)
    console.print(table)
    ratio = statistics.median(rows["warm race"]) / statistics.median(rows["cold race"])
    console.print(f"warm race / cold race: {ratio:.2f}×")


if __name__ == "__main__":
    main()
