"""The built-in Mario agents, and what counts as an action.

Agents follow the contract of docs/agents.md: `reset(seed=..., level=..., action_set=...,
actions=[[buttons], ...])`, then `act({"frame": ..., "info": ...}) -> index into actions`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from workers.agents import Agent

# Indices that mean the same in every action set (each set extends RIGHT_ONLY).
RIGHT, RIGHT_RUN, RIGHT_JUMP_RUN = 1, 3, 4


class InvalidAction(ValueError):
    """An agent's action that is not an index into the action set."""


def check_action(action: Any, size: int) -> int:
    """The action as an int, or InvalidAction: only integers in range (no bools, no floats)."""
    if isinstance(action, bool | np.bool_) or not isinstance(action, int | np.integer):
        raise InvalidAction(f"action {action!r}: not an integer index into the action set")
    if not 0 <= action < size:
        raise InvalidAction(f"action {action!r}: out of range 0..{size - 1}")
    return int(action)


class RandomAgent:
    """Uniform over the action set."""

    def reset(self, *, seed: int, **context: Any) -> None:
        self.rng = random.Random(seed)
        self.size = len(context["actions"])

    def act(self, observation: Any) -> int:
        return self.rng.randrange(self.size)


class RightAgent:
    """Holds right."""

    def reset(self, *, seed: int, **context: Any) -> None:
        pass

    def act(self, observation: Any) -> int:
        return RIGHT


class JumpRightAgent:
    """Runs right, jumping: A held for 1-9 steps, then released for 1-4 (A must be released
    before Mario can jump again); the lengths are drawn from the seeded generator."""

    def reset(self, *, seed: int, **context: Any) -> None:
        self.rng = random.Random(seed)
        self.plan: list[int] = []

    def act(self, observation: Any) -> int:
        if not self.plan:
            hold, release = self.rng.randint(1, 9), self.rng.randint(1, 4)
            self.plan = [RIGHT_RUN] * release + [RIGHT_JUMP_RUN] * hold
        return self.plan.pop()


BUILTIN: dict[str, Callable[[], Agent]] = {
    "random": RandomAgent,
    "right": RightAgent,
    "jump-right": JumpRightAgent,
}
