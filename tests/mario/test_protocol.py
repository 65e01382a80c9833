"""The protocol model, levels, action sets and what counts as an action (no emulator needed)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pydantic
import pytest

from workers.mario.agents import BUILTIN, InvalidAction, check_action
from workers.mario.protocol import (
    ACTION_SETS,
    BUTTON_BITS,
    FULL_GAME,
    LEVELS,
    MarioProtocol,
    action_bytes,
    action_names,
    check_level,
    level_target,
)
from workers.mario.runner import EpisodeOutcome


def test_defaults_and_identity() -> None:
    protocol = MarioProtocol()
    assert protocol.model_dump() == {
        "frame_skip": 4,
        "action_set": "right_only",
        "sticky_p": 0.25,  # Machado et al.'s evaluation default (tests/mario/test_trajectories.py)
        "max_steps": 4500,
        "max_x_rule": "course",
    }
    assert MarioProtocol.model_validate_json('{"sticky_p": 0, "max_steps": 10}').sticky_p == 0.0
    with pytest.raises(pydantic.ValidationError):
        protocol.frame_skip = 2  # type: ignore[misc]  # frozen: part of a leaderboard's identity


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"frame_skip": 0}, "frame_skip"),
        ({"frame_skip": 61}, "frame_skip"),
        ({"frame_skip": True}, "frame_skip"),
        ({"frame_skip": "4"}, "frame_skip"),
        ({"action_set": "everything"}, "action_set"),
        ({"sticky_p": 1.0}, "sticky_p"),
        ({"sticky_p": -0.1}, "sticky_p"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_steps": 1_000_001}, "max_steps"),
        ({"max_x_rule": "area"}, "max_x_rule"),  # the old rule is not played any more
        ({"episodes": 3}, "episodes"),
    ],
)
def test_bad_protocols_are_refused_naming_the_field(values: dict[str, Any], field: str) -> None:
    with pytest.raises(pydantic.ValidationError) as refused:
        MarioProtocol(**values)
    assert refused.value.errors()[0]["loc"] == (field,)


def test_levels() -> None:
    assert len(LEVELS) == 32 and LEVELS[0] == "1-1" and LEVELS[-1] == "8-4"
    assert level_target("4-2") == (4, 2) and level_target(FULL_GAME) is None
    for bad in ["9-1", "1-5", "0-1", "1-1 ", "full"]:
        with pytest.raises(ValueError, match="level"):
            check_level(bad)
    with pytest.raises(pydantic.ValidationError) as refused:
        EpisodeOutcome.model_validate({"level": "9-1"})
    assert ("level",) in [error["loc"] for error in refused.value.errors()]


def test_action_sets_are_the_packages_lists() -> None:
    actions = pytest.importorskip("gym_super_mario_bros.actions")
    joypad = pytest.importorskip("nes_py.wrappers")
    assert ACTION_SETS == {
        "right_only": actions.RIGHT_ONLY,
        "simple": actions.SIMPLE_MOVEMENT,
        "complex": actions.COMPLEX_MOVEMENT,
    }
    assert joypad.JoypadSpace._button_map == BUTTON_BITS
    assert action_bytes("right_only") == (0, 0x80, 0x81, 0x82, 0x83)
    names = action_names("simple")
    names[0].append("A")  # a copy: agents may keep and change it
    assert action_names("simple")[0] == ["NOOP"]


@pytest.mark.parametrize("action", [True, np.bool_(False), 1.0, np.float32(2), "1", None, -1, 5])
def test_invalid_actions(action: Any) -> None:
    with pytest.raises(InvalidAction):
        check_action(action, 5)


def test_valid_actions() -> None:
    assert check_action(np.int64(4), 5) == 4 and type(check_action(np.uint8(0), 5)) is int


def test_built_ins_are_seeded() -> None:
    def play(name: str, seed: int) -> list[int]:
        agent = BUILTIN[name]()
        agent.reset(seed=seed, level="1-1", action_set="simple", actions=action_names("simple"))
        return [agent.act({}) for _ in range(50)]

    assert play("random", 1) == play("random", 1) != play("random", 2)
    assert set(play("random", 1)) <= set(range(7))
    assert play("right", 1) == [1] * 50
    assert play("jump-right", 3) == play("jump-right", 3) != play("jump-right", 4)
    assert set(play("jump-right", 3)) == {3, 4}


def test_boards_written_under_the_old_max_x_rule_refuse_new_batches() -> None:
    # Before max_x followed the course (docs/mario.md, "max_x and areas") the params had no
    # max_x_rule: a board claimed then holds another protocol fingerprint than any new batch.
    from tasks.identity import protocol_fingerprint
    from tasks.submit import check_leaderboards
    from tasks.validation import InputError
    from tasks.workloads import validate_batch

    spec = {"workload": "mario", "agents": ["right"], "items": ["1-2"], "leaderboard": "nightly"}
    batch = validate_batch(spec)
    normalised = batch.normalised()
    assert normalised["params"]["max_x_rule"] == "course"
    old_params = {k: v for k, v in normalised["params"].items() if k != "max_x_rule"}
    old = protocol_fingerprint({**normalised, "params": old_params})
    assert batch.protocol_fingerprint != old

    class OldBoards:
        def leaderboard_protocol(self, name: str) -> str:
            return old

    with pytest.raises(InputError, match="'nightly-1-2' holds results of a different protocol"):
        check_leaderboards(OldBoards(), batch)  # type: ignore[arg-type]
