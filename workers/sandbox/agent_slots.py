"""A sandboxed agent playing a block of episodes together (workers/games/lockstep.py): an
instance of the agent per episode slot in its unit child, and the calls of every slot of a
phase sent in one request (`many`), answered one by one in order, each within the step timeout
of the answer before it (workers/sandbox/agent_process.py, AgentProcess.finish).

What travels is what a single agent's `act` sends (workers/agent_wire.py), slot by slot: each
slot has its own Observations (only what changed since its last observation) and never the
shared memory, which holds one array at a time (a Mario frame; games have none).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from workers.agent_wire import Layout, Observations
from workers.sandbox.agent_faults import AgentFault, value_of
from workers.sandbox.agent_sandbox import SandboxedAgent


def _not_shared(_: Any) -> Layout | None:
    return None


@dataclass(frozen=True)
class _Raised:
    """A call's answer that is an exception (an agent may return an exception's text, never
    an exception: answers are JSON)."""

    exception: Exception


class SandboxedSlots:
    """The `count` instances of a sandboxed agent its unit child made (AgentSource.slots) and
    the calls queued for them until `flush`. A fault that ends the agent's process while it
    answers a `many` (it exits, is killed, is past a step timeout) faults every call of it,
    the ones it had answered too: the same calls fault however its answers were grouped on
    their way (agent_child.answer_many)."""

    def __init__(self, agent: SandboxedAgent, count: int) -> None:
        self.process, self.step_timeout_s = agent.process, agent.step_timeout_s
        self._queued: list[tuple[str, int, Any]] = []
        # The `many` requests in flight, oldest first: how many calls each, or why it could
        # not be sent (its process dead, its socket closed).
        self._in_flight: deque[int | tuple[int, AgentFault]] = deque()
        self._outcomes: deque[Any] = deque()  # the answers (or faults) of the oldest, read
        self.strategies = [SandboxedSlot(self, slot, agent.label) for slot in range(count)]

    def queue(self, call: str, slot: int, argument: Any) -> None:
        self._queued.append((call, slot, argument))

    def flush(self) -> None:
        """Send the queued calls in one request (while the one before may be in flight)."""
        if not self._queued:
            return
        calls, self._queued = self._queued, []
        try:
            self.process.begin("many", calls, answers=len(calls))
        except AgentFault as fault:
            self._in_flight.append((len(calls), fault))
        else:
            self._in_flight.append(len(calls))

    def answer(self) -> Any:
        """The next queued call's answer, in the order they were queued."""
        if not self._outcomes:
            sent = self._in_flight.popleft()
            if isinstance(sent, tuple):
                self._outcomes.extend([_Raised(sent[1])] * sent[0])
            else:
                self._read_all(sent)
        outcome = self._outcomes.popleft()
        if isinstance(outcome, _Raised):
            raise outcome.exception
        return outcome

    def _read_all(self, count: int) -> None:
        """Every answer of the oldest `many` in flight, each within the step timeout of the one
        before: a value, or what the call raised (the others stand); a fault that ends the
        process faults every call of it."""
        try:
            answers = self.process.finish_many(count, self.step_timeout_s)
        except Exception as fault:
            self._outcomes.extend([_Raised(fault)] * count)
            return
        for answer in answers:
            try:
                self._outcomes.append(value_of(answer, self.process.memory_mb))
            except Exception as raised:  # what the agent raised, as it raised it
                self._outcomes.append(_Raised(raised))


class SandboxedSlot:
    """One episode slot of SandboxedSlots, asked in halves (workers/games/lockstep.py)."""

    def __init__(self, slots: SandboxedSlots, slot: int, label: str) -> None:
        self.slots, self.slot, self.label = slots, slot, label
        self.observations = Observations(_not_shared)

    def begin_reset(self, **context: Any) -> None:
        self.slots.queue("reset", self.slot, context)

    def finish_reset(self) -> None:
        self.slots.answer()

    def begin_act(self, observation: Any) -> None:
        kind, payload, _ = self.observations.encode(observation)
        self.slots.queue("act", self.slot, (kind, payload))

    def begin_act_in(self, game: Any, player: int) -> None:
        """begin_act of the player's observation, encoded from the game without building it
        (Observations.encode_game): what the agent's side makes of it is the same."""
        kind, payload, _ = self.observations.encode_game(game, player)
        self.slots.queue("act", self.slot, (kind, payload))

    def finish_act(self) -> Any:
        return self.slots.answer()

    def reset(self, **context: Any) -> None:  # the Strategy protocol; lockstep asks in halves
        self.begin_reset(**context)
        self.slots.flush()
        self.finish_reset()

    def act(self, observation: Any) -> Any:
        self.begin_act(observation)
        self.slots.flush()
        return self.finish_act()
