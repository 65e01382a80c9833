"""A sandboxed agent playing a block of episodes together (workers/sandbox/agent_slots.py,
workers/games/lockstep.py): one request a round for every episode's move, each answer within
the step timeout of the one before, each episode's agent new, faults the one move's."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tasks.execute import execute_unit
from tasks.workloads import get_workload, validate_batch
from tests.needs import require_bwrap
from tests.workers.jails import no_jail_here
from workers.games import GAMES
from workers.sandbox.agent_process import AgentProcessDied, AgentRaised, AgentTimedOut
from workers.sandbox.agent_sandbox import AgentLimits, AgentSource, untrusted_agent
from workers.sandbox.agent_slots import SandboxedSlots

LIMITS = AgentLimits(memory_mb=512, start_timeout_s=60)


@pytest.fixture(autouse=True)
def needs_bwrap() -> None:
    require_bwrap()


@contextmanager
def slots(count: int, step_timeout_s: float = 10) -> Iterator[SandboxedSlots]:
    source = AgentSource(entry_point="tests.workers.sandbox_agents:facts", slots=count)
    with untrusted_agent(source, None, LIMITS, step_timeout_s=step_timeout_s) as agent:
        block = SandboxedSlots(agent, count)
        for slot in block.strategies:
            slot.begin_reset(seed=1)  # type: ignore[attr-defined]
        block.flush()
        for slot in block.strategies:
            slot.finish_reset()  # type: ignore[attr-defined]
        yield block


def asked(block: SandboxedSlots, questions: list[dict[str, Any]]) -> list[Any]:
    """Each slot asked its question in one request; each answer, or the fault it raised."""
    for slot, question in zip(block.strategies, questions, strict=False):
        slot.begin_act(question)  # type: ignore[attr-defined]
    block.flush()
    answers: list[Any] = []
    for slot in block.strategies[: len(questions)]:
        try:
            answers.append(slot.finish_act())  # type: ignore[attr-defined]
        except Exception as fault:
            answers.append(fault)
    return answers


def test_a_round_of_three_episodes_is_one_request_answered_in_order():
    with slots(3) as block:
        tokens = asked(block, [{"ask": "token"}] * 3)
        assert len(set(tokens)) == 1  # one process: the unit child
        echoed = asked(block, [{"ask": "echo", "n": n} for n in range(3)])
        assert echoed == [{"ask": "echo", "n": n} for n in range(3)]


def test_a_slot_that_raises_faults_its_own_move_only():
    with slots(3) as block:
        answers = asked(block, [{"ask": "echo"}, {"ask": "no_such_question"}, {"ask": "token"}])
        assert answers[0] == {"ask": "echo"} and isinstance(answers[2], str)
        assert isinstance(answers[1], AgentRaised)
        assert "no_such_question" in str(answers[1])
        assert asked(block, [{"ask": "echo"}] * 3) == [{"ask": "echo"}] * 3


def test_each_answer_has_the_step_timeout_from_the_one_before():
    """Three moves of 0.4 s each take 1.2 s in all, past a 0.7 s step timeout, yet each answer
    came within 0.7 s of the one before: none faults. A move of 5 s faults after 0.7 s, as the
    agent's own (its process ended), and with it every move of that round, the ones answered
    before it too (answers travel in groups: which were sent before it must not matter)."""
    with slots(4, step_timeout_s=0.7) as block:
        started = time.monotonic()
        assert asked(block, [{"ask": "sleep", "seconds": 0.4}] * 3) == ["slept"] * 3
        assert time.monotonic() - started >= 1.2
        started = time.monotonic()
        sleeps = {"ask": "sleep", "seconds": 5}
        answers = asked(block, [{"ask": "echo"}, sleeps, {"ask": "echo"}, {"ask": "token"}])
        assert time.monotonic() - started < 0.7 + 1
        for fault in answers:
            assert isinstance(fault, AgentTimedOut)
            assert "no answer within 0.7s (per-step timeout)" in str(fault)
        later = asked(block, [{"ask": "echo"}])[0]
        assert isinstance(later, AgentProcessDied) and "per-step timeout" in str(later)


def test_an_exit_mid_round_faults_every_move_of_that_round():
    with slots(3) as block:
        answers = asked(block, [{"ask": "echo"}, {"ask": "exit", "code": 3}, {"ask": "echo"}])
        for fault in answers:
            assert isinstance(fault, AgentProcessDied)
            assert str(fault) == "the agent's process exited with code 3"


@pytest.mark.parametrize("trusted", [False, True], ids=["sandboxed", "in the worker"])
def test_every_episode_is_played_by_a_new_agent(trusted: bool, monkeypatch: pytest.MonkeyPatch):
    """25 episodes: a block of 20, then 5 more. An agent that defects whenever it was reset
    before (an instance reused for a second episode) cooperates throughout, in both places."""
    spec = {
        "workload": "alympics",
        "agents": [{"name": "f", "entry_point": "tests.workers.sandbox_agents:only_fresh"}],
        "items": list(GAMES),
        "protocol": {"seed": 5},
        "params": {"episodes": 25},
    }
    workload = get_workload("alympics")
    unit = next(
        u
        for u in workload.expand(validate_batch(spec))
        if u.item == "prisoners_dilemma@tit-for-tat"
    )
    if trusted:
        with no_jail_here(monkeypatch, trust=True):
            result = execute_unit(workload, unit).result
    else:
        result = execute_unit(workload, unit).result
    assert result.status == "ok", result.reason
    assert result.result["measures"]["cooperation"] == 100.0
    assert result.result["episode_payoffs"] == [3.0] * 25
    assert not re.search("fault", str(result.result["fault_reasons"]))
