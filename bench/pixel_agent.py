"""A Mario agent for bench/agent_sandbox.py that reads the pixels and the info every step (as
tests/integration/test_agent_images.py's does), so a frame garbled on the way would change the
episode. Entry point `pixel_agent:make` (this folder is on the path of the bench script)."""

from __future__ import annotations

from typing import Any


class PixelAgent:
    def reset(self, *, seed: int, **context: Any) -> None:
        self.size, self.steps = len(context["actions"]), 0

    def act(self, observation: dict[str, Any]) -> int:
        self.steps += 1
        frame, info = observation["frame"], observation["info"]
        value = int(frame[::16, ::16].sum()) + info["x_pos"] + self.steps // 8
        return value % self.size


def make() -> PixelAgent:
    return PixelAgent()
