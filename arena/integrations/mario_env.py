"""A gymnasium env of the game a Mario protocol plays (docs/mario.md, "Evaluating while
training"): the same emulator loop as the runner (workers/mario/emulator.py: one step holds the
action for `frame_skip` frames, sticky actions, the level's end), RGB frames out (wrap it in
`workers.mario.sb3.MarioObservation` for the checkpoint's preprocessing), and a reward for
training: the progress to the right, each step's x change clipped to ±15, and -15 for dying."""

from __future__ import annotations

import random
from typing import Any

import gymnasium
import numpy as np

from workers.mario.emulator import Game
from workers.mario.protocol import MarioProtocol, action_bytes, check_level

Frame = np.ndarray[Any, np.dtype[np.uint8]]


class MarioEnv(gymnasium.Env[Frame, np.int64]):
    """One level (or the full game) under `protocol` (MarioProtocol or its fields; default
    the protocol's defaults): Discrete(len(action_set)) actions, (240, 256, 3) uint8 frames;
    terminated when the episode ends as the runner ends it, truncated at `max_steps`."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's attribute)

    def __init__(self, level: str = "1-1", protocol: MarioProtocol | dict[str, Any] | None = None):
        self.level = check_level(level)
        self.protocol = MarioProtocol.model_validate(protocol or {})
        self.buttons = action_bytes(self.protocol.action_set)
        self.action_space = gymnasium.spaces.Discrete(len(self.buttons))
        self.observation_space = gymnasium.spaces.Box(0, 255, (240, 256, 3), np.uint8)
        self.game: Game | None = None  # built at the first reset (skips the title screen)
        self.sticky = random.Random(0)
        self.steps, self.x = 0, 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Frame, dict[str, Any]]:
        super().reset(seed=seed)
        if self.game is None:
            self.game = Game(self.level)
        if seed is not None:
            self.sticky = random.Random(seed)
        info = self.game.reset()
        self.steps, self.x = 0, int(info["x_pos"])
        return self.game.screen.copy(), info

    def step(self, action: Any) -> tuple[Frame, float, bool, bool, dict[str, Any]]:
        game = self.game
        assert game is not None, "reset the env first"
        button = self.buttons[int(action)]
        _, info = game.step(button, self.protocol.frame_skip, self.protocol.sticky_p, self.sticky)
        self.steps += 1
        x = int(info.get("x_pos", self.x))
        reward = float(max(-15, min(15, x - self.x)))
        self.x = x
        ended = game.done or game.finished
        if ended and not info.get("flag_get"):
            reward -= 15.0
        truncated = not ended and self.steps >= self.protocol.max_steps
        return game.screen.copy(), reward, ended, truncated, info
