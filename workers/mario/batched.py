"""Episodes of one checkpoint played in lockstep: one forward pass per step for all live episodes.

Under a protocol with `inference_batch: K > 1`, an agent's episodes on a level are played in
fixed groups of K consecutive episodes (tasks/workloads/mario.py puts each unit's group in its
payload). `run_lockstep` plays a group: K emulators of the level in this process, each episode
the same steps `run_episode` plays (runner.play_steps), and at each step the stacked
observations of the episodes still running go to the policy in one batch, packed in the group's
order. Each episode still ends as its own EpisodeOutcome: one unit's result.

The policy is the checkpoint's, asked with `{BATCH_KEY: batch}`: in the jailed child when
agents are sandboxed (the batch crosses the agent sandbox's shared memory; the child answers
the list of actions), or in this process when agents are trusted. The preprocessing (Arena's
own code) runs here. A group's outcomes are kept (GROUPS) for the group's other units that
this process runs next. docs/mario.md, "Batching".
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Generator, Hashable, Sequence
from typing import Any

import numpy as np

from workers.mario.agents import check_action
from workers.mario.emulator import Game, game_for
from workers.mario.protocol import MAX_INFERENCE_BATCH, MarioProtocol, action_names, check_level
from workers.mario.runner import EpisodeOutcome, play_steps
from workers.mario.sb3 import BATCH_KEY, SEED_KEY, FrameStack, Preprocessing

Batch = np.ndarray[Any, np.dtype[np.uint8]]
Policy = Callable[[Batch], Sequence[Any]]  # (n, *shape) uint8 -> n actions
Episode = Generator[dict[str, Any], int, EpisodeOutcome]

_pools: dict[str, list[Game]] = {}


def games_for(level: str, count: int) -> list[Game]:
    """`count` emulators of the level, built once per process (the first is game_for's)."""
    pool = _pools.setdefault(level, [game_for(level)])
    while len(pool) < count:
        pool.append(Game(level))
    return pool[:count]


def agent_policy(agent: Any, seed: int = 0) -> Policy:
    """A checkpoint agent (in process, sandboxed or on its host's inference process) as a batch
    policy. Each pass carries a seed of its own, drawn from the group's agent seed and the step:
    a pass draws the same whatever other groups the model answered between (a shared host
    interleaves groups; SB3's deterministic predict draws nothing, a custom policy might)."""
    passes = itertools.count()

    def policy(batch: Batch) -> Sequence[Any]:
        pass_seed = (seed + next(passes) * 0x9E3779B97F4A7C15) % 2**63
        actions = agent.act({BATCH_KEY: batch, SEED_KEY: pass_seed})
        if not isinstance(actions, list):
            raise ValueError(f"sb3: a batch of {len(batch)} observations got {actions!r}")
        return actions

    return policy


def run_lockstep(
    level: str,
    policy: Policy,
    preprocessing: Preprocessing,
    protocol: MarioProtocol,
    env_seeds: Sequence[int],
) -> list[EpisodeOutcome]:
    """Play one episode per env seed, in lockstep; the outcomes in the seeds' order.

    Every policy call gets the live episodes' observations (rows in seed order) and must return
    as many valid actions (InvalidAction, ValueError otherwise)."""
    check_level(level)
    count = len(env_seeds)
    if not 1 <= count <= MAX_INFERENCE_BATCH:
        raise ValueError(f"lockstep: {count} episodes; 1 to {MAX_INFERENCE_BATCH} play together")
    size = len(action_names(protocol.action_set))
    started = time.perf_counter()
    games = games_for(level, count)
    episodes = [
        play_steps(level, game, protocol, seed, None, started)
        for game, seed in zip(games, env_seeds, strict=True)
    ]
    stacks = [FrameStack(preprocessing) for _ in range(count)]
    outcomes: list[EpisodeOutcome | None] = [None] * count
    observed: dict[int, dict[str, Any]] = {}
    for index, episode in enumerate(episodes):
        _advance(index, episode, None, observed, outcomes)
    batch: Batch = np.empty((count, *preprocessing.shape), np.uint8)
    while observed:
        live = list(observed)
        for row, index in enumerate(live):
            batch[row] = stacks[index].push(observed[index]["frame"])
        actions = policy(batch[: len(live)])
        if len(actions) != len(live):
            raise ValueError(f"lockstep: {len(actions)} actions for {len(live)} observations")
        checked = [check_action(action, size) for action in actions]
        for index, action in zip(live, checked, strict=True):
            _advance(index, episodes[index], action, observed, outcomes)
    return [outcome for outcome in outcomes if outcome is not None]


def _advance(
    index: int,
    episode: Episode,
    action: int | None,
    observed: dict[int, dict[str, Any]],
    outcomes: list[EpisodeOutcome | None],
) -> None:
    """Send the episode its action (None: start it): its next observation, or its outcome."""
    try:
        observed[index] = next(episode) if action is None else episode.send(action)
    except StopIteration as ended:
        outcomes[index] = ended.value
        observed.pop(index, None)


class GroupCache:
    """The outcomes of the last groups this process played, for their other units."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._groups: OrderedDict[Hashable, tuple[list[EpisodeOutcome], Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[list[EpisodeOutcome], Any] | None:
        with self._lock:
            found = self._groups.get(key)
            if found is not None:
                self._groups.move_to_end(key)
            return found

    def put(self, key: Hashable, outcomes: list[EpisodeOutcome], runtime: Any) -> None:
        with self._lock:
            self._groups[key] = (outcomes, runtime)
            self._groups.move_to_end(key)
            while len(self._groups) > self.size:
                self._groups.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._groups.clear()


# A chunk holds one group's units (chunk_size_for): two cover a group split over two chunks.
GROUPS = GroupCache(2)

__all__ = ["GROUPS", "GroupCache", "agent_policy", "games_for", "run_lockstep"]
