"""What the default limits on one unit cost (issue 33): the same units with the workload's
default memory limit on (as a worker runs them: tasks/units.py) and off (ARENA_UNIT_MEMORY_MB=0),
alternated, side by side.

Run from the repository root: .venv/bin/python bench/unit_limits.py [--repeat R]
[--max-steps N] [--episodes E].

1. Mario: the built-in `jump-right` agent plays 8 episodes of World 1-1 (frame skip 4, at most
   N steps); steps/s from the episodes' own wall time. The action logs on and off must be equal.
2. Alympics: the built-in agent plays the alympics_lite suite's 13 match sets, E episodes each
   (200 by default, so that a round takes seconds; 0: the suite's own); the agent's moves/s.

Each round runs both modes back to back (in turn first), the first round is a warm-up; the
medians are compared, and so is the median of each round's own ratio, which cancels the
machine's drift (target: limits on >= 0.95x off). The counts' ceilings
(tasks/workloads/unit_work.py) cost one check at submission and nothing per unit.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from scoring.alympics import GAMES
from tasks.execute import execute_unit, unit_memory
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import Unit

console = Console(soft_wrap=True, width=150)
MODES = ("limits on", "limits off")


def limit_for(mode: str, unit: Unit) -> int:
    return get_workload(unit.workload).memory_limit_mb(unit) if mode == MODES[0] else 0


def alternated(repeat: int, run: Callable[[str], float]) -> dict[str, list[float]]:
    """Rates of each mode over `repeat` rounds after a warm-up, the order swapped each round."""
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    for round_ in range(repeat + 1):
        for mode in MODES if round_ % 2 == 0 else MODES[::-1]:
            rate = run(mode)
            if round_:
                rates[mode].append(rate)
    return rates


def mario(args: argparse.Namespace) -> tuple[str, dict[str, list[float]], str]:
    spec = {
        "workload": "mario",
        "agents": ["jump-right"],
        "items": ["1-1"],
        "protocol": {"seed": 3, "episodes": 8},
        "params": {"max_steps": args.max_steps, "frame_skip": 4},
    }
    workload = get_workload("mario")
    units = workload.expand(validate_batch(spec, asker="operator"))
    logs: dict[str, set[str]] = {m: set() for m in MODES}
    steps = 0

    def run(mode: str) -> float:
        nonlocal steps
        steps, wall = 0, 0.0
        for unit in units:
            with unit_memory(limit_for(mode, unit)):
                result = execute_unit(workload, unit).result
            assert result.status == "ok", result.reason
            logs[mode].add(result.result["actions"])
            steps += int(result.result["steps"])
            wall += float(result.result["wall_s"])
        return steps / wall

    rates = alternated(args.repeat, run)
    assert logs[MODES[0]] == logs[MODES[1]], "the episodes differ"
    limit = limit_for(MODES[0], units[0])
    what = f"Mario 1-1, jump-right, frame skip 4, 8 episodes, {steps:,} steps (limit {limit:,} MB)"
    return what, rates, "steps/s"


def alympics(args: argparse.Namespace) -> tuple[str, dict[str, list[float]], str]:
    spec = {
        "workload": "alympics",
        "agents": ["builtin"],
        "items": list(GAMES),
        "protocol": {"seed": 1},
        "params": {
            "suite": "alympics_lite",
            **({"episodes": args.episodes} if args.episodes else {}),
        },
    }
    workload = get_workload("alympics")
    units = workload.expand(validate_batch(spec, asker="operator"))
    moves = sum(u.payload["rounds"] * u.payload["episodes"] for u in units)

    def run(mode: str) -> float:
        started = time.perf_counter()
        for unit in units:
            with unit_memory(limit_for(mode, unit)):
                result = execute_unit(workload, unit).result
            assert result.status == "ok", result.reason
        return float(moves / (time.perf_counter() - started))

    rates = alternated(args.repeat, run)
    limit = limit_for(MODES[0], units[0])
    what = f"Alympics lite, builtin, 13 match sets, {moves:,} agent moves (limit {limit:,} MB)"
    return what, rates, "moves/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--max-steps", type=int, default=600)
    parser.add_argument("--episodes", type=int, default=200, help="0: the suite's own")
    args = parser.parse_args()
    console.print(f"{platform.node()}: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    table = Table(title="One unit with its workload's default limits on and off (medians)")
    for column in ("units", *MODES, "on / off", "paired", "target", "runs"):
        table.add_column(column, justify="left" if column == "units" else "right")
    for part in (mario, alympics):
        what, rates, unit = part(args)
        on, off = (statistics.median(rates[m]) for m in MODES)
        # Each round's two runs are back to back: their ratio cancels the machine's drift.
        paired = statistics.median(a / b for a, b in zip(*(rates[m] for m in MODES), strict=True))
        verdict = "met" if min(on / off, paired) >= 0.95 else "missed"
        table.add_row(
            what,
            f"{on:,.0f} {unit}",
            f"{off:,.0f} {unit}",
            f"{on / off:.3f}",
            f"{paired:.3f}",
            f"≥ 0.95: {verdict}",
            str(len(rates[MODES[0]])),
        )
    console.print(table)
    console.print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
