"""A Mario agent of your own, as Arena runs one: a Python entry point
(`examples.agents.stuck_jumper:make`), played in a sandbox of its own (docs/agents.md, "Where
agents run") that sees its observations and nothing of the machine.

It runs right in hops (a jump every few steps clears most enemies) and jumps again at once when
Mario has not moved on for a few steps (a pipe, a wall), holding each jump as long jumps need.
Deterministic: its episodes differ only by the protocol's sticky actions.
"""

from __future__ import annotations

from typing import Any

RIGHT_RUN, RIGHT_JUMP_RUN = 3, 4  # indices into every action set (right_only extends them)
STUCK_STEPS = 3  # steps without progress before it jumps
JUMP_STEPS = 10  # how long it holds A
RUN_STEPS = 4  # steps on the ground between hops


class StuckJumper:
    def reset(self, *, seed: int, **context: Any) -> None:
        self.best_x = 0
        self.still = 0
        self.jumping = 0
        self.running = 0

    def act(self, observation: dict[str, Any]) -> int:
        x = int(observation["info"]["x_pos"])
        if x > self.best_x:
            self.best_x, self.still = x, 0
        else:
            self.still += 1
        if self.jumping:
            self.jumping -= 1
            return RIGHT_JUMP_RUN
        self.running += 1
        if self.still >= STUCK_STEPS or self.running > RUN_STEPS:
            self.still, self.running, self.jumping = 0, 0, JUMP_STEPS
        return RIGHT_RUN  # A released for a step: Mario jumps again only after that


def make() -> StuckJumper:
    return StuckJumper()
