"""A GPU host's Mario throughput against its emulator-only ceiling, GPU memory per process, and
cpu-vs-cuda action agreement (issue 25, item 4). No network needed; one command, about 5 min:

    python bench/gpu_host.py [--processes 16] [--seconds 40] [--group 8] [--observations 4096]
        [--checkpoint PATH]

Each phase runs P worker processes (spawned, started together on a barrier) for S seconds and
sums the steps (agent decisions) their episodes of 1-1 played (sticky actions 0.25, 500 steps
at most):

1. ceiling: the emulator and the runner alone: the checkpoint's own episodes (48, played on the
   cpu first) replayed from their action logs (`replay_episode`: no policy), the most this
   host's cores can step through the same frames;
2. cuda, one by one: the checkpoint loaded once per process on cuda, `run_episode` per episode
   (one observation per forward pass: `inference_batch: 1`);
3. cuda, lockstep: groups of `--group` episodes per process (`run_lockstep`, one forward pass
   per step: `inference_batch: K`). Target: >= 0.8x the ceiling.
4. cuda, shared: the same groups, every process asking the host's one inference process
   (workers/sandbox/inference_host.py: the checkpoint in its jailed child, as a cluster runs it
   under ARENA_SHARED_INFERENCE): one CUDA context for the host. Skipped where no jail starts.

Each process of 2-3 reports torch.cuda.max_memory_allocated and memory_reserved; nvidia-smi's
per-process memory (the CUDA context included) is printed when it is there: 16 processes in
2-3, one (the shared host's child) in 4. Then, in this
process, >= 4,096 real observations of 1-1 are answered on cpu and on cuda at batch 1 and in
batches of K: actions that differ, for each pair. Without a GPU the same runs on the cpu (the
CPU half: phases 1 and 2-3 on cpu, batch 1 against batched on cpu) and the output says so.
In 2-3 the checkpoint runs in the worker process, not the jail: the GPU work is the same.
Without --checkpoint, a PPO CnnPolicy trained 2,048 steps on a toy env is built on the spot.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, from anywhere

from bench._batching import agreement, answers, describe, record_observations

SHARED_MEMORY_MB = 16384  # the shared host's child: a CUDA context maps much more than it uses


def phase(
    arm: str, path: str, device: str, group: int, seconds: float, logs: list, barrier: Any
) -> dict:
    """One worker process's steps in `seconds` of the arm, and its GPU memory."""
    from workers.mario.batched import agent_policy, run_lockstep
    from workers.mario.protocol import MarioProtocol, action_names
    from workers.mario.runner import replay_episode, run_episode
    from workers.mario.sb3 import Preprocessing, load_checkpoint_agent

    protocol = MarioProtocol(sticky_p=0.25, max_steps=500)
    actions = action_names(protocol.action_set)
    agent: Any = None
    held = contextlib.ExitStack()
    if arm == "shared":  # the checkpoint in its host-wide jailed child, asked over its socket
        from workers.sandbox.agent_sandbox import AgentLimits, AgentSource
        from workers.sandbox.shared_agent import shared_agent

        limits = AgentLimits(memory_mb=SHARED_MEMORY_MB, data_dir=Path(tempfile.gettempdir()))
        source = AgentSource(checkpoint=path, device=device)  # type: ignore[arg-type]
        opened = shared_agent(source, None, limits, step_timeout_s=60, idle_s=10)
        agent = held.enter_context(opened)
    elif arm != "ceiling":
        agent = load_checkpoint_agent(path, grayscale=True, resize=84, frame_stack=4, device=device)
    run_lockstep("1-1", lambda b: [3] * len(b), Preprocessing(), protocol, list(range(group)))
    barrier.wait()  # every process warm (emulators built, model loaded): start together
    started, steps = time.perf_counter(), 0
    seed = os.getpid() * 1000 if arm != "ceiling" else os.getpid()
    while time.perf_counter() - started < seconds:
        if arm == "ceiling":  # the checkpoint's own episodes, replayed: no policy at all
            env_seed, log = logs[seed % len(logs)]
            steps += replay_episode("1-1", log, protocol, env_seed).steps
            seed += 1
        elif arm in ("lockstep", "shared"):
            agent.reset(seed=seed, actions=actions)
            seeds = list(range(seed, seed + group))
            policy = agent_policy(agent, seed)
            played = run_lockstep("1-1", policy, Preprocessing(), protocol, seeds)
            steps += sum(o.steps for o in played)
            seed += group
        else:
            agent.reset(seed=seed, actions=actions)
            steps += run_episode("1-1", agent, protocol, seed, seed).steps
            seed += 1
    wall_s = time.perf_counter() - started
    held.close()
    memory: dict[str, Any] = {}
    if arm not in ("ceiling", "shared") and device == "cuda":  # shared: no CUDA here at all
        import torch

        memory = {
            "allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
            "reserved_mib": torch.cuda.memory_reserved() / 2**20,
        }
    return {"pid": os.getpid(), "steps": steps, "wall_s": wall_s, **memory}


def _worker(queue: Any, *args: Any) -> None:
    try:
        queue.put(phase(*args))
    except Exception as error:  # e.g. the jail did not get CUDA: say so, not a hung phase
        queue.put({"error": f"{type(error).__name__}: {error}"})
        barrier = args[-1]
        barrier.abort()


def run_phase(arm: str, args: argparse.Namespace, device: str) -> list[dict]:
    context = multiprocessing.get_context("spawn")
    queue, barrier = context.Queue(), context.Barrier(args.processes)
    spec = (arm, str(args.checkpoint), device, args.group, args.seconds, args.logs, barrier)
    processes = [
        context.Process(target=_worker, args=(queue, *spec)) for _ in range(args.processes)
    ]
    for process in processes:
        process.start()
    smi = None
    if device == "cuda" and arm != "ceiling":
        time.sleep(min(args.seconds / 2 + 20, 60))  # during the run: the contexts are there
        smi = nvidia_smi()
    results = [queue.get(timeout=args.seconds + 300) for _ in processes]
    for process in processes:
        process.join()
    failed = sorted({r["error"] for r in results if "error" in r})
    if failed:
        print(f"{arm:10s} failed: {'; '.join(failed)[:600]}")
        return [{"rate": float("nan")}]
    rate = sum(r["steps"] / r["wall_s"] for r in results)
    print(f"{arm:10s} {args.processes} processes on {device}: {rate:8.1f} steps/s (host)")
    if results and "allocated_mib" in results[0]:
        allocated = [r["allocated_mib"] for r in results]
        reserved = [r["reserved_mib"] for r in results]
        print(
            f"           torch per process: max allocated {min(allocated):.0f}-{max(allocated):.0f}"
            f" MiB, reserved {min(reserved):.0f}-{max(reserved):.0f} MiB"
        )
    if smi:
        print(f"           nvidia-smi per process (CUDA context included): {smi}")
    return [{**r, "rate": rate} for r in results]


def episode_logs(path: Path, count: int = 48) -> list[tuple[int, str]]:
    """The checkpoint's own episodes (on cpu), as the ceiling replays them: the same frames."""
    from workers.mario.protocol import MarioProtocol
    from workers.mario.runner import run_episode
    from workers.mario.sb3 import load_checkpoint_agent

    load = {"grayscale": True, "resize": 84, "frame_stack": 4, "device": "cpu"}
    agent = load_checkpoint_agent(str(path), **load)
    protocol = MarioProtocol(sticky_p=0.25, max_steps=500)
    return [(s, run_episode("1-1", agent, protocol, s, s).actions) for s in range(count)]


def jail_refusal() -> str | None:
    from workers.sandbox.agent_sandbox import refusal

    return refusal()


def nvidia_smi() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    query = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"]
    try:
        lines = subprocess.run(query, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return f"failed: {error}"
    used = [line.split(",")[1].strip() for line in lines.splitlines() if "," in line]
    return f"{len(used)} processes: {', '.join(used)}" if used else "no compute processes seen"


def agreements(args: argparse.Namespace, cuda: bool) -> None:
    from workers.mario.sb3 import load_checkpoint_agent

    started = time.perf_counter()
    seen = record_observations(args.observations)
    print(f"{len(seen)} observations of 1-1 in {time.perf_counter() - started:.1f}s")
    load = {"grayscale": True, "resize": 84, "frame_stack": 4}
    devices = ("cpu", "cuda") if cuda else ("cpu",)
    models = {
        d: load_checkpoint_agent(str(args.checkpoint), device=d, **load).model for d in devices
    }
    for device, model in models.items():
        print(f"{device}: " + describe(agreement(model, seen, (args.group,))[0]))
    if cuda:
        for batch in (1, args.group):
            cpu, _ = answers(models["cpu"], seen, batch)
            gpu, _ = answers(models["cuda"], seen, batch)
            differ = int((cpu != gpu).sum())
            print(f"cpu vs cuda at batch {batch}: {differ} of {len(seen)} actions differ")
        single, _ = answers(models["cpu"], seen, 1)
        batched, _ = answers(models["cuda"], seen, args.group)
        print(f"cpu batch 1 vs cuda batch {args.group}: {int((single != batched).sum())} differ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--observations", type=int, default=4096)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    args.processes = args.processes or (16 if cuda else (os.cpu_count() or 1))
    if args.checkpoint is None:
        from tests.mario.sb3_models import build_checkpoint

        folder = Path(tempfile.mkdtemp())
        args.checkpoint = build_checkpoint(folder / "ppo", seed=1, learn_steps=2048)
    gpu = torch.cuda.get_device_name(0) if cuda else None
    print(
        f"{platform.node()}: {os.cpu_count()} cores, {platform.machine()}, Python "
        f"{platform.python_version()}, torch {torch.__version__}, cuda {torch.version.cuda}, "
        f"GPU {gpu or 'none'}"
    )
    if not cuda:
        print("NO GPU HERE: the CPU half only (the checkpoint on cpu); run this on a GPU host")
    if not args.skip_throughput:
        args.logs = episode_logs(args.checkpoint)
        ceiling = run_phase("ceiling", args, device)[0]["rate"]
        for arm in ("one-by-one", "lockstep", "shared"):
            if arm == "shared" and (why := jail_refusal()) is not None:
                print(f"shared     skipped: no jail starts here ({why})")
                continue
            rate = run_phase(arm, args, device)[0]["rate"]
            if not math.isnan(rate):
                print(f"{'':11s}{rate / ceiling:.3f}x the emulator-only ceiling (target >= 0.8x)")
    agreements(args, cuda)
    return 0


if __name__ == "__main__":
    sys.exit(main())
