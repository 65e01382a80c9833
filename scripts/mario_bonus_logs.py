"""Record the bonus-room action logs of tests/mario/data/action_logs.json on the real emulator.

Run from the repository root: .venv/bin/python scripts/mario_bonus_logs.py [--write]

bonus-room-1-2: a greedy search over right_only jump lengths carries Mario to x 2,400 (each
segment, "run r steps, jump h steps", the one whose end survives a lookahead furthest;
backtracking a segment when none survives). bonus-room-6-2: the fixed pattern agent (right+B,
right+A+B for the last 8 of every 20 steps). Along either trajectory, the first step from which
holding down for 12 steps loads another area is a pipe into a bonus room: the log goes there,
holds down until the area changes, right until it changes back (the room's exit pipe), then
right+B for a few steps. The emulator is deterministic, so the logs come out the same each run
(the 1-2 search takes a few CPU-minutes). Without --write it prints each log's summary.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workers.mario.emulator import Game, loaded_area
from workers.mario.protocol import MarioProtocol, action_bytes
from workers.mario.runner import encode_actions, run_episode

LOGS = Path(__file__).resolve().parent.parent / "tests" / "mario" / "data" / "action_logs.json"
BUTTONS = action_bytes("complex")
NOOP, RIGHT, RIGHT_A, RIGHT_B, RIGHT_A_B, DOWN = 0, 1, 2, 3, 4, 10
SEGMENTS = (
    [
        [RIGHT_B] * r + [RIGHT_A_B] * h + [RIGHT_B] * 2
        for r in (0, 2, 4, 7)
        for h in (0, 1, 3, 5, 8, 12)
    ]
    + [[NOOP] * w for w in (4, 10)]
    + [[RIGHT] * 3 + [RIGHT_A] * h for h in (4, 9)]
)
LOOKAHEADS = [
    [RIGHT_B] * 6 + [RIGHT_A_B] * 8 + [RIGHT_B] * 4 + [RIGHT_A_B] * 10,
    [RIGHT_B] * 20,
    [NOOP] * 8 + [RIGHT_A_B] * 10 + [RIGHT_B] * 6,
]
_rng = random.Random(0)  # sticky_p is 0: never drawn


def play(game: Game, actions: list[int]) -> bool:
    """Step through the actions; False once Mario dies."""
    for action in actions:
        game.step(BUTTONS[action], 4, 0.0, _rng)
        if game.done:
            return False
    return True


def x_of(game: Game) -> int:
    return game.ram[0x6D] * 256 + game.ram[0x86]


def fresh(level: str, actions: list[int]) -> Game:
    game = Game(level)
    if not play(game, actions):
        raise RuntimeError(f"{level}: the prefix dies")
    return game


def ranked_segments(game: Game, skip: int) -> list[list[int]]:
    """The segments whose end survives a lookahead, furthest first (the emulator's one backup
    slot holds the segment's start)."""
    game.env._backup()
    scored = []
    for i, segment in enumerate(SEGMENTS):
        for lookahead in LOOKAHEADS:
            game.env._restore()
            game.done = False
            if not play(game, segment):
                break
            x = x_of(game)
            if play(game, lookahead):
                scored.append((x_of(game), x, -i))
                break
    game.env._restore()
    game.done = False
    scored.sort(reverse=True)
    return [SEGMENTS[-s[2]] for s in scored][skip:]


def greedy(level: str, target_x: int) -> list[int]:
    actions: list[int] = []
    chosen: list[tuple[list[int], int]] = []
    game, skip = fresh(level, actions), 0
    while x_of(game) < target_x:
        options = ranked_segments(game, skip)
        if not options:  # back one segment, to its next best
            last, skip = chosen.pop()
            actions, skip = actions[: len(actions) - len(last)], skip + 1
            game = fresh(level, actions)
            continue
        play(game, options[0])
        actions += options[0]
        chosen.append((options[0], skip))
        skip = 0
    return actions


def first_pipe(level: str, base: list[int]) -> int:
    """The first step of `base` from which holding down loads another area."""
    game = Game(level)
    for k, action in enumerate(base):
        game.env._backup()
        area = loaded_area(game.ram)
        for _ in range(12):
            if not play(game, [DOWN]):
                break
            if loaded_area(game.ram) != area:
                return k
        game.env._restore()
        game.done = False
        if not play(game, [action]):
            break
    raise RuntimeError(f"{level}: no pipe along the trajectory")


def through_the_room(level: str, base: list[int], tail: int) -> list[int]:
    k = first_pipe(level, base)
    actions = base[:k]
    game = fresh(level, actions)
    course = loaded_area(game.ram)
    while loaded_area(game.ram) == course:  # down the pipe
        actions.append(DOWN)
        play(game, [DOWN])
    room = loaded_area(game.ram)
    while loaded_area(game.ram) == room:  # right to the room's exit pipe
        actions.append(RIGHT)
        if not play(game, [RIGHT]):
            raise RuntimeError(f"{level}: Mario dies in the room")
    actions += [RIGHT_B] * tail
    # The log ends where the episode does (Mario may die on the way).
    protocol = MarioProtocol(sticky_p=0.0, action_set="complex", max_steps=len(actions))
    return actions[: run_episode(level, Script(actions), protocol, 0, 0).steps]


class Script:
    def __init__(self, actions: list[int]) -> None:
        self.actions = actions

    def reset(self, **context: object) -> None:
        self.i = 0

    def act(self, observation: object) -> int:
        self.i += 1
        return self.actions[self.i - 1]


def main() -> None:
    pattern = [RIGHT_A_B if i % 20 >= 12 else RIGHT_B for i in range(200)]
    made = {
        "bonus-room-1-2": through_the_room("1-2", greedy("1-2", 2400), tail=24),
        "bonus-room-6-2": through_the_room("6-2", pattern, tail=16),
    }
    logs = json.loads(LOGS.read_text())
    for name, actions in made.items():
        same = logs.get(name, {}).get("actions") == encode_actions(bytes(actions))
        print(f"{name}: {len(actions)} steps, {'as recorded' if same else 'NEW'}")
        if "--write" in sys.argv:
            logs.setdefault(name, {"about": "", "protocol": {}})
            logs[name].update(steps=len(actions), actions=encode_actions(bytes(actions)))
            logs[name]["protocol"] = {"action_set": "complex", "frame_skip": 4, "sticky_p": 0.0}
    if "--write" in sys.argv:
        LOGS.write_text(json.dumps(logs, indent=2) + "\n")


if __name__ == "__main__":
    main()
