"""Distinct trajectories and the default evaluation protocol, on the real emulator: the frame
bytes counted from a stored result are the ones the emulator was given; a deterministic agent's
16 episodes of 1-1 are several trajectories under the default (sticky actions 0.25) and one under
sticky_p 0; a protocol that says sticky_p 0 keeps the board fingerprint it had when 0 was the
default. Before (c3f317a) the default was 0: a deterministic agent's N episodes were one
replayed N times, and nothing counted them."""

from __future__ import annotations

from typing import Any

import pytest

from examples.agents.stuck_jumper import make as stuck_jumper
from tasks.spec import derive_seed
from tasks.workloads import get_workload, validate_batch
from workers.agents import Agent
from workers.mario.agents import BUILTIN
from workers.mario.emulator import game_for
from workers.mario.protocol import MarioProtocol
from workers.mario.runner import encode_actions, run_episode
from workers.mario.trajectory import distinct_trajectories, frame_buttons

# The boards of this spec with `sticky_p: 0`, as the code before the default changed gave them
# for the spec without it (669666b, when 0 was the default).
DETERMINISTIC_BOARDS = {"mario-1-1": "3fb086280fa21811", "mario-4-2": "db5bc1b111b4138e"}


def boards(params: dict[str, Any]) -> dict[str, str]:
    spec = {
        "workload": "mario",
        "agents": ["right"],
        "items": ["1-1", "4-2"],
        "protocol": {"episodes": 4, "seed": 0},
        "params": {"max_steps": 300, **params},
    }
    return get_workload("mario").boards(validate_batch(spec, asker="operator"))


def test_a_deterministic_protocol_keeps_its_board() -> None:
    assert boards({"sticky_p": 0}) == DETERMINISTIC_BOARDS
    assert boards({}) == boards({"sticky_p": 0.25})  # the default: a protocol of its own
    assert set(boards({}).values()).isdisjoint(DETERMINISTIC_BOARDS.values())


@pytest.mark.parametrize(
    "protocol",
    [
        MarioProtocol(max_steps=100),
        MarioProtocol(sticky_p=0.0, max_steps=100),
        MarioProtocol(sticky_p=0.5, frame_skip=3, action_set="simple", max_steps=100),
    ],
)
def test_the_frame_bytes_are_the_ones_the_emulator_was_given(protocol: MarioProtocol) -> None:
    game = game_for("1-1")
    given: list[int] = []
    emulate = game._emulate

    def recording(handle: Any) -> None:
        given.append(int(game._pad[0]))
        emulate(handle)

    game._emulate = recording
    try:
        for name, seed in (("right", 1), ("jump-right", 2), ("random", 3)):
            given.clear()
            outcome = run_episode("1-1", BUILTIN[name](), protocol, seed, seed)
            assert frame_buttons(outcome.actions, outcome.frames, protocol, seed) == bytes(given)
    finally:
        game._emulate = emulate


def episodes(agent: type[Agent] | Any, protocol: MarioProtocol) -> list[tuple[str, int, int]]:
    """16 episodes of 1-1 with the env seeds a batch of master seed 0 gives them."""
    played = []
    for episode in range(16):
        seed = derive_seed(0, "env", "1-1", episode)
        outcome = run_episode("1-1", agent(), protocol, seed, 0)
        played.append((outcome.actions, outcome.frames, seed))
    return played


def test_a_deterministic_agent_plays_distinct_trajectories_under_the_default() -> None:
    """stuck_jumper reads nothing but the game: under sticky_p 0 its 16 episodes are one."""
    default, fixed = MarioProtocol(max_steps=40), MarioProtocol(sticky_p=0.0, max_steps=40)
    assert distinct_trajectories(episodes(stuck_jumper, default), default) >= 8
    assert distinct_trajectories(episodes(stuck_jumper, fixed), fixed) == 1


def test_a_log_and_a_frame_count_that_are_not_one_episode_are_refused() -> None:
    protocol = MarioProtocol()
    log = encode_actions(bytes([1, 1, 1]))
    assert len(frame_buttons(log, 9, protocol, 0)) == 9  # the last step ended after one frame
    for frames in (8, 13, 0):
        with pytest.raises(ValueError, match=f"frames: {frames} is not what 3 steps"):
            frame_buttons(log, frames, protocol, 0)
    with pytest.raises(ValueError, match="actions: an action outside the right_only set"):
        frame_buttons(encode_actions(bytes([7])), 4, protocol, 0)
    with pytest.raises(ValueError, match="actions: not an action log"):
        frame_buttons("not base64!", 4, protocol, 0)
