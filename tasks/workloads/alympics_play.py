"""Playing one Alympics match set (a unit): the agent's strategy opened for the unit, then its
episodes against the baseline. A Python entry point plays them in lockstep blocks
(workers/games/lockstep.py: an instance of the agent per episode of a block, every call of a
round in one round trip to its sandbox); the other kinds one episode after another."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import cast

from tasks.spec import derive_seed
from tasks.workloads.alympics_agent import AlympicsAgent
from tasks.workloads.base import Unit
from tasks.workloads.llm_agents import BudgetSpent, ReplayIncomplete, llm_agent_for_unit
from tasks.workloads.untrusted import AgentSource, agent_for_unit, image_agent_for_unit
from workers.agents import entry_point_factory, load_entry_point
from workers.fingerprint import AgentFingerprint
from workers.games import BUILTIN, ForfeitWatch, opponent_lineup, play_episode
from workers.games import GAMES as GAME_CLASSES
from workers.games.base import EpisodeRecord, Strategy
from workers.games.lockstep import LOCKSTEP_EPISODES, play_lockstep
from workers.http_agent import HttpAgent
from workers.llm.agent import LlmAgent, LlmUsage, ReplayMiss, SpendingStopped
from workers.sandbox.agent_sandbox import SandboxedAgent
from workers.sandbox.agent_slots import SandboxedSlots


def play_match_set(
    agent: AlympicsAgent, unit: Unit, watch: ForfeitWatch
) -> tuple[list[EpisodeRecord], LlmUsage | None]:
    """Every episode of the unit's match set, and what an llm agent spent on them."""
    if agent.entry_point:
        return _play_lockstep(agent, unit, watch), None
    p = unit.payload
    game_class = GAME_CLASSES[p["game"]]
    records = []
    with open_strategy(agent, p["game"], unit) as strategy:
        usage = strategy.usage if isinstance(strategy, LlmAgent) else None
        try:
            for episode in range(p["episodes"]):
                players = [strategy, *opponent_lineup(p["game"], p["opponent"])]
                seed = derive_seed(unit.env_seed, episode)
                on_fault = partial(watch.fault, episode)
                records.append(
                    play_episode(game_class(p["rounds"]), players, seed, on_fault=on_fault)
                )
        except ReplayMiss as miss:
            raise ReplayIncomplete(str(miss)) from None
        except SpendingStopped as stopped:
            raise with_usage(BudgetSpent(str(stopped)), usage) from None
        except Exception as exc:
            with_usage(exc, usage)  # a forfeit's requests were paid for all the same
            raise
    return records, usage


def _play_lockstep(agent: AlympicsAgent, unit: Unit, watch: ForfeitWatch) -> list[EpisodeRecord]:
    """The episodes in blocks of LOCKSTEP_EPISODES played together, each by an agent of its
    own (the factory's, reset with the episode's seed), as each has baselines of its own."""
    p = unit.payload
    game_class, episodes = GAME_CLASSES[p["game"]], int(p["episodes"])
    count = min(episodes, LOCKSTEP_EPISODES)
    records: list[EpisodeRecord] = []
    with open_slots(agent, unit, count) as (block_of, flush):
        for first in range(0, episodes, count):
            block = range(first, min(first + count, episodes))
            agents = block_of(len(block))
            records += play_lockstep(
                [game_class(p["rounds"]) for _ in block],
                [[agents[e - first], *opponent_lineup(p["game"], p["opponent"])] for e in block],
                [derive_seed(unit.env_seed, e) for e in block],
                [partial(watch.fault, e) for e in block],
                flush,
            )
    return records


BlockOf = Callable[[int], Sequence[Strategy]]


@contextmanager
def open_slots(
    agent: AlympicsAgent, unit: Unit, count: int
) -> Iterator[tuple[BlockOf, Callable[[], None]]]:
    """The agent for blocks of up to `count` episodes played together, in its sandbox (in
    the worker when agents are trusted and no jail starts): what gives a block's agents, new
    ones for every episode, and what sends the calls queued for them."""
    assert agent.entry_point is not None
    entry_point = agent.entry_point
    source = AgentSource(entry_point=entry_point, slots=count)

    def in_process() -> BlockOf:
        factory = entry_point_factory(entry_point, unit.agent_fingerprint)
        return lambda size: [factory() for _ in range(size)]

    with agent_for_unit(source, unit, agent.timeout_s, in_process) as opened:
        if isinstance(opened, SandboxedAgent):
            # The unit child made `count` agents; it makes each slot's next at its next reset.
            slots = SandboxedSlots(opened, count)
            yield (lambda size: cast(Sequence[Strategy], slots.strategies[:size])), slots.flush
        else:
            yield opened, _nothing_queued


def _nothing_queued() -> None:
    """Agents in the worker's own process are called at once: nothing waits to be sent."""


@contextmanager
def open_strategy(agent: AlympicsAgent, game: str, unit: Unit) -> Iterator[Strategy]:
    """The unit's strategy for an agent that plays one episode at a time: an llm agent, an
    image's container, an HTTP client or a built-in, living exactly as long as the block."""
    if agent.llm is not None:
        with llm_agent_for_unit(agent.llm, unit) as model:
            yield model
        return
    if agent.image:
        with image_agent_for_unit(agent.image, unit, agent.timeout_s) as image:
            yield cast(Strategy, image)  # reset is called with keywords (games/episode.py)
        return
    strategy = make_strategy(agent, game, unit.agent_fingerprint)
    try:
        yield strategy
    finally:
        if isinstance(strategy, HttpAgent):
            strategy.close()


def make_strategy(
    agent: AlympicsAgent, game: str, fingerprint: AgentFingerprint | None = None
) -> Strategy:
    if agent.url:
        return HttpAgent(agent.url, agent.timeout_s)
    if agent.entry_point:
        strategy: Strategy = load_entry_point(agent.entry_point, fingerprint)
        return strategy
    return BUILTIN[game]()


def with_usage(exc: BaseException, usage: LlmUsage | None) -> BaseException:
    """`exc`, carrying what an llm agent spent so far into its unit's error result
    (tasks/execute.py reads `partial_result`)."""
    if usage is not None:
        exc.partial_result = {"llm": usage.as_dict()}  # type: ignore[attr-defined]
    return exc
