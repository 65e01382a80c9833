"""One Mario episode: an agent on one level (or the full game), or a replay of an action log.

Randomness comes only from the agent's own seeded generator and from sticky actions, drawn from
`random.Random(env_seed)`: the emulator is deterministic, so the action log and env_seed replay
an episode bit for bit. Field definitions: docs/mario.md.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Generator
from typing import Any

from pydantic import BaseModel, ConfigDict

from workers.agents import Agent
from workers.mario.agents import check_action
from workers.mario.emulator import Frame, Game, game_for
from workers.mario.protocol import (
    FULL_GAME,
    Level,
    MarioProtocol,
    action_bytes,
    action_names,
    check_level,
    level_target,
)
from workers.mario.trajectory import decode_actions, encode_actions


class EpisodeOutcome(BaseModel):
    """What one episode produced; `actions` replays it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: Level  # "1-1" .. "8-4" or "full-game"
    completed: bool  # the flag (or axe) reached; full game: 8-4 cleared
    world: int  # where the episode ended; full game: the furthest level
    stage: int
    max_x: int  # the maximum x_pos of the steps on the level's course, rooms left out (mario.md)
    steps: int  # agent decisions
    frames: int  # frames the agent's buttons were held (env.step calls)
    emulator_frames: int  # frames + those the env skips itself (death, pipes, between lives)
    coins: int
    time_remaining: int  # the game clock at the end
    lives_lost: int
    wall_s: float
    levels_completed: int | None = None  # full game only
    furthest_level: str | None = None  # full game only
    actions: str  # base64 of the zlib-compressed action indices, one byte per step


def run_episode(
    level: str, agent: Agent, protocol: MarioProtocol, env_seed: int, agent_seed: int
) -> EpisodeOutcome:
    """Play one episode with the agent; its exceptions (InvalidAction included) propagate."""
    check_level(level)
    game = game_for(level)
    size = len(action_names(protocol.action_set))
    started = time.perf_counter()
    agent.reset(
        seed=agent_seed,
        level=level,
        action_set=protocol.action_set,
        actions=action_names(protocol.action_set),
    )

    def choose(observation: dict[str, Any]) -> int:
        return check_action(agent.act(observation), size)

    return _play(level, game, protocol, env_seed, choose, None, started)


def replay_episode(
    level: str,
    actions: str,
    protocol: MarioProtocol,
    env_seed: int,
    on_frame: Callable[[Frame], None] | None = None,
) -> EpisodeOutcome:
    """Play an action log again; the outcome equals the recorded one but for wall_s.

    on_frame gets the reset frame, then the frame after each frame the agent's buttons were
    held (the screen env.step would return), each a copy of its own (for GIF/MP4 replays)."""
    check_level(level)
    log = decode_actions(actions)
    size = len(action_names(protocol.action_set))
    for action in log:
        check_action(action, size)
    game = game_for(level)
    started = time.perf_counter()
    replayed = iter(log)

    def choose(observation: dict[str, Any]) -> int:
        # A log shorter than the episode it claims would otherwise end the replay silently.
        action = next(replayed, None)
        if action is None:
            raise ValueError("actions: the log ends before the episode does")
        return action

    copies = None if on_frame is None else lambda screen: on_frame(screen.copy())
    outcome = _play(level, game, protocol, env_seed, choose, copies, started)
    if outcome.steps != len(log):
        raise ValueError(f"actions: the episode ended after {outcome.steps} of {len(log)} steps")
    return outcome.model_copy(update={"actions": actions})


def _play(
    level: str,
    game: Game,
    protocol: MarioProtocol,
    env_seed: int,
    choose: Callable[[dict[str, Any]], int],
    on_frame: Callable[[Frame], None] | None,
    started: float,
) -> EpisodeOutcome:
    episode = play_steps(level, game, protocol, env_seed, on_frame, started)
    try:
        observation = next(episode)
        while True:
            observation = episode.send(choose(observation))
    except StopIteration as ended:
        outcome: EpisodeOutcome = ended.value
        return outcome


def play_steps(
    level: str,
    game: Game,
    protocol: MarioProtocol,
    env_seed: int,
    on_frame: Callable[[Frame], None] | None,
    started: float,
) -> Generator[dict[str, Any], int, EpisodeOutcome]:
    """One episode as a generator: it yields each decision's observation, is sent the action
    (an index already checked), and returns the outcome. `_play` drives one; the lockstep player
    (workers/mario/batched.py) drives several, so both play exactly these steps."""
    buttons = action_bytes(protocol.action_set)
    sticky = random.Random(env_seed)
    info = game.reset()
    if on_frame is not None:
        on_frame(game.screen)
    track = _Tracker(level, info)
    log = bytearray()
    frames = 0
    while len(log) < protocol.max_steps and not (game.done or game.finished):
        action = yield {"frame": game.screen, "info": info}
        log.append(action)
        ran, info = game.step(
            buttons[action], protocol.frame_skip, protocol.sticky_p, sticky, on_frame
        )
        frames += ran
        if track.step(info, game.in_room):
            break  # a warp zone left the single stage: cleared without its flag
    return track.outcome(
        game,
        info,
        steps=len(log),
        frames=frames,
        wall_s=time.perf_counter() - started,
        actions=encode_actions(log),
    )


class _Tracker:
    """max_x, the furthest level and the levels completed, from the steps' info."""

    def __init__(self, level: str, info: dict[str, Any]) -> None:
        self.level = level
        self.target = level_target(level)
        self.furthest = (int(info["world"]), int(info["stage"]))
        self.max_x: int | None = None
        self.levels_completed = 0
        self.warped = False

    def step(self, info: dict[str, Any], in_room: bool) -> bool:
        """Take one step's info (and whether Mario was in a bonus room, coin heaven or warp
        room then); True when the level changed under a single-stage episode."""
        here = (int(info["world"]), int(info["stage"]))
        if here > self.furthest:
            if self.target is not None:
                self.warped = True  # a warp zone: the stage is left, its flag never reached
                return True
            # A new level (a flag, an axe, or a warp zone): its own x from now on.
            self.furthest, self.max_x = here, None
            self.levels_completed += 1
        # The course counts wherever the game's area pointers are; a room's own x does not.
        if here == self.furthest and not in_room:
            x = int(info["x_pos"])
            self.max_x = x if self.max_x is None or x > self.max_x else self.max_x
        return False

    def outcome(self, game: Game, info: dict[str, Any], **fields: Any) -> EpisodeOutcome:
        world, stage = self.target or self.furthest
        if self.target is None:
            completed = game.finished
            full: dict[str, Any] = {
                "levels_completed": self.levels_completed + completed,
                "furthest_level": f"{world}-{stage}",
                "lives_lost": game.lives_lost,
            }
        else:
            completed = self.warped or bool(info["flag_get"])
            # A single stage ends at the death, before the game takes the life.
            full = {"lives_lost": int(game.done and not completed)}
        return EpisodeOutcome(
            level=self.level,
            completed=completed,
            world=world,
            stage=stage,
            max_x=self.max_x if self.max_x is not None else 0,
            emulator_frames=fields["frames"] + game.skipped,
            coins=int(info["coins"]),
            time_remaining=int(info["time"]),
            **full,
            **fields,
        )


__all__ = [
    "FULL_GAME",
    "EpisodeOutcome",
    "decode_actions",
    "encode_actions",
    "play_steps",
    "replay_episode",
    "run_episode",
]
