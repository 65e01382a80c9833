"""The slow path the runner must equal: a fresh env, plain `env.step` once per frame.

Written from the env's public behaviour and docs/mario.md's definitions, independently of
workers/mario/emulator.py: sticky actions as in the protocol, the step's info = env.step's info
of its last frame, max_x over the steps in the level's starting area.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.mario.compat import smb_env_class
from workers.mario.protocol import MarioProtocol, action_bytes, level_target
from workers.mario.runner import decode_actions

LOGS = json.loads((Path(__file__).parent / "data" / "action_logs.json").read_text())


def logged(name: str) -> bytes:
    return decode_actions(LOGS[name]["actions"])


def screen_digest(screen: Any) -> str:
    return hashlib.sha1(screen.tobytes()).hexdigest()


@dataclass
class Reference:
    infos: list[dict[str, Any]] = field(default_factory=list)  # each step's info (+ "area")
    screens: list[str] = field(default_factory=list)  # the screen after each step, hashed
    first: dict[str, Any] = field(default_factory=dict)  # the reset state's info
    frames: int = 0
    skipped: int = 0  # frames the env's own after-frame hacks ran
    lives_lost: int = 0
    done: bool = False

    def expected(self, level: str) -> dict[str, Any]:
        """The outcome fields, by docs/mario.md's definitions."""
        last = self.infos[-1]
        start = (self.first["world"], self.first["stage"], self.first["area"])
        if level != "full-game":
            xs = [i["x_pos"] for i in self.infos if (i["world"], i["stage"], i["area"]) == start]
            return {
                "completed": bool(last["flag_get"]),
                "world": int(last["world"]),
                "stage": int(last["stage"]),
                "max_x": max(xs),
                "lives_lost": int(self.done and not last["flag_get"]),
                **self._common(last),
            }
        levels = [(int(i["world"]), int(i["stage"])) for i in self.infos]
        furthest = max(levels)
        there = [i for i, lv in zip(self.infos, levels, strict=True) if lv == furthest]
        # The furthest level's main area: the one of its first step.
        xs = [i["x_pos"] for i in there if i["area"] == there[0]["area"]]
        return {
            "completed": False,  # no test plays to the end of 8-4
            "world": furthest[0],
            "stage": furthest[1],
            "max_x": max(xs),
            "lives_lost": self.lives_lost,
            "levels_completed": len(set(levels) | {start[:2]}) - 1,
            "furthest_level": f"{furthest[0]}-{furthest[1]}",
            **self._common(last),
        }

    def _common(self, last: dict[str, Any]) -> dict[str, Any]:
        return {
            "steps": len(self.infos),
            "frames": self.frames,
            "emulator_frames": self.frames + self.skipped,
            "coins": last["coins"],
            "time_remaining": last["time"],
        }


def reference_run(level: str, actions: bytes, protocol: MarioProtocol, env_seed: int) -> Reference:
    env = smb_env_class()(target=level_target(level))
    ref = Reference()
    advance, get_info = env._frame_advance, env._get_info

    def counted(action: int) -> None:
        ref.skipped += 1
        advance(action)

    env._frame_advance = counted
    # The area pointer read at the same moment as the info (before env.step's hacks).
    env._get_info = lambda: {**get_info(), "area": int(env.ram[0x0750])}
    env.reset()
    ref.first = env._get_info()
    lives = ref.first["life"]
    buttons = action_bytes(protocol.action_set)
    sticky, previous = random.Random(env_seed), 0
    for action in actions[: protocol.max_steps]:
        for _ in range(protocol.frame_skip):
            if protocol.sticky_p and sticky.random() < protocol.sticky_p:
                button = previous
            else:
                button = buttons[action]
            previous = button
            _, _, ref.done, info = env.step(button)
            ref.frames += 1
            if info["life"] != lives:
                ref.lives_lost += int(info["life"]) == (int(lives) - 1) & 0xFF
                lives = info["life"]
            if ref.done:
                break
        ref.infos.append(info)
        ref.screens.append(screen_digest(env.screen))
        if ref.done:
            break
    env.close()
    return ref
