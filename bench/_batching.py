"""Shared by bench/batch_agreement.py, bench/mario_batching.py and bench/gpu_host.py: real
observations from 1-1, and what a batched forward pass gives against one observation at a time."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from workers.mario.agents import JumpRightAgent, RandomAgent


class Recorder:
    """A built-in agent that keeps each decision's stacked observation, as a checkpoint sees it."""

    def __init__(self, agent: Any, stack: Any, kept: list[np.ndarray], limit: int) -> None:
        self.agent, self.stack, self.kept, self.limit = agent, stack, kept, limit

    def reset(self, **context: Any) -> None:
        self.stack.clear()
        self.agent.reset(**context)

    def act(self, observation: Any) -> int:
        if len(self.kept) < self.limit:
            self.kept.append(self.stack.push(observation["frame"]).copy())
        return int(self.agent.act(observation))


def record_observations(count: int, level: str = "1-1") -> np.ndarray:
    """`count` stacked 84x84x4 observations of real episodes of the level: jump-right and
    random agents of seeds 0, 1, ..., sticky actions 0.25 (so the episodes differ)."""
    from workers.mario.protocol import MarioProtocol, action_names
    from workers.mario.runner import run_episode
    from workers.mario.sb3 import FrameStack, Preprocessing

    kept: list[np.ndarray] = []
    protocol = MarioProtocol(sticky_p=0.25, max_steps=1000)
    stack = FrameStack(Preprocessing())
    seed = 0
    while len(kept) < count:
        agent = JumpRightAgent() if seed % 3 else RandomAgent()
        recorder = Recorder(agent, stack, kept, count)
        recorder.reset(seed=seed, actions=action_names("right_only"))
        run_episode(level, recorder, protocol, seed, seed)
        seed += 1
    random.Random(0).shuffle(kept)  # batches mix episodes, as a lockstep group's do
    return np.stack(kept)


def answers(model: Any, seen: np.ndarray, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Actions (`predict`, deterministic) and logits of every observation, `batch` at a time."""
    import torch

    policy = model.policy
    actions, logits = [], []
    with torch.no_grad():
        for start in range(0, len(seen), batch):
            chunk = seen[start : start + batch]
            action, _ = model.predict(chunk, deterministic=True)
            actions.append(np.asarray(action).reshape(-1))
            tensor, _ = policy.obs_to_tensor(chunk)
            logits.append(_logits(policy, tensor).cpu().numpy())
    return np.concatenate(actions), np.concatenate(logits)


def _logits(policy: Any, tensor: Any) -> Any:
    distribution = policy.get_distribution(tensor).distribution
    return distribution.logits if hasattr(distribution, "logits") else distribution.probs


def agreement(model: Any, seen: np.ndarray, batches: tuple[int, ...]) -> list[dict[str, Any]]:
    """Batch 1 against each batch size: actions that differ, rows whose logits are bit for bit
    equal, the largest logit difference, and the smallest gap between the best two logits."""
    single_actions, single_logits = answers(model, seen, 1)
    top = np.sort(single_logits, axis=1)
    gap = float((top[:, -1] - top[:, -2]).min()) if top.shape[1] > 1 else float("inf")
    rows = []
    for batch in batches:
        actions, logits = answers(model, seen, batch)
        rows.append(
            {
                "batch": batch,
                "observations": len(seen),
                "differ": int((actions != single_actions).sum()),
                "equal_rows": int((logits == single_logits).all(axis=1).sum()),
                "max_logit_diff": float(np.abs(logits - single_logits).max()),
                "min_gap": gap,
            }
        )
    return rows


def describe(row: dict[str, Any]) -> str:
    return (
        f"batch {row['batch']:3d}: {row['differ']} of {row['observations']} actions differ "
        f"from batch 1; logits bit-equal in {row['equal_rows']} rows, max difference "
        f"{row['max_logit_diff']:.3g} (smallest top-2 gap at batch 1: {row['min_gap']:.3g})"
    )
