"""Small Stable-Baselines3 checkpoints built on the spot (never downloaded), for the tests.

`build_checkpoint` saves a CnnPolicy model whose spaces are those a Mario agent with the given
preprocessing needs: observations Box(0, 255, (channels * frame_stack, resize, resize), uint8),
actions Discrete(n_actions) (5: right_only). With learn_steps > 0 it first learns that many
steps on a toy env of random frames (rewarding action 1), so its weights are no longer the
initial ones. Needs the sb3 extra.
"""

from __future__ import annotations

import base64
import json
import pickle
import zipfile
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

RIGHT_ONLY_ACTIONS = 5


class ToyFrames(gymnasium.Env[np.ndarray, Any]):
    """Random uint8 frames of the given shape from a seeded generator; episodes of 32 steps."""

    def __init__(self, shape: tuple[int, ...], n_actions: int, seed: int = 0) -> None:
        self.observation_space = gymnasium.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gymnasium.spaces.Discrete(n_actions)
        self.rng = np.random.default_rng(seed)
        self.t = 0

    def _frame(self) -> np.ndarray:
        shape = self.observation_space.shape
        assert shape is not None
        return self.rng.integers(0, 256, shape, dtype=np.uint8)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._frame(), float(action == 1), False, self.t >= 32, {}


def build_checkpoint(
    path: str | Path,
    *,
    resize: int = 84,
    frame_stack: int = 4,
    learn_steps: int = 0,
    grayscale: bool = True,
    algorithm: str = "PPO",
    n_actions: int = RIGHT_ONLY_ACTIONS,
    seed: int = 0,
) -> Path:
    """Save a small model at `path` (".zip" added when missing, as SB3 does) and return it.

    Untrained by default (about a second with torch imported); PPO, A2C or DQN."""
    import stable_baselines3
    import torch

    channels = 1 if grayscale else 3
    env = ToyFrames((channels * frame_stack, resize, resize), n_actions, seed)
    algorithm_class = getattr(stable_baselines3, algorithm)
    # Small rollouts and buffers: a few hundred steps learn in seconds on one core.
    options: dict[str, Any] = {
        "PPO": {"n_steps": 64, "batch_size": 32, "n_epochs": 1},
        "A2C": {"n_steps": 8},
        "DQN": {"buffer_size": 1_000, "learning_starts": 32, "train_freq": 4},
    }[algorithm]
    # One thread: torch's default (all cores) is ~20x slower when another process holds a core.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = algorithm_class("CnnPolicy", env, seed=seed, device="cpu", verbose=0, **options)
        if learn_steps:
            model.learn(total_timesteps=learn_steps)
    finally:
        torch.set_num_threads(threads)
    target = Path(path)
    if target.suffix != ".zip":
        target = target.with_name(target.name + ".zip")
    model.save(target)
    return target


def with_pickle_payload(checkpoint: Path, target: Path, code: str) -> Path:
    """`checkpoint` written to `target` (it may be the same file) with a pickle in its `data`
    that runs `code` when SB3 loads it: what any checkpoint may do, SB3's format being pickles."""

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (exec, (code, {}))

    with zipfile.ZipFile(checkpoint) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"])
    serialized = base64.b64encode(pickle.dumps(Payload())).decode()
    data["payload"] = {":type:": "<class 'object'>", ":serialized:": serialized}
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(target, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return target
