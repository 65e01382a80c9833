"""What the agent sandbox costs (issue 19): the same agents in the worker's own process and
sandboxed, side by side, as a worker runs units (execute_unit).

Run from the repository root: .venv/bin/python bench/agent_sandbox.py [--repeat R]
[--max-steps N] [--frame-skip K] [--starts S] [--sb3].

"In process" is a worker where no jail starts and the operator trusts its agents
(ARENA_TRUST_AGENTS=true, ARENA_BWRAP pointing nowhere): what every agent did before the sandbox.

1. Mario: a Python agent that reads the pixels every step (bench/pixel_agent.py) plays World 1-1
   at frame skip 4, in process and sandboxed, alternated R times; steps/s of each (the
   episode's own wall time), the medians compared (target: sandboxed >= 0.9x). The action logs of
   the two must be equal. --sb3 adds an untrained SB3 checkpoint (built on the spot).
2. Alympics: one agent of bench/tournament_agents.py plays the alympics_lite suite (13 match
   sets), alternated R times; match sets/s, medians compared (target: >= 0.5x); the results of
   the two must be equal.
3. Start: S fresh jails until the agent's side says it is ready (target: <= 100 ms), then the
   agent's import and factory in it (a standard-library agent, NumPy's first frame, torch and a
   checkpoint with --sb3), reported apart; then a unit's start in the warm jail (the last unit
   ended, a new unit child forked, the agent imported and made afresh in it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from scoring.alympics import GAMES
from tasks.execute import execute_unit
from tasks.settings import current_settings
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import Unit
from tasks.workloads.untrusted import agent_limits
from workers.sandbox import bwrap
from workers.sandbox.agent_process import AgentProcess
from workers.sandbox.agent_sandbox import POOL, AgentSource, plan_for

console = Console(soft_wrap=True)
MODES = ("in process", "sandboxed")


BWRAP = os.environ.get("ARENA_BWRAP")


def trusting(mode: str) -> None:
    """In process: as a worker where no jail starts and the operator trusts its agents."""
    inside = mode == "in process"
    os.environ["ARENA_TRUST_AGENTS"] = "true" if inside else "false"
    if inside:
        os.environ["ARENA_BWRAP"] = "/nonexistent/bwrap"
    elif BWRAP is None:
        os.environ.pop("ARENA_BWRAP", None)
    else:
        os.environ["ARENA_BWRAP"] = BWRAP
    bwrap.bwrap_path.cache_clear()  # probed once per process: again with the new setting
    bwrap._probe.cache_clear()


def mario_units(agents: list[Any], max_steps: int, frame_skip: int) -> list[Unit]:
    spec = {
        "workload": "mario",
        "agents": agents,
        "items": ["1-1"],
        "protocol": {"episodes": 1, "seed": 3},
        "params": {"frame_skip": frame_skip, "action_set": "right_only", "max_steps": max_steps},
    }
    return get_workload("mario").expand(validate_batch(spec))


def mario(args: argparse.Namespace, checkpoint: Path | None) -> None:
    agents: list[Any] = [{"name": "pixels", "entry_point": "pixel_agent:make"}]
    if checkpoint is not None:
        agents.append({"name": "sb3", "sb3": str(checkpoint)})
    units = mario_units(agents, args.max_steps, args.frame_skip)
    rates: dict[tuple[str, str], list[float]] = {}
    logs: dict[tuple[str, str], set[str]] = {}
    steps: dict[str, int] = {}
    for repeat in range(args.repeat + 1):  # the first round warms up: not counted
        for mode in MODES if repeat % 2 == 0 else MODES[::-1]:
            trusting(mode)
            for unit in units:
                result = execute_unit(get_workload("mario"), unit).result
                assert result.status == "ok", result.reason
                logs.setdefault((unit.agent, mode), set()).add(result.result["actions"])
                steps[unit.agent] = result.result["steps"]
                if repeat:
                    steps_s = result.result["steps"] / result.result["wall_s"]
                    rates.setdefault((unit.agent, mode), []).append(steps_s)
    for unit in units:
        assert logs[unit.agent, MODES[0]] == logs[unit.agent, MODES[1]], "episodes differ"
        inside, sandboxed = (statistics.median(rates[unit.agent, m]) for m in MODES)
        extra_ms = 1e3 / sandboxed - 1e3 / inside
        console.print(
            f"Mario {unit.agent}, frame skip {args.frame_skip}, {args.repeat} episodes each "
            f"of {steps[unit.agent]} steps: in process {inside:.0f} steps/s, sandboxed "
            f"{sandboxed:.0f} steps/s: {sandboxed / inside:.2f}x (per step +{extra_ms:.2f} ms)"
        )


def alympics(args: argparse.Namespace) -> None:
    spec = {
        "workload": "alympics",
        "agents": [{"name": "a7", "entry_point": "tournament_agents:agent_07"}],
        "items": list(GAMES),
        "protocol": {"seed": 1},
        "params": {"suite": "alympics_lite"},
    }
    workload = get_workload("alympics")
    units = workload.expand(validate_batch(spec))
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    results: dict[str, Any] = {}
    # Seconds of the multi-round and the one-shot match sets, by mode (each run's sum).
    kinds: dict[tuple[str, bool], list[float]] = {}
    for repeat in range(args.repeat + 1):
        for mode in MODES if repeat % 2 == 0 else MODES[::-1]:
            trusting(mode)
            started, done, took = time.perf_counter(), [], {True: 0.0, False: 0.0}
            for unit in units:
                unit_started = time.perf_counter()
                done.append(execute_unit(workload, unit).result)
                took[unit.payload["rounds"] > 1] += time.perf_counter() - unit_started
            wall = time.perf_counter() - started
            assert all(r.status == "ok" for r in done), [r.reason for r in done if r.reason]
            results[mode] = [r.result for r in done]
            if repeat:
                rates[mode].append(len(units) / wall)
                for multi, seconds in took.items():
                    kinds.setdefault((mode, multi), []).append(seconds)
    assert results[MODES[0]] == results[MODES[1]], "match sets differ"
    inside, sandboxed = (statistics.median(rates[m]) for m in MODES)
    moves = sum(u.payload["rounds"] * u.payload["episodes"] for u in units)
    extra_us = (len(units) / sandboxed - len(units) / inside) / moves * 1e6
    console.print(
        f"Alympics alympics_lite, 13 match sets ({moves:,} moves of the agent), {args.repeat} "
        f"runs each: in process {inside:.1f} match sets/s, sandboxed {sandboxed:.1f}: "
        f"{sandboxed / inside:.2f}x (+{extra_us:.1f} us a move)"
    )
    for multi, name in ((True, "multi-round"), (False, "one-shot")):
        here, there = (statistics.median(kinds[mode, multi]) for mode in MODES)
        console.print(
            f"  the {name} match sets: in process {here * 1e3:.1f} ms, sandboxed "
            f"{there * 1e3:.1f} ms: {here / there:.2f}x"
        )


def timed(process: AgentProcess, op: str, argument: Any) -> float:
    started = time.perf_counter()
    process.request(op, argument, 120)
    return time.perf_counter() - started


def starts(args: argparse.Namespace, checkpoint: Path | None) -> None:
    limits = agent_limits(current_settings())
    sources = {
        "a standard-library agent": AgentSource(entry_point="tournament_agents:agent_07"),
        "the pixel agent": AgentSource(entry_point="pixel_agent:make"),
    }
    if checkpoint is not None:
        sources["an SB3 checkpoint (torch)"] = AgentSource(checkpoint=str(checkpoint))
    ready: list[float] = []
    made: dict[str, list[float]] = {name: [] for name in sources}
    again: dict[str, list[float]] = {name: [] for name in sources}
    spare: dict[str, list[float]] = {name: [] for name in sources}
    frames: list[float] = []
    import numpy

    frame = {"frame": numpy.zeros((240, 256, 3), numpy.uint8), "info": {"x_pos": 0}}
    for _ in range(args.starts):
        for name, source in sources.items():
            process = AgentProcess(plan_for(source, limits), 120)
            try:
                ready.append(process.ready_s)
                made[name].append(timed(process, "make", source.make_request()))
                if name == "the pixel agent":  # NumPy comes in with the first frame
                    process.request("reset", {"seed": 1, "actions": [[]] * 5}, 120)
                    frames.append(timed(process, "act", process.encode(frame)))
                started = time.perf_counter()
                process.end_unit()
                process.request("make", source.make_request(), 120)
                again[name].append(time.perf_counter() - started)
                if source.entry_point:  # the spare: forked as the last unit ended
                    request = {**source.make_request(), "spare": True}
                    process.request("make", request, 120)
                    spare[name] += [unit_start(process, request) for _ in range(5)]
            finally:
                process.close()
    console.print(
        f"Start: jail ready (bwrap, Python, limits, filter) median {ms(ready)} of {len(ready)} "
        f"(min {min(ready) * 1e3:.0f}, max {max(ready) * 1e3:.0f}); then the agent's import and "
        f"factory: "
        + ", ".join(f"{name} {ms(values)}" for name, values in made.items())
        + f"; NumPy's import at the first frame {ms(frames)}; the next unit in the warm jail "
        "(end, fork, import, factory): "
        + ", ".join(f"{name} {ms(values)}" for name, values in again.items())
        + "; with a spare child and 5 ms between units (end, then make): "
        + ", ".join(f"{name} {ms(values)}" for name, values in spare.items() if values)
    )


def unit_start(process: AgentProcess, request: dict[str, object]) -> float:
    """A unit's end and the next one's make, 5 ms apart (the worker storing results), as a
    unit that uses the spare child sees them: the seconds of the two, not of the pause."""
    started = time.perf_counter()
    process.end_unit()
    ended = time.perf_counter()
    time.sleep(0.005)
    made = time.perf_counter()
    process.request("make", request, 120)
    return (ended - started) + (time.perf_counter() - made)


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-steps", type=int, default=400)
    parser.add_argument("--frame-skip", type=int, default=4)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--sb3", action="store_true", help="an SB3 checkpoint too (needs torch)")
    parser.add_argument("--only", choices=("starts", "mario", "alympics"), help="one part only")
    args = parser.parse_args()
    console.print(f"{platform.node()}: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = None
        if args.sb3:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            from tests.mario.sb3_models import build_checkpoint

            checkpoint = build_checkpoint(Path(folder) / "ppo.zip")
        for name, part in (("starts", starts), ("mario", mario)):
            if args.only in (None, name):
                part(args, checkpoint)
        if args.only in (None, "alympics"):
            alympics(args)
    POOL.clear()
    console.print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
