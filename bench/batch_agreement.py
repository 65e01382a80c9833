"""Batched against one-at-a-time policy calls on the same device: equal actions? (issue 25).

Run from the repository root:
    .venv/bin/python bench/batch_agreement.py [--observations 4096] [--batches 8,16,64]
        [--device cpu|cuda] [--checkpoint PATH]

Observations are real: jump-right and random agents play 1-1 (sticky actions 0.25) through
`run_episode`, and every decision's stacked 84x84x4 grayscale observation is kept, shuffled so a
batch mixes episodes. Each is answered at batch 1 and in batches of each size by `predict`
(deterministic), with Arena's determinism setting (workers/mario/determinism.py, one torch
thread on the cpu). Without --checkpoint two PPO CnnPolicy models are built on the spot:
untrained (seed 1; its logits lie close together: near ties) and trained a little (2,048 steps
on the toy env of tests/mario/sb3_models.py). Prints, per model and batch size, the actions
that differ, the rows whose logits are bit for bit equal and the largest difference. Exits 1
when any action differs.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

from bench._batching import agreement, describe, record_observations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=4096)
    parser.add_argument("--batches", default="8,16,64")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--checkpoint", type=Path)
    args = parser.parse_args()
    import torch

    from tests.mario.sb3_models import build_checkpoint
    from workers.mario.sb3 import load_checkpoint_agent

    batches = tuple(int(b) for b in args.batches.split(","))
    started = time.perf_counter()
    seen = record_observations(args.observations)
    print(f"{len(seen)} observations of 1-1 in {time.perf_counter() - started:.1f}s")
    folder = Path(tempfile.mkdtemp())
    models = (
        {"given": args.checkpoint}
        if args.checkpoint
        else {
            "untrained PPO": build_checkpoint(folder / "untrained", seed=1),
            "PPO trained 2,048 steps": build_checkpoint(
                folder / "trained", seed=1, learn_steps=2048
            ),
        }
    )
    differ = 0
    for name, path in models.items():
        agent = load_checkpoint_agent(
            str(path), grayscale=True, resize=84, frame_stack=4, device=args.device
        )
        print(f"{name} on {agent.runtime['device']} ({agent.runtime.get('gpu') or 'no GPU'}):")
        for row in agreement(agent.model, seen, batches):
            print("  " + describe(row))
            differ += row["differ"]
    print(
        f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s)"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
