"""The same checkpoint on `cpu` and `cuda`: equal actions on real Mario observations (issue 20).

Run on a GPU host, from the repository root, with no network:
    python bench/device_equivalence.py [--checkpoint PATH] [--observations 4096]

Observations are real: a fixed right/jump pattern plays levels 1-1, 1-2, ... through
`run_episode` and every decision's stacked, preprocessed frame is kept (the checkpoint's
preprocessing: 84x84 grayscale, 4 frames). Without --checkpoint an untrained PPO CnnPolicy of a
fixed seed is built on the spot (its logits are close together: the hardest case for ties).

Each observation is answered one at a time, as an agent does: the action (`predict`,
deterministic) and the logits, on the cpu and on cuda, first as Arena loads a checkpoint
(workers/mario/determinism.py: TF32 off, deterministic kernels) and then, for comparison, with
torch's GPU defaults put back (TF32 on in cuDNN and matmul, autotuning on). Prints how many
actions differ and the largest logit difference for each; exits 1 when Arena's setting lets any
action differ. Without a GPU it says so and compares the cpu with itself.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

LEVELS = [f"{w}-{s}" for w in range(1, 9) for s in range(1, 5)]


class Recorder:
    """right+B, and right+A+B for 8 of every 20 steps; keeps each stacked observation."""

    def __init__(self, stack: Any, kept: list[np.ndarray], limit: int) -> None:
        self.stack, self.kept, self.limit, self.t = stack, kept, limit, 0

    def reset(self, **_: Any) -> None:
        self.stack.clear()
        self.t = 0

    def act(self, observation: Any) -> int:
        if len(self.kept) < self.limit:
            self.kept.append(self.stack.push(observation["frame"]).copy())
        self.t += 1
        return 4 if self.t % 20 < 8 else 3  # right_only: 3 right+B, 4 right+A+B


def observations(count: int) -> np.ndarray:
    from workers.mario.protocol import MarioProtocol
    from workers.mario.runner import run_episode
    from workers.mario.sb3 import FrameStack, Preprocessing

    kept: list[np.ndarray] = []
    protocol = MarioProtocol(action_set="right_only", frame_skip=4, sticky_p=0.0)
    for level in LEVELS:
        if len(kept) >= count:
            break
        run_episode(level, Recorder(FrameStack(Preprocessing()), kept, count), protocol, 0, 0)
    return np.stack(kept[:count])


def answers(agent: Any, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each observation's action and logits, one observation at a time."""
    import torch

    policy = agent.model.policy
    actions, logits = [], []
    with torch.no_grad():
        for observation in seen:
            action, _ = agent.model.predict(observation, deterministic=True)
            tensor, _ = policy.obs_to_tensor(observation)
            logits.append(policy.get_distribution(tensor).distribution.logits.cpu().numpy()[0])
            actions.append(int(np.asarray(action).reshape(-1)[0]))
    return np.array(actions), np.stack(logits)


def gpu_defaults(torch: Any) -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = False
    torch.use_deterministic_algorithms(False)
    torch.set_float32_matmul_precision("high")


def compare(path: Path, seen: np.ndarray, devices: tuple[str, str], fast: bool) -> dict[str, Any]:
    import torch

    from workers.mario.sb3 import load_checkpoint_agent

    results = []
    for device in devices:
        agent = load_checkpoint_agent(
            str(path), grayscale=True, resize=84, frame_stack=4, device=device
        )
        if fast:
            gpu_defaults(torch)
        started = time.perf_counter()
        results.append((*answers(agent, seen), time.perf_counter() - started, agent.runtime))
    (a_actions, a_logits, a_s, a_rt), (b_actions, b_logits, b_s, b_rt) = results
    return {
        "differ": int((a_actions != b_actions).sum()),
        "max_logit_diff": float(np.abs(a_logits - b_logits).max()),
        "seconds": (a_s, b_s),
        "runtime": (a_rt, b_rt),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--observations", type=int, default=4096)
    args = parser.parse_args()
    import torch

    path = args.checkpoint
    if path is None:
        from tests.mario.sb3_models import build_checkpoint

        path = build_checkpoint(Path(tempfile.mkdtemp()) / "ppo", seed=1)
    cuda = torch.cuda.is_available()
    devices = ("cpu", "cuda") if cuda else ("cpu", "cpu")
    gpu = torch.cuda.get_device_name(0) if cuda else "none"
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"cuda {torch.version.cuda}, gpu {gpu}"
    )
    if not cuda:
        print("no CUDA device here: the cpu is compared with itself (run on a GPU host)")
    started = time.perf_counter()
    seen = observations(args.observations)
    print(f"{len(seen)} observations from {LEVELS[0]}.. in {time.perf_counter() - started:.1f}s")
    arena = compare(path, seen, devices, fast=False)
    print(
        f"{devices[0]} vs {devices[1]}, Arena's setting: {arena['differ']} of {len(seen)} "
        f"actions differ, max logit difference {arena['max_logit_diff']:.3g} "
        f"({arena['seconds'][0]:.1f}s, {arena['seconds'][1]:.1f}s)"
    )
    print(f"  runtime recorded: {arena['runtime'][1]}")
    if cuda:
        fast = compare(path, seen, devices, fast=True)
        print(
            f"{devices[0]} vs {devices[1]}, torch's GPU defaults (TF32 on): {fast['differ']} "
            f"of {len(seen)} actions differ, max logit difference "
            f"{fast['max_logit_diff']:.3g}"
        )
    return 1 if arena["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
