"""Steps/s of a worker process playing a checkpoint: K episodes one after another (one
observation per forward pass) against the same K episodes in lockstep (one pass per step).

Run from the repository root:
    .venv/bin/python bench/mario_batching.py [--episodes K] [--repeat R] [--max-steps S]
        [--device cpu|cuda] [--sandboxed] [--checkpoint PATH]

Without --checkpoint a PPO CnnPolicy trained 2,048 steps on the toy env of
tests/mario/sb3_models.py is built on the spot (NatureCNN, 84x84x4). The model is loaded once
(the process cache); each repeat plays K episodes of 1-1 (env seeds r*K .. r*K+K-1, sticky
actions 0.25) with `run_episode` and then with `run_lockstep` (workers/mario/batched.py), the
order alternated between repeats; steps/s of each, the median of paired ratios, and whether both
played the same actions. `--sandboxed`: the checkpoint in the agent sandbox's jailed process,
as the cluster runs it (bubblewrap needed).
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workers.mario.batched import agent_policy, run_lockstep
from workers.mario.protocol import MarioProtocol, action_names
from workers.mario.runner import run_episode
from workers.mario.sb3 import Preprocessing, load_checkpoint_agent


@contextlib.contextmanager
def opened(path: Path, device: str, sandboxed: bool) -> Iterator[Any]:
    if not sandboxed:
        yield load_checkpoint_agent(
            str(path), grayscale=True, resize=84, frame_stack=4, device=device
        )
        return
    from workers.sandbox.agent_sandbox import AgentLimits, AgentSource, untrusted_agent

    source = AgentSource(checkpoint=str(path), device=device)
    limits = AgentLimits(data_dir=Path(tempfile.mkdtemp()))
    with untrusted_agent(source, None, limits, step_timeout_s=60) as agent:
        yield agent


def one_by_one(agent: Any, protocol: MarioProtocol, seeds: list[int]) -> tuple[float, list[str]]:
    started, steps, logs = time.perf_counter(), 0, []
    for seed in seeds:
        outcome = run_episode("1-1", agent, protocol, seed, seed)
        steps += outcome.steps
        logs.append(outcome.actions)
    return steps / (time.perf_counter() - started), logs


def lockstep(agent: Any, protocol: MarioProtocol, seeds: list[int]) -> tuple[float, list[str]]:
    started = time.perf_counter()
    agent.reset(seed=seeds[0], actions=action_names(protocol.action_set))
    outcomes = run_lockstep("1-1", agent_policy(agent), Preprocessing(), protocol, seeds)
    steps = sum(o.steps for o in outcomes)
    return steps / (time.perf_counter() - started), [o.actions for o in outcomes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-steps", type=int, default=500)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--sandboxed", action="store_true")
    parser.add_argument("--checkpoint", type=Path)
    args = parser.parse_args()
    path = args.checkpoint
    if path is None:
        from tests.mario.sb3_models import build_checkpoint

        path = build_checkpoint(Path(tempfile.mkdtemp()) / "ppo", seed=1, learn_steps=2048)
    protocol = MarioProtocol(sticky_p=0.25, max_steps=args.max_steps)
    single: list[float] = []
    batched: list[float] = []
    same = True
    with opened(path, args.device, args.sandboxed) as agent:
        lockstep(agent, protocol, list(range(-args.episodes, 0)))  # warm-up: K emulators built
        for r in range(args.repeat):
            seeds = list(range(r * args.episodes, (r + 1) * args.episodes))
            arms = [one_by_one, lockstep] if r % 2 == 0 else [lockstep, one_by_one]
            got = {arm.__name__: arm(agent, protocol, seeds) for arm in arms}
            single.append(got["one_by_one"][0])
            batched.append(got["lockstep"][0])
            same = same and got["one_by_one"][1] == got["lockstep"][1]
            print(
                f"repeat {r + 1}: one by one {single[-1]:7.1f} steps/s   lockstep "
                f"{batched[-1]:7.1f} steps/s   ratio {batched[-1] / single[-1]:.3f}",
                flush=True,
            )
    ratios = [b / s for b, s in zip(batched, single, strict=True)]
    where = "jailed child" if args.sandboxed else "worker process"
    print(
        f"\n{platform.machine()}, Python {platform.python_version()}; checkpoint in the {where} "
        f"on {args.device}; {args.episodes} episodes of 1-1 per repeat, {args.repeat} repeats"
    )
    print(f"one by one (batch 1)     median {statistics.median(single):7.1f} steps/s")
    print(
        f"lockstep (batch <= {args.episodes:2d})  median {statistics.median(batched):7.1f} steps/s"
    )
    print(
        f"median of paired ratios {statistics.median(ratios):.3f}; same actions in both: "
        f"{'yes' if same else 'NO'}"
    )


if __name__ == "__main__":
    main()
