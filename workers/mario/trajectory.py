"""What an episode actually played, from its stored result: the controller byte the emulator was
given on every frame. The emulator is deterministic, so two episodes of a level with the same
frame bytes are the same trajectory, whatever their seeds; counting distinct ones says how many
independent episodes a row really rests on (docs/mario.md, "The evaluation protocol").

The frame bytes follow from the action log, the frames the episode ran and the sticky-action
draws, `random.Random(env_seed)`, one per frame when `sticky_p > 0` (emulator.Game.step): every
step holds its action for `frame_skip` frames but the last, which may end early. Nothing here
imports the emulator, so the reducer and the API count trajectories where it is not installed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import random
import zlib
from collections.abc import Iterable

from workers.mario.protocol import MarioProtocol, action_bytes


def encode_actions(actions: bytes | bytearray) -> str:
    return base64.b64encode(zlib.compress(bytes(actions), 9)).decode("ascii")


def decode_actions(actions: str) -> bytes:
    try:
        return zlib.decompress(base64.b64decode(actions, validate=True))
    except (binascii.Error, zlib.error, ValueError) as error:
        raise ValueError(f"actions: not an action log ({error})") from None


def frame_buttons(actions: str, frames: int, protocol: MarioProtocol, env_seed: int) -> bytes:
    """The controller byte of each frame the episode ran; ValueError naming the field when the
    log and the frame count cannot be one episode of the protocol."""
    log = decode_actions(actions)
    buttons = action_bytes(protocol.action_set)
    skip, steps = protocol.frame_skip, len(log)
    if any(a >= len(buttons) for a in log):
        raise ValueError(f"actions: an action outside the {protocol.action_set} set")
    last = frames - (steps - 1) * skip
    if steps == 0 or not 0 < last <= skip:
        raise ValueError(f"frames: {frames} is not what {steps} steps of {skip} frames run")
    held = [skip] * (steps - 1) + [last]
    if not protocol.sticky_p:
        return b"".join(bytes([buttons[a]]) * n for a, n in zip(log, held, strict=True))
    draw, p = random.Random(env_seed).random, protocol.sticky_p
    played, previous = bytearray(), 0  # before the first frame the buttons were none (NOOP)
    for action, n in zip(log, held, strict=True):
        button = buttons[action]
        for _ in range(n):
            if draw() >= p:  # else the previous frame's buttons repeat (emulator.Game.step)
                previous = button
            played.append(previous)
    return bytes(played)


def trajectory_key(actions: str, frames: int, protocol: MarioProtocol, env_seed: int) -> str:
    """A digest of the episode's frame bytes: equal for the same trajectory of a level."""
    played = frame_buttons(actions, frames, protocol, env_seed)
    return hashlib.blake2b(played, digest_size=16).hexdigest()


def distinct_trajectories(episodes: Iterable[tuple[str, int, int]], protocol: MarioProtocol) -> int:
    """How many different trajectories (actions, frames, env_seed) of one level are."""
    return len({trajectory_key(a, f, protocol, seed) for a, f, seed in episodes})
