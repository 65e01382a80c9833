"""The fast frame loop: the unwrapped SuperMarioBrosEnv, advanced without `env.step`.

`env.step` computes the reward and the full info (string joins over RAM, NumPy scalars) on every
frame; at 4 frames per decision that costs about 6% of the emulator's rate. Here each frame sets
the controller and calls the emulator's own step (`_LIB.Step`, what `env._frame_advance` does),
then reads the few RAM bytes that say whether the episode ended or one of the env's after-frame
hacks applies: the env's own `_did_step` runs only then. The info is read at step boundaries only,
from RAM as the env reads it (`read_info`). The result equals `env.step` frame by frame
(tests/mario/test_runner.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from workers.mario.compat import emulator_step, smb_env_class
from workers.mario.protocol import level_target

Frame = np.ndarray[Any, np.dtype[np.uint8]]

# RAM addresses, as gym_super_mario_bros.smb_env reads them.
PLAYER_STATE = 0x000E  # 0x06 dead, 0x0B dying, 0x08 normal; 0-5 and 7 "busy"
Y_VIEWPORT = 0x00B5  # > 1: falling below the screen (dying)
GAME_MODE = 0x0770  # 2: end of world
FLOAT_STATE = 0x001D  # 3: sliding down the flag pole
ENEMY_TYPES = slice(0x16, 0x1B)  # five enemy slots; Bowser 0x2D, flag pole 0x31 end a stage
AREA_TIMER = 0x06DE  # the env runs it down to 1 when it is between 1 and 255
LIVES = 0x075A  # 2, 1, 0, then 0xFF: game over
WORLD, STAGE = 0x075F, 0x075C  # zero-based
# The area the game has loaded: its type (0 water, 1 ground, 2 underground, 3 castle) and its
# index, both written only when an area loads. Not 0x0750, the area *pointer*: the game points it
# at the next pipe's or vine's destination as the course scrolls on (docs/mario.md).
AREA_TYPE, AREA_INDEX = 0x074E, 0x074F
WARP_ZONE = 0x06D6  # non-zero: the pipes are a warp zone's (they lead to another world)
VINE, DOWN_PIPE, CASTLE = 1, 3, 3  # 0x000E's Vine_AutoClimb and VerticalPipeEntry; a castle area


def loaded_area(ram: memoryview) -> int:
    """The loaded area as the game's area pointers number it (type << 5 | index): 1-1 is 0x25."""
    return ram[AREA_TYPE] << 5 | ram[AREA_INDEX]


def into_room(ram: memoryview, state: int) -> bool:
    """Whether an area the game loads now is a room (bonus room, coin heaven, warp room): Mario
    climbs a vine, or goes down a pipe that is neither a warp zone's nor a castle's (8-4's pipes
    lead on along the course). These are the pipes the game drops Mario from (its entry mode 1);
    side pipes, the intros' pipes, flags and deaths lead to the course."""
    if state == VINE:
        return True
    return state == DOWN_PIPE and ram[WARP_ZONE] == 0 and ram[AREA_TYPE] != CASTLE


def stage_over(ram: memoryview) -> bool:
    """The env's `_is_stage_over`: a flag pole or Bowser on screen and Mario sliding the pole."""
    return ram[FLOAT_STATE] == 3 and any(t in (0x2D, 0x31) for t in ram[ENEMY_TYPES])


def flag_get(ram: memoryview) -> bool:
    """The env's `_flag_get`: the end of a world, or of a stage."""
    return ram[GAME_MODE] == 2 or stage_over(ram)


def _digits(ram: memoryview, start: int, length: int) -> int:
    """The env's `_read_mem_range`: decimal digits, one per byte, joined as text."""
    digits = ram[start : start + length]
    if max(digits) <= 9:
        value = 0
        for digit in digits:
            value = value * 10 + digit
        return value
    return int("".join(map(str, digits)))  # a byte above 9 joins as two characters, as there


def read_info(ram: memoryview) -> dict[str, Any]:
    """The env's `_get_info()`, the same keys and values, read as plain ints.

    The env's own costs ~100 us a step once the emulator has run (NumPy scalars, cold caches):
    2% of the frame rate at 4 frames a step. tests/mario check both agree."""
    y, status = ram[0x03B8], ram[0x0756]
    return {
        "coins": _digits(ram, 0x07ED, 2),
        "flag_get": flag_get(ram),
        "life": ram[LIVES],
        "score": _digits(ram, 0x07DE, 6),
        "stage": (ram[STAGE] + 1) & 0xFF,  # uint8 there
        "status": "small" if status == 0 else "tall" if status == 1 else "fireball",
        "time": _digits(ram, 0x07F8, 3),
        "world": (ram[WORLD] + 1) & 0xFF,
        "x_pos": ram[0x006D] * 0x100 + ram[0x0086],
        "y_pos": (510 - y) & 0xFF if ram[Y_VIEWPORT] < 1 else 255 - y,  # wraps, as the env's
    }


class Game:
    """One emulator for one level (or the full game), reused across episodes by `reset`."""

    def __init__(self, level: str) -> None:
        target = level_target(level)
        self.single = target is not None
        self.env = smb_env_class()(target=target)
        env = self.env
        self._emulate: Callable[[int], None] = emulator_step()
        self._handle: int = env._env
        self.ram = memoryview(env.ram)  # indexing a memoryview gives Python ints, fast
        self._pad = memoryview(env.controllers[0])
        screen = env.screen.view()
        screen.flags.writeable = False
        self.screen: Frame = screen  # a live view of the emulator's screen, as env.step returns
        self.skipped = 0  # frames the env's own hacks ran (death, area and between-lives skips)
        advance = env._frame_advance

        def counted(action: int) -> None:
            self.skipped += 1
            advance(action)

        env._frame_advance = counted  # only the hacks call it; the fast path never does
        self.reset()

    def reset(self) -> dict[str, Any]:
        """Back to the level's start (the env's backup state); the reset state's info."""
        self.env.reset()
        self.last_button = 0  # what sticky actions repeat on the first frame
        self.skipped = 0
        self.lives_lost = 0
        self._lives = self.ram[LIVES]
        self.done = self.finished = False
        self._area, self._in_room = loaded_area(self.ram), False
        self.in_room = False  # as of the last info: Mario is in a room, off the course
        return read_info(self.ram)

    def step(
        self,
        button: int,
        frames: int,
        sticky_p: float,
        rng: random.Random,
        on_frame: Callable[[Frame], None] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Hold `button` for up to `frames` frames: (frames run, the env's info at the end).

        Sets `done` when the env would say done (single stage: death or flag; full game: game
        over) and `finished` when the full game's last level, 8-4, is cleared."""
        ram, pad, emulate, handle = self.ram, self._pad, self._emulate, self._handle
        single, last = self.single, self.last_button
        info: dict[str, Any] = {}
        n = 0
        while n < frames:
            n += 1
            # Sticky actions (Machado et al.): each frame the previous frame's buttons may repeat.
            if sticky_p and rng.random() < sticky_p:
                pad[0] = last
            else:
                pad[0] = last = button
            emulate(handle)
            state = ram[PLAYER_STATE]
            dying = state == 0x0B or ram[Y_VIEWPORT] > 1
            if single:
                self.done = dying or state == 0x06 or flag_get(ram)
            else:
                self._count_lives()
                self.done = ram[LIVES] == 0xFF
                # After 8-4 the game waits for a button forever; the env would skip on and hang.
                self.finished = ram[WORLD] == 7 and ram[STAGE] == 3 and flag_get(ram)
            if self.done or self.finished or n == frames:
                info = read_info(ram)  # as env.step's: before its after-frame hacks
                self._note_area()
            if self.done or self.finished:
                break
            # The env's after-frame hacks (`_did_step`), called only when one of them applies.
            timer = ram[AREA_TIMER]
            if (
                1 < timer < 255
                or state < 6
                or state == 7
                or (not single and (dying or ram[GAME_MODE] == 2))
            ):
                self._hacks(state)
                if not single:
                    self._count_lives()
            if on_frame is not None:
                on_frame(self.screen)
        if on_frame is not None and (self.done or self.finished):
            on_frame(self.screen)
        self.last_button = last
        return n, info

    def _hacks(self, state: int) -> None:
        """The env's `_did_step`. Pipes, vines, deaths and flags load areas only in here (the
        env skips their animations): note whether the area it loads is a room."""
        ram = self.ram
        # As the change starts. A room leads nowhere but back to the course or to another world
        # (even up coin heaven's own vine, back out): from a room, every area is the course.
        area, room = loaded_area(ram), not self._in_room and into_room(ram, state)
        self.env._did_step(False)
        if loaded_area(ram) != area:
            self._area, self._in_room = loaded_area(ram), room

    def _note_area(self) -> None:
        """At an info: whether Mario is in a room. An area loaded outside the hacks (none was
        measured) counts as the course."""
        if loaded_area(self.ram) != self._area:
            self._area, self._in_room = loaded_area(self.ram), False
        self.in_room = self._in_room

    def _count_lives(self) -> None:
        """Lives lost in the full game: every decrement of the counter (1-ups add back)."""
        lives = self.ram[LIVES]
        if lives != self._lives:
            if lives == (self._lives - 1) & 0xFF:
                self.lives_lost += 1
            self._lives = lives


_games: dict[str, Game] = {}


def game_for(level: str) -> Game:
    """This process's emulator for the level (built once: building skips the title screen)."""
    if level not in _games:
        _games[level] = Game(level)
    return _games[level]
