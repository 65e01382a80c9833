"""The slow path the runner must equal: a fresh env, plain `env.step` once per frame.

Written from the env's public behaviour and docs/mario.md's definitions, independently of
workers/mario/emulator.py: sticky actions as in the protocol, the step's info = env.step's info
of its last frame, max_x over the steps on the level's course (not in a room).

A room (bonus room, coin heaven, warp room) is told here by how the game itself brings Mario
into an area, read on the frame the area loads (the runner decides from the frame that starts
the change instead): its entry mode (RAM 0x0752) 1 drops him in from a pipe above, and mode 2
with the controller override on "up" (0x0758) climbs him in on a vine. Mode 2 alone (side pipes,
castle pipes), 0 (starts, flags, deaths, warp pipes) and 3 (out of coin heaven) are the course,
and so is any area Mario reaches from a room.
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
    infos: list[dict[str, Any]] = field(default_factory=list)  # each step's info (+ "room")
    screens: list[str] = field(default_factory=list)  # the screen after each step, hashed
    first: dict[str, Any] = field(default_factory=dict)  # the reset state's info
    frames: int = 0
    skipped: int = 0  # frames the env's own after-frame hacks ran
    lives_lost: int = 0
    done: bool = False

    def expected(self, level: str) -> dict[str, Any]:
        """The outcome fields, by docs/mario.md's definitions."""
        last = self.infos[-1]
        start = (self.first["world"], self.first["stage"])
        if level != "full-game":
            xs = [i["x_pos"] for i in self.course() if (i["world"], i["stage"]) == start]
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
        xs = [
            i["x_pos"]
            for i, lv in zip(self.infos, levels, strict=True)
            if lv == furthest and not i["room"]
        ]
        return {
            "completed": False,  # no test plays to the end of 8-4
            "world": furthest[0],
            "stage": furthest[1],
            "max_x": max(xs),
            "lives_lost": self.lives_lost,
            "levels_completed": len(set(levels) | {start}) - 1,
            "furthest_level": f"{furthest[0]}-{furthest[1]}",
            **self._common(last),
        }

    def course(self) -> list[dict[str, Any]]:
        """The steps on the course: not in a room."""
        return [i for i in self.infos if not i["room"]]

    def _common(self, last: dict[str, Any]) -> dict[str, Any]:
        return {
            "steps": len(self.infos),
            "frames": self.frames,
            "emulator_frames": self.frames + self.skipped,
            "coins": last["coins"],
            "time_remaining": last["time"],
        }


def reference_run(
    level: str,
    actions: bytes,
    protocol: MarioProtocol,
    env_seed: int,
    pokes: dict[int, dict[int, int]] | None = None,
) -> Reference:
    """`pokes`: {step: {RAM address: value}}, written before that step's first frame."""
    env = smb_env_class()(target=level_target(level))
    ref = Reference()
    advance, get_info = env._frame_advance, env._get_info
    area: dict[str, Any] = {"loaded": None, "room": False}

    def watch() -> None:
        """After every frame (the agent's and the env's own): a newly loaded area's kind."""
        ram = env.ram
        loaded = (int(ram[0x074E]), int(ram[0x074F]))  # the loaded area's type and index
        if loaded != area["loaded"]:
            mode, override = int(ram[0x0752]), int(ram[0x0758])
            entered = mode == 1 or (mode == 2 and override == 0x08)
            # Out of a room, Mario is back on the course (or in another world) whatever the mode.
            area["loaded"], area["room"] = loaded, entered and not area["room"]

    def counted(action: int) -> None:
        ref.skipped += 1
        advance(action)
        watch()

    def info_and_room() -> dict[str, Any]:
        watch()  # env.step reads the info after the agent's frame, before its hacks
        return {**get_info(), "room": area["room"]}

    env._frame_advance = counted
    env._get_info = info_and_room
    env.reset()
    ref.first = env._get_info()
    lives = ref.first["life"]
    buttons = action_bytes(protocol.action_set)
    sticky, previous = random.Random(env_seed), 0
    for step, action in enumerate(actions[: protocol.max_steps]):
        for address, value in (pokes or {}).get(step, {}).items():
            env.ram[address] = value
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
