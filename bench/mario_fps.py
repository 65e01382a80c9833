"""Frames per second of one worker process: run_episode vs the raw emulator, side by side.

Run from the repository root: .venv/bin/python bench/mario_fps.py [--repeat R] [--episodes E]
[--agent NAME] [--frame-skip N] [--level L].

The two run in lockstep, so that both see the same load on a shared machine: a built-in agent
plays E episodes (agent seeds 0..E-1) through `run_episode` (agent, reset, observations, info,
everything), and at each of its decisions the raw loop advances a second emulator of the same
level by the previous decision's frames, its controller byte written and nes_py's own
`_LIB.Step` called per frame (the second emulator restored to the level's start state at each
episode's start: it plays the same frames). The raw loop's time is taken off the episode's.
A repeat gives frames/s of each over its E episodes; the medians of R repeats are compared.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from typing import Any

from workers.mario.agents import BUILTIN
from workers.mario.emulator import Game
from workers.mario.protocol import MarioProtocol, action_bytes
from workers.mario.runner import run_episode


class Lockstep:
    """The agent, with the raw loop run (and timed) inside each decision."""

    def __init__(self, agent: Any, raw: Game, protocol: MarioProtocol) -> None:
        from nes_py.nes_env import _LIB

        self.agent, self.raw, self.restore = agent, raw, _LIB.Restore
        self.frame_skip, self.buttons = protocol.frame_skip, action_bytes(protocol.action_set)
        self.raw_s, self.raw_frames = 0.0, 0

    def reset(self, **context: Any) -> None:
        self.restore(self.raw._handle)
        self.previous: int | None = None
        self.agent.reset(**context)

    def act(self, observation: Any) -> int:
        if self.previous is not None:
            self.advance(self.previous)
        self.previous = action = int(self.agent.act(observation))
        return action

    def advance(self, action: int) -> None:
        emulate, handle, pad = self.raw._emulate, self.raw._handle, self.raw._pad
        button = self.buttons[action]
        started = time.perf_counter()
        for _ in range(self.frame_skip):
            pad[0] = button
            emulate(handle)
        self.raw_s += time.perf_counter() - started
        self.raw_frames += self.frame_skip


def repeat(args: argparse.Namespace, raw: Game, protocol: MarioProtocol) -> tuple[float, float]:
    """(raw frames/s, run_episode frames/s) over one repeat's episodes."""
    frames, wall_s = 0, 0.0
    lockstep = Lockstep(None, raw, protocol)
    for seed in range(args.episodes):
        lockstep.agent = BUILTIN[args.agent]()
        started, raw_before = time.perf_counter(), lockstep.raw_s
        outcome = run_episode(args.level, lockstep, protocol, 0, seed)
        wall_s += time.perf_counter() - started - (lockstep.raw_s - raw_before)
        frames += outcome.emulator_frames
        assert lockstep.previous is not None
        lockstep.advance(lockstep.previous)  # the last decision's frames
    return lockstep.raw_frames / lockstep.raw_s, frames / wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--agent", default="random", choices=sorted(BUILTIN))
    parser.add_argument("--frame-skip", type=int, default=4)
    parser.add_argument("--level", default="1-1")
    args = parser.parse_args()
    protocol = MarioProtocol(frame_skip=args.frame_skip, max_steps=1000)
    raw_game = Game(args.level)
    run_episode(args.level, BUILTIN[args.agent](), protocol, 0, 0)  # warm-up: builds the env
    raw: list[float] = []
    runner: list[float] = []
    for index in range(args.repeat):
        raw_fps, runner_fps = repeat(args, raw_game, protocol)
        raw.append(raw_fps)
        runner.append(runner_fps)
        print(
            f"repeat {index + 1}: raw {raw_fps:7.1f} fps   run_episode {runner_fps:7.1f} fps   "
            f"ratio {runner_fps / raw_fps:.3f}",
            flush=True,
        )
    ratios = [r / w for r, w in zip(runner, raw, strict=True)]
    print(
        f"\n{platform.machine()}, Python {platform.python_version()}; {args.agent} on "
        f"{args.level}, frame_skip {args.frame_skip}, {args.episodes} episodes per repeat, "
        f"{args.repeat} repeats"
    )
    print(f"raw emulator (_LIB.Step)  median {statistics.median(raw):7.1f} frames/s")
    print(f"run_episode               median {statistics.median(runner):7.1f} frames/s")
    print(
        f"ratio of medians {statistics.median(runner) / statistics.median(raw):.3f}   "
        f"median of paired ratios {statistics.median(ratios):.3f}   (target >= 0.97)"
    )


if __name__ == "__main__":
    main()
