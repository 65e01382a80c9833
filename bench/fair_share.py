"""Fair share between batches on one pool (issue 32), measured side by side in one run on a
fresh embedded cluster of 2 worker processes:

1. a 10-unit interactive batch submitted while a 2,000-unit bulk batch runs: its time from submit
   to done over its time alone on the idle pool (target ≤ 3, plus at most one unit's duration);
2. two equal batches submitted together: how far apart they finish (target within 10%);
3. two teams weighted 3:1, both saturating the pool: units finished per team over the window
   in which both ran, from the unit results' end times (target 3 ± 10%);
4. the pool's throughput with sharing over plain FIFO (every chunk published at submission,
   the old `_fan_out`) on the same work, measure 1's (target ≥ 0.95).

Run from the repository root: .venv/bin/python bench/fair_share.py [--repeat R] [--mario]
[--max-steps S]. `--mario`: measures 1 and 4 with Mario episodes (a 16-episode check behind a
400-episode batch). Bandit units are `greedy` episodes of 5,000 pulls (~15 ms), 10 to a chunk.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from _cluster import bench_cluster  # beside this script
from _sharing import (
    Work,
    busy_seconds,
    submit_fifo,
    submit_shared,
    unit_ends,
    unit_seconds,
    units_in,
    wait_done,
    wait_units,
)
from cluster_throughput import cpu_meter
from rich.console import Console
from rich.table import Table

from tasks.store import Store
from tasks.workloads.base import ValidatedBatch

console = Console()
if not console.is_terminal:  # piped into a file: no wrapped table
    console.width = max(console.width, 120)


@dataclass(frozen=True)
class Sizes:
    small: int  # the interactive check
    big: int  # the bulk batch it is submitted behind
    equal: int  # each of the two equal batches
    blue: int  # the weight-1 team's batch (the weight-3 team's is 3× as big)


BANDIT = Sizes(small=10, big=2000, equal=500, blue=400)
MARIO = Sizes(small=16, big=400, equal=0, blue=0)


@dataclass
class Behind:
    """Measure 1 and 4's run: the small batch submitted while the big one runs."""

    mode: str  # "sharing" or "FIFO"
    latency_s: float  # the small batch, submit to done
    wall_s: float  # the big batch's submit to both done
    units: int
    busy: float  # the units' own seconds over wall × workers: how busy the pool was
    cpu_s: float  # CPU seconds of every process (workers, Redis, this one) for the work


@dataclass
class Figures:
    alone_s: list[float] = field(default_factory=list)
    behind: list[Behind] = field(default_factory=list)
    spreads: list[float] = field(default_factory=list)
    team_ratios: list[float] = field(default_factory=list)
    unit_s: float = 0.0  # the mean unit duration of the big batch (sharing)


class Bench:
    def __init__(
        self, store: Store, pool: subprocess.Popen[bytes], work: Work, workers: int
    ) -> None:
        self.store, self.pool, self.work, self.workers = store, pool, work, workers
        self.seeds: Iterator[int] = iter(range(1, 1_000_000))

    def batch(self, units: int, priority: str, label: str) -> ValidatedBatch:
        return self.work.batch(units, next(self.seeds), priority, label)

    def alone(self, units: int) -> float:
        """The interactive check on the idle pool: submit to done."""
        started = time.perf_counter()
        batch_id = submit_shared(self.store, self.batch(units, "interactive", "alone"))
        return wait_done(self.store, [batch_id], self.pool)[batch_id] - started

    def behind(self, sizes: Sizes, fifo: bool) -> tuple[Behind, str]:
        """The big bulk batch, and once a tenth of it is done the small interactive one."""
        submit = submit_fifo if fifo else submit_shared
        cpu = cpu_meter(self.pool)
        cpu_before, started = cpu(), time.perf_counter()
        big = submit(self.store, self.batch(sizes.big, "bulk", "big"))
        wait_units(self.store, big, max(2, sizes.big // 10))
        small_at = time.perf_counter()
        small = submit(self.store, self.batch(sizes.small, "interactive", "small"))
        ended = wait_done(self.store, [small, big], self.pool)
        mode = "FIFO" if fifo else "sharing"
        wall = max(ended.values()) - started
        cpu_s = cpu() - cpu_before
        busy = sum(busy_seconds(self.store, b) for b in (small, big)) / (wall * self.workers)
        run = Behind(mode, ended[small] - small_at, wall, sizes.big + sizes.small, busy, cpu_s)
        return run, big

    def equal(self, units: int) -> float:
        """Two equal batches submitted together: |t1 − t2| / max(t1, t2) from the first submit."""
        started = time.perf_counter()
        ids = [submit_shared(self.store, self.batch(units, "scheduled", f"equal{i}")) for i in "ab"]
        ended = [t - started for t in wait_done(self.store, ids, self.pool).values()]
        console.print(f"equal batches done at {ended[0]:.2f}s and {ended[1]:.2f}s")
        return abs(ended[0] - ended[1]) / max(ended)

    def teams(self, blue_units: int) -> float:
        """Team red (weight 3, 3× the units) and blue (weight 1) submitted together: red's units
        over blue's that ended while both had units to run (the later first end to the earlier
        last end)."""
        red = self.batch(3 * blue_units, "bulk", "red")
        blue = self.batch(blue_units, "bulk", "blue")
        ids = [
            submit_shared(self.store, red, team="red", team_weight=3),
            submit_shared(self.store, blue, team="blue", team_weight=1),
        ]
        wait_done(self.store, ids, self.pool)
        red_ends, blue_ends = (unit_ends(self.store, b) for b in ids)
        start = max(red_ends[0], blue_ends[0])
        stop = min(red_ends[-1], blue_ends[-1])
        red_n, blue_n = units_in(red_ends, start, stop), units_in(blue_ends, start, stop)
        console.print(f"teams: over {stop - start:.1f}s, red {red_n} units, blue {blue_n}")
        return red_n / max(1, blue_n)


def measure(bench: Bench, sizes: Sizes, repeat: int, mario: bool) -> Figures:
    figures = Figures()
    bench.alone(sizes.small)  # warm-up: every worker child imports the workload
    figures.alone_s = [bench.alone(sizes.small) for _ in range(3)]
    console.print(f"alone: {', '.join(f'{s:.2f}s' for s in figures.alone_s)}")
    for round_ in range(repeat):
        for fifo in (round_ % 2 == 1, round_ % 2 == 0):  # alternated: load hits both alike
            run, big = bench.behind(sizes, fifo)
            figures.behind.append(run)
            if not fifo:
                figures.unit_s = unit_seconds(bench.store, big)
            console.print(
                f"{run.mode}: small {run.latency_s:.2f}s, all {run.wall_s:.2f}s, "
                f"pool busy {run.busy:.1%}, CPU {run.cpu_s:.1f}s"
            )
        if not mario:
            figures.spreads.append(bench.equal(sizes.equal))
            figures.team_ratios.append(bench.teams(sizes.blue))
            console.print(f"equal: {figures.spreads[-1]:.1%}; teams: {figures.team_ratios[-1]:.2f}")
    return figures


def verdict(ok: bool) -> str:
    return "[green]pass[/]" if ok else "[red]FAIL[/]"


def report(figures: Figures, sizes: Sizes, work: Work) -> Table:
    alone = statistics.median(figures.alone_s)
    shared = [b for b in figures.behind if b.mode == "sharing"]
    fifo = [b for b in figures.behind if b.mode == "FIFO"]
    latency = statistics.median(b.latency_s for b in shared)
    fifo_latency = statistics.median(b.latency_s for b in fifo)
    throughput = statistics.median(f.wall_s / s.wall_s for f, s in zip(fifo, shared, strict=True))
    unit = "episode" if work.workload == "mario" else "unit"
    table = Table(title=f"Sharing a pool of 2 worker processes ({work.workload})")
    for name in ("measure", "measured", "target", "result"):
        table.add_column(name, justify="left" if name in ("measure", "target") else "right")
    bound = 3 * alone + figures.unit_s
    table.add_row(
        f"{sizes.small}-{unit} interactive behind {sizes.big:,} bulk: time / alone",
        f"{latency / alone:.2f} ({latency:.2f}s / {alone:.2f}s)",
        f"≤ 3 + one {unit} ({figures.unit_s:.3f}s): ≤ {bound / alone:.2f}",
        verdict(latency <= bound),
    )
    table.add_row(
        "  (the same behind FIFO, for reference)",
        f"{fifo_latency / alone:.1f} ({fifo_latency:.2f}s)",
        "—",
        "",
    )
    if figures.spreads:
        spread = statistics.median(figures.spreads)
        table.add_row(
            f"two equal {sizes.equal}-{unit} batches: finish apart",
            f"{spread:.1%}",
            "≤ 10%",
            verdict(spread <= 0.10),
        )
    if figures.team_ratios:
        ratio = statistics.median(figures.team_ratios)
        table.add_row(
            f"teams 3:1 ({3 * sizes.blue} and {sizes.blue} {unit}s): throughput ratio",
            f"{ratio:.2f}",
            "3 ± 10% (2.7–3.3)",
            verdict(2.7 <= ratio <= 3.3),
        )
    table.add_row(
        "total throughput, sharing / FIFO (measure 1's work)",
        f"{throughput:.3f}",
        "≥ 0.95",
        verdict(throughput >= 0.95),
    )
    busy = statistics.median(s.busy / f.busy for f, s in zip(fifo, shared, strict=True))
    cpu = statistics.median(f.cpu_s / s.cpu_s for f, s in zip(fifo, shared, strict=True))
    table.add_row(
        "  steadier under load: pool busy running units, sharing / FIFO",
        f"{busy:.3f}",
        "—",
        "",
    )
    table.add_row("  steadier under load: CPU s for the work, FIFO / sharing", f"{cpu:.3f}", "", "")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every measure")
    parser.add_argument("--mario", action="store_true", help="Mario episodes (measures 1 and 4)")
    parser.add_argument("--max-steps", type=int, default=100, help="a Mario episode's steps")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args()
    if min(args.repeat, args.max_steps, args.workers) < 1:
        parser.error("--repeat, --max-steps and --workers must be at least 1")
    work = Work("mario" if args.mario else "bandit", args.max_steps)
    sizes = MARIO if args.mario else BANDIT
    load_before, started = os.getloadavg(), time.perf_counter()
    with bench_cluster(args.workers, console) as (store, pool):
        bench = Bench(store, pool, work, args.workers)
        figures = measure(bench, sizes, args.repeat, args.mario)
    console.print(report(figures, sizes, work))
    what = (
        f"Mario 1-1, {work.max_steps} steps at most, agent jump-right, sticky 0.25, chunk 1"
        if args.mario
        else "bandit, agent greedy, 5,000 pulls an episode, 10 units a chunk"
    )
    console.print(
        f"Ran: {what}; {args.workers} worker processes, {args.repeat} round(s) (medians), the "
        f"time alone the median of 3; {time.perf_counter() - started:.0f}s in all. Load average "
        f"(1 min) before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}; "
        f"{os.cpu_count()} cores."
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Redis and the workers are already stopped
        raise SystemExit(130) from None
