"""max_x follows the course, not the area pointer (docs/mario.md, "max_x and areas").

Each outcome is checked field by field against tests/mario/reference.py (plain env.step, rooms
told by the game's own entry mode) and against the env's own info["x_pos"].
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")

from tests.mario.reference import LOGS, logged
from tests.mario.test_runner import Script, compare_with_reference
from workers.mario.emulator import game_for
from workers.mario.protocol import LEVELS, MarioProtocol


class Pattern:
    """The issue's fixed agent: right+B, and right+A+B for the last 8 of every 20 steps."""

    def reset(self, **context: Any) -> None:
        self.i = 0

    def act(self, observation: Any) -> int:
        self.i += 1
        return 4 if (self.i - 1) % 20 >= 12 else 3


# Measured with plain env.step: (max x_pos, steps). Every episode ends by itself within the cap
# but 2-2's and 7-2's (stuck at x 162 until the clock runs out, 2,005 steps); the cap keeps the
# test at about a CPU-minute and still covers every point where RAM 0x0750 changes (7-2's at
# step 14; the latest, 1-2's, at step 121).
CAP = 250
PATTERN = {
    "1-1": (708, 70),
    "1-2": (903, 164),
    "1-3": (420, 36),
    "1-4": (553, 53),
    "2-1": (642, 89),
    "2-2": (162, CAP),
    "2-3": (716, 66),
    "2-4": (344, 30),
    "3-1": (412, 41),
    "3-2": (357, 30),
    "3-3": (339, 29),
    "3-4": (274, 24),
    "4-1": (465, 52),
    "4-2": (345, 31),
    "4-3": (393, 33),
    "4-4": (138, 18),
    "5-1": (627, 53),
    "5-2": (460, 67),
    "5-3": (420, 36),
    "5-4": (344, 30),
    "6-1": (347, 33),
    "6-2": (814, 107),
    "6-3": (393, 33),
    "6-4": (518, 44),
    "7-1": (414, 51),
    "7-2": (162, CAP),
    "7-3": (716, 66),
    "7-4": (344, 30),
    "8-1": (339, 29),
    "8-2": (346, 52),
    "8-3": (848, 101),
    "8-4": (167, 15),
}
# Where the area pointer changed mid-course and the old rule stopped counting: (x, old max_x).
POINTER_MOVES = {
    "1-2": (548, 543),
    "3-1": (291, 288),
    "4-2": (342, 339),
    "5-2": (225, 222),
    "6-2": (811, 808),
    "7-1": (273, 270),
    "7-2": (104, 100),
    "8-1": (273, 270),
}


@pytest.mark.parametrize("level", LEVELS)
def test_max_x_is_the_course_maximum_on_every_level(level: str) -> None:
    outcome, ref = compare_with_reference(
        level, Pattern(), MarioProtocol(sticky_p=0.0, max_steps=CAP)
    )
    assert not any(info["room"] for info in ref.infos)  # no pipe or vine taken: all course
    assert (outcome.max_x, outcome.steps) == PATTERN[level]
    assert outcome.max_x == max(info["x_pos"] for info in ref.infos)
    if level in POINTER_MOVES:
        moved_at, old_rule = POINTER_MOVES[level]
        assert outcome.max_x > moved_at > old_rule


# The recorded logs that go down a pipe into a bonus room and out again: (level, the x of the
# step before the room, the room's x range, the x Mario comes out at, max_x).
ROOMS = [
    ("bonus-room-1-1", "1-1", 910, (24, 195), 2616, 2629),
    ("bonus-room-1-2", "1-2", 1652, (536, 708), 1848, 1946),
    ("bonus-room-6-2", "6-2", 308, (2072, 2244), 568, 717),
]


@pytest.mark.parametrize(
    ("name", "level", "down", "room", "out", "max_x"), ROOMS, ids=[r[0] for r in ROOMS]
)
def test_bonus_room_steps_do_not_count(
    name: str, level: str, down: int, room: tuple[int, int], out: int, max_x: int
) -> None:
    log = logged(name)
    protocol = MarioProtocol(sticky_p=0.0, action_set="complex", max_steps=len(log))
    outcome, ref = compare_with_reference(level, Script(log), protocol)
    assert outcome.steps == len(log) == LOGS[name]["steps"]
    xs = [info["x_pos"] for info in ref.infos]
    in_room = [info["x_pos"] for info in ref.infos if info["room"]]
    course = [info["x_pos"] for info in ref.infos if not info["room"]]
    # One stretch of room steps, its own x, between the pipe down and the pipe out.
    first = next(i for i, info in enumerate(ref.infos) if info["room"])
    assert all(info["room"] for info in ref.infos[first : first + len(in_room)])
    assert xs[first - 1] == down and (min(in_room), max(in_room)) == room
    assert xs[first + len(in_room)] == out
    assert outcome.max_x == max(course) == max_x
    if room[1] > max(course):  # 6-2: the room's x is past anything on the course so far
        assert outcome.max_x < max(xs)


class Climb(Pattern):
    """The pattern agent, writing `pokes` ({step: {address: value}}) to RAM before those steps."""

    def __init__(self, level: str, pokes: dict[int, dict[int, int]]) -> None:
        self.level, self.pokes = level, pokes

    def act(self, observation: Any) -> int:
        for address, value in self.pokes.get(self.i, {}).items():
            game_for(self.level).env.ram[address] = value
        return super().act(observation)


def test_a_vine_leads_into_a_room_and_from_the_room_back_to_the_course() -> None:
    # No log climbs a vine yet: 4-2's RAM is poked as the game sets it when Mario climbs a vine
    # off the top of the screen (engine routine 1, Vine_AutoClimb, with the area pointer at the
    # vine's destination): at step 20 into 4-2's warp room (0x2F), at step 40 from the room
    # back to the course (4-2's own area, page 3), which is the course again.
    pokes = {20: {0x0750: 0x2F, 0x000E: 1}, 40: {0x0750: 0x41, 0x0751: 3, 0x000E: 1}}
    outcome, ref = compare_with_reference(
        "4-2", Climb("4-2", pokes), MarioProtocol(sticky_p=0.0, max_steps=60), 0, pokes
    )
    assert [i for i, info in enumerate(ref.infos) if info["room"]] == list(range(20, 40))
    xs = [info["x_pos"] for info in ref.infos]
    assert max(xs[:20]) == 216 < max(xs[20:40]) == 259  # the room runs past the climb's x
    assert outcome.max_x == max(xs[:20] + xs[40:]) == 976
