"""The Mario protocol: what a leaderboard's episodes have in common, and the game's levels.

Nothing here imports the emulator, so specs can be checked where the `mario` extra is missing.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

ActionSetName = Literal["right_only", "simple", "complex"]
FULL_GAME = "full-game"
LEVELS: tuple[str, ...] = tuple(f"{w}-{s}" for w in range(1, 9) for s in range(1, 5))

# The lists of gym_super_mario_bros.actions (RIGHT_ONLY, SIMPLE_MOVEMENT, COMPLEX_MOVEMENT),
# copied so that this module needs no emulator; a test checks they are still equal.
_RIGHT_ONLY = [["NOOP"], ["right"], ["right", "A"], ["right", "B"], ["right", "A", "B"]]
_SIMPLE = [*_RIGHT_ONLY, ["A"], ["left"]]
_COMPLEX = [
    *_SIMPLE,
    ["left", "A"],
    ["left", "B"],
    ["left", "A", "B"],
    ["down"],
    ["up"],
]
ACTION_SETS: dict[str, list[list[str]]] = {
    "right_only": _RIGHT_ONLY,
    "simple": _SIMPLE,
    "complex": _COMPLEX,
}
# The controller byte of each button (nes_py.wrappers.JoypadSpace's map).
BUTTON_BITS = {
    "right": 0b10000000,
    "left": 0b01000000,
    "down": 0b00100000,
    "up": 0b00010000,
    "start": 0b00001000,
    "select": 0b00000100,
    "B": 0b00000010,
    "A": 0b00000001,
    "NOOP": 0,
}


MAX_INFERENCE_BATCH = 32


def _single(inference_batch: int) -> bool:
    return inference_batch == 1


class MarioProtocol(BaseModel):
    """How episodes are played; part of a leaderboard's identity (two protocols never mix)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    # One step = one agent decision, held for frame_skip frames (at least one per game second).
    frame_skip: int = Field(default=4, ge=1, le=60)
    action_set: ActionSetName = "right_only"
    # Each frame, with this probability, the previous frame's buttons repeat (Machado et al.
    # 2018's evaluation default, 0.25, the Retro Contest's too): a deterministic agent's episodes
    # differ, so N episodes are N samples, not one replayed N times. 0 plays the deterministic
    # game; a protocol that says 0 keeps the fingerprint it had when 0 was the default
    # (docs/mario.md, "The evaluation protocol").
    sticky_p: float = Field(default=0.25, ge=0.0, lt=1.0)
    # 4,500 steps of 4 frames = 18,000 frames, the 2018 Retro Contest's cap.
    max_steps: int = Field(default=4500, ge=1, le=1_000_000)
    # How max_x is measured (docs/mario.md, "max_x and areas"): over the steps on the course,
    # wherever the game's area pointer is; rooms left out. Protocols before it had no such key
    # (max_x then followed RAM 0x0750): their fingerprints differ, so their boards stay apart.
    max_x_rule: Literal["course"] = "course"
    # How a checkpoint's policy is asked (docs/mario.md, "Batching"): 1, each episode alone (one
    # observation per forward pass); K > 1, an agent's episodes on a level in fixed groups of K
    # consecutive episodes played in lockstep, one forward pass per step for the group's live
    # episodes. A batched forward pass can differ from single ones in the logits' last bits, so
    # the mode is part of the protocol: two modes never share a board. Left out of the protocol
    # when 1, so the boards of every protocol before it keep their fingerprints.
    inference_batch: int = Field(default=1, ge=1, le=MAX_INFERENCE_BATCH, exclude_if=_single)


class LockstepGroup(BaseModel):
    """The episodes a unit is played with under `inference_batch: K > 1` (in its payload): the
    env seeds of its group's episodes in order, the agent seed the group's agent is reset with
    (its first episode's), and the unit's place in the group."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    env_seeds: list[int] = Field(min_length=1, max_length=MAX_INFERENCE_BATCH)
    agent_seed: int
    index: int = Field(ge=0)

    def check(self, env_seed: int, inference_batch: int) -> None:
        """ValueError unless the group fits the protocol and holds the unit's own episode."""
        if len(self.env_seeds) > inference_batch:
            raise ValueError(
                f"group: {len(self.env_seeds)} episodes, the protocol plays {inference_batch}"
            )
        if self.index >= len(self.env_seeds) or self.env_seeds[self.index] != env_seed:
            raise ValueError(f"group: episode {self.index} is not the unit's (env seed {env_seed})")


def action_names(action_set: ActionSetName) -> list[list[str]]:
    """The buttons of each action of the set (a fresh copy: agents may keep it)."""
    if action_set not in ACTION_SETS:
        raise ValueError(f"action_set: unknown {action_set!r}; one of {sorted(ACTION_SETS)}")
    return [list(buttons) for buttons in ACTION_SETS[action_set]]


def action_bytes(action_set: ActionSetName) -> tuple[int, ...]:
    """The controller byte of each action of the set."""
    return tuple(
        sum(BUTTON_BITS[button] for button in buttons) for buttons in action_names(action_set)
    )


def check_level(level: str) -> str:
    """The level if it is one of the game's ("1-1" .. "8-4") or the full game; else ValueError."""
    if level != FULL_GAME and level not in LEVELS:
        raise ValueError(f"level: unknown {level!r}; one of 1-1 .. 8-4 or {FULL_GAME!r}")
    return level


# A level as models take it: refused with the field's name when unknown.
Level = Annotated[str, AfterValidator(check_level)]


def level_target(level: str) -> tuple[int, int] | None:
    """(world, stage) for one stage; None for the full game."""
    if check_level(level) == FULL_GAME:
        return None
    world, stage = level.split("-")
    return int(world), int(stage)
