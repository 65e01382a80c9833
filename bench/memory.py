"""Peak memory of one worker process per workload, of the reducer on 10,000 units, and of an
idle worker process, all in one run on the same machine (docs/performance.md, "Memory").

For each workload, a fresh embedded cluster (Redis, and a Celery worker with 1 prefork worker
process: bench/_cluster.py) runs one batch. The worker process's peak resident set (VmHWM of
/proc/PID/status) is read when the batch is done; its resident set before the batch (VmRSS,
after it started and settled) is the idle baseline. The worker's main process and the processes
the worker process starts (a race's build, pytest and ruff) are shown apart; the latter are
sampled every 20 ms, so a short peak may be missed. Batches:

- bandit: examples/bandit.yaml (5 agents × 2 bandits × 20 episodes of 2,000 pulls: 200 units);
- mario: examples/mario.yaml cut down: 2 agents (right, jump-right) × 2 episodes of 1-1, at most
  --mario-steps steps each;
- alympics: examples/alympics.yaml (the alympics_lite suite for the built-in agent);
- race: 4 agents' branches of the tests' Python sample repository (tests/race/projects.py, as
  bench/race_parallel.py): a baseline and 4 checks of build, pytest and ruff.

The reducer: a bandit batch of --reduce-units one-pull units is run in this process and its unit
results stored in a fresh embedded Redis as workers store them; then a new process (spawned, not
a Celery worker) imports the worker's code, and calls the reducer task's function
(tasks.units.reduce_batch: reads every result back, reduces, writes the board): its ru_maxrss
after the imports and after the reducer.

Run from the repository root: .venv/bin/python bench/memory.py [--only NAME,...]
[--mario-steps N] [--reduce-units N]. Figures in MiB (1 MiB = 1,048,576 bytes).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _cluster import bench_cluster, timed_batch  # beside this script
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.race.projects
ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("bandit", "mario", "alympics", "race")
SETTLE_S = 1.0  # after the worker process appears, before its idle size is read
SAMPLE_S = 0.02
console = Console()
if not console.is_terminal:
    console.width = max(console.width, 150)


# -- /proc ----------------------------------------------------------------------------------------
def status_kib(pid: int, field: str) -> int:
    """A `kB` line of /proc/PID/status (VmRSS, VmHWM); 0 once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def children(pid: int) -> list[int]:
    """Direct children of `pid` (scanning /proc: no kernel option needed)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    out, todo = [], children(pid)
    while todo:
        child = todo.pop()
        out.append(child)
        todo += children(child)
    return out


def mib(kib: float) -> str:
    return f"{kib / 1024:,.1f}"


class SubprocessSampler:
    """The largest resident set among the processes `pid` starts, sampled until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kib, self.seen = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SubprocessSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        known: set[int] = set()
        while not self._stop.wait(SAMPLE_S):
            for child in descendants(self.pid):
                known.add(child)
                self.peak_kib = max(self.peak_kib, status_kib(child, "VmRSS"))
        self.seen = len(known)


# -- batches --------------------------------------------------------------------------------------
def make_batch(workload: str, mario_steps: int, tmp: Path) -> Any:
    from tasks.spec import load_spec_file
    from tasks.workloads import validate_batch

    if workload == "race":
        from tests.race.projects import agent_spec_entries, make_python_repo

        repo = make_python_repo(tmp / "repo")
        branches = ["clean", "adds-tests", "breaks-test", "lint-errors"]
        spec = {
            "workload": "race",
            "task": "bench-memory",
            "repo": str(repo.path),
            "agents": agent_spec_entries(repo, branches),
        }
        return validate_batch(spec, asker="operator")  # a benchmark is the operator's run
    spec = load_spec_file(ROOT / "examples" / f"{workload}.yaml")
    if workload == "mario":
        spec["agents"] = ["right", "jump-right"]
        spec["protocol"]["episodes"] = 2
        spec["params"]["max_steps"] = mario_steps
    return validate_batch(spec)


@dataclass
class Peak:
    name: str
    batch: str
    units: int
    wall_s: float
    idle_kib: int  # the worker process's VmRSS before the batch
    peak_kib: int  # its VmHWM after
    main_kib: int  # the worker's main process's VmHWM after
    sub_kib: int  # the largest process the worker process started (sampled)
    subs: int  # how many it started
    note: str = ""


def worker_process(pool: subprocess.Popen[bytes], timeout_s: float = 120) -> int:
    """The pid of the (one) prefork worker process, once it exists and has settled."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = children(pool.pid)
        if found:
            time.sleep(SETTLE_S)
            return found[0]
        if pool.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the worker process did not start")
        time.sleep(0.1)


def one_workload(workload: str, mario_steps: int) -> Peak:
    """In a fresh process (spawned: a fresh Celery app per cluster): one batch of `workload` on a
    fresh cluster of 1 worker process."""
    with tempfile.TemporaryDirectory(prefix="arena-bench-mem-") as tmp:
        batch = make_batch(workload, mario_steps, Path(tmp))
        with bench_cluster(1, console) as (store, pool):
            pid = worker_process(pool)
            idle = status_kib(pid, "VmRSS")
            with SubprocessSampler(pid) as sampler:
                wall, batch_id = timed_batch(store, batch, pool)
            peak = status_kib(pid, "VmHWM")
            note = "" if pid in children(pool.pid) else "the worker process was replaced"
            main = status_kib(pool.pid, "VmHWM")
            info = store.batch(batch_id)
            if info is None or info.errors:
                raise RuntimeError(f"{workload} batch {batch_id} ended with errors")
            label = {
                "bandit": "examples/bandit.yaml",
                "alympics": "examples/alympics.yaml",
                "mario": f"1-1, 2 agents × 2 episodes, ≤ {mario_steps} steps",
                "race": "tests/race/projects.py, 4 branches",
            }[workload]
            return Peak(
                workload,
                label,
                info.total,
                wall,
                idle,
                peak,
                main,
                sampler.peak_kib,
                sampler.seen,
                note,
            )


def idle_only() -> Peak:
    """A fresh cluster of 1 worker process that runs nothing."""
    with bench_cluster(1, console) as (_, pool):
        pid = worker_process(pool)
        time.sleep(SETTLE_S)
        return Peak(
            "idle",
            "no batch",
            0,
            0.0,
            status_kib(pid, "VmRSS"),
            status_kib(pid, "VmHWM"),
            status_kib(pool.pid, "VmHWM"),
            0,
            0,
        )


# -- the reducer ----------------------------------------------------------------------------------
def store_results(units: int, data_dir: Path) -> tuple[str, str]:
    """A bandit batch of `units` one-pull units, run here; its results stored as workers store
    them, and the batch left `running` for a reducer. (The Redis URL, the batch id.)"""
    import math

    import redis

    from arena.embedded import start_redis
    from tasks.execute import execute_batch
    from tasks.provenance import provenance_of
    from tasks.store import Store
    from tasks.workloads import get_workload, validate_batch

    agents = ["random", "greedy", "epsilon-greedy", "ucb1", "thompson"]
    spec = {
        "workload": "bandit",
        "leaderboard": "bench-reduce",
        "agents": agents,
        "items": [{"name": "coin", "arms": [0.4, 0.6]}],
        "protocol": {"episodes": math.ceil(units / len(agents)), "seed": 0},
        "params": {"pulls": 1},
    }
    batch = validate_batch(spec)
    workload = get_workload("bandit")
    results = execute_batch(batch)
    sock = data_dir / "redis.sock"
    start_redis(data_dir, sock)  # stopped with the calling process (PR_SET_PDEATHSIG)
    url = f"unix://{sock}"
    store = Store(redis.Redis.from_url(url, decode_responses=True))
    store.start_batch(
        batch.normalised(),
        workload.name,
        workload.boards(batch),
        len(results),
        batch.identity,
        provenance_of(batch),
    )
    with store.r.pipeline(transaction=False) as pipe:
        for result in results:
            pipe.hset(store.k_units(batch.batch_id), result.unit_id, result.model_dump_json())
        pipe.execute()
    return url, batch.batch_id


def reduce_in_fresh_process(url: str, batch_id: str) -> tuple[int, int, str]:
    """In a spawned process: the worker's imports, then the reducer task's function.
    (ru_maxrss KiB after the imports, after the reducer, the reducer's answer.)"""
    os.environ["ARENA_REDIS_URL"] = url
    from tasks.app import configure
    from tasks.settings import ArenaSettings
    from tasks.units import reduce_batch  # what a worker process has imported

    configure(ArenaSettings(redis_url=url))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcome = reduce_batch(batch_id)  # the task's function, called here (no broker)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return before, after, str(outcome)


def reducer_peak(units: int) -> Peak:
    spawn = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory(prefix="arena-bench-mem-") as tmp,
        spawn.Pool(1) as pool,  # its Redis lives as long as this process
    ):
        url, batch_id = pool.apply(store_results, (units, Path(tmp)))
        with spawn.Pool(1) as reducer:
            t0 = time.perf_counter()
            before, after, outcome = reducer.apply(reduce_in_fresh_process, (url, batch_id))
            wall = time.perf_counter() - t0
    if outcome != "done":
        raise RuntimeError(f"the reducer answered {outcome!r}")
    return Peak("reducer", f"bandit, {units:,} one-pull units", units, wall, before, after, 0, 0, 0)


# -- main -----------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--only",
        default=",".join(("idle", *WORKLOADS, "reducer")),
        help="what to measure, comma-separated (default: all of "
        "idle,bandit,mario,alympics,race,reducer)",
    )
    parser.add_argument("--mario-steps", type=int, default=600, help="Mario step cap (600)")
    parser.add_argument(
        "--reduce-units", type=int, default=10_000, help="units of the reducer's batch (10000)"
    )
    args = parser.parse_args()
    chosen = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = set(chosen) - {"idle", *WORKLOADS, "reducer"}
    if unknown or not chosen:
        parser.error(
            f"--only: unknown {sorted(unknown)}; choose from idle, {', '.join(WORKLOADS)}, reducer"
        )
    if args.mario_steps < 1 or args.reduce_units < 1:
        parser.error("--mario-steps and --reduce-units must be at least 1")

    started = time.perf_counter()
    spawn = multiprocessing.get_context("spawn")  # a fresh Celery app per cluster
    peaks: list[Peak] = []
    for name in chosen:
        console.print(f"{name} …")
        if name == "reducer":
            peaks.append(reducer_peak(args.reduce_units))
            continue
        with spawn.Pool(1) as pool:
            if name == "idle":
                peaks.append(pool.apply(idle_only))
            else:
                peaks.append(pool.apply(one_workload, (name, args.mario_steps)))

    table = Table(
        title="Peak resident memory of one worker process (MiB), 1 worker process "
        "per fresh embedded cluster"
    )
    for column in (
        "workload",
        "batch",
        "units",
        "wall s",
        "before MiB",
        "peak MiB",
        "peak − before",
        "worker main MiB",
        "its subprocesses MiB",
    ):
        table.add_column(column, justify="left" if column in ("workload", "batch") else "right")
    for p in peaks:
        sub = f"{mib(p.sub_kib)} ({p.subs})" if p.subs else "—"
        name = p.name + (f" ({p.note})" if p.note else "")
        table.add_row(
            name,
            p.batch,
            f"{p.units:,}" if p.units else "—",
            f"{p.wall_s:.1f}" if p.wall_s else "—",
            mib(p.idle_kib),
            mib(p.peak_kib),
            mib(p.peak_kib - p.idle_kib),
            mib(p.main_kib) if p.main_kib else "—",
            sub,
        )
    console.print(table)
    console.print(
        "before: the worker process's VmRSS once started and settled (idle: the same, no batch "
        "run); peak: its VmHWM (peak resident set) after the batch; both count the pages it "
        "shares with the worker's main process (forked from it). worker main: the Celery "
        "worker's main process, VmHWM. its subprocesses: the largest VmRSS among the processes "
        "the worker process started (sampled every 20 ms; how many in brackets). reducer row: "
        "ru_maxrss of a new process (spawned, not a Celery worker) after importing tasks.units "
        "(before) and after calling reduce_batch on the stored results (peak); wall s includes "
        "that process's start and imports. Whole benchmark "
        f"{time.perf_counter() - started:.0f}s."
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
