"""The spare unit child of an agent's jail (workers/agent_zygote.py, Spare): forked while a unit
runs, so that the next unit does not wait for a fork, it must run nothing of the agent's until
that unit has ended and the jail is fresh again, and a unit that kills or stops it harms no later
unit. Real bubblewrap jails, real processes."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.needs import require_bwrap
from workers.sandbox.agent_process import AgentTimedOut
from workers.sandbox.agent_sandbox import AgentLimits, AgentSource, SandboxedAgent, untrusted_agent

LIMITS = AgentLimits(memory_mb=512, start_timeout_s=20)

# Every import of the module notes its process in the jail's /tmp (emptied between units).
AGENT = '''
import os

with open("/tmp/imports", "a") as noted:
    noted.write(f"{os.getpid()}\\n")


def others():
    """The jail's processes but bwrap's init (1), the fork server (2) and this one."""
    return sorted(
        int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, 2, os.getpid())
    )


class Agent:
    def reset(self, **context):
        pass

    def act(self, observation):
        ask = observation["ask"]
        if ask == "imports":
            with open("/tmp/imports") as noted:
                return [int(line) for line in noted.read().split()]
        if ask == "pid":
            return os.getpid()
        if ask == "others":
            return others()
        if ask == "signal":
            found = others()
            for pid in found:
                os.kill(pid, observation["signal"])
            return found
        raise ValueError(ask)


def make():
    return Agent()
'''


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentSource:
    require_bwrap()
    (tmp_path / "spare_agent.py").write_text(AGENT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return AgentSource(entry_point="spare_agent:make")


@contextmanager
def unit(source: AgentSource) -> Iterator[SandboxedAgent]:
    with untrusted_agent(source, None, LIMITS, step_timeout_s=10) as agent:
        agent.reset(seed=1)
        yield agent


def ask(agent: SandboxedAgent, question: str, **more: Any) -> Any:
    return agent.act({"ask": question, **more})


def test_the_next_units_child_waits_until_the_unit_before_has_ended(source: AgentSource):
    """While a unit runs, its jail holds the next unit's child (forked, not yet importing): the
    agent's import has run once, in this unit's process, however long the unit lasts. The next
    unit is served by that child, and finds only its own import noted."""
    with unit(source) as agent:
        me = ask(agent, "pid")
        assert ask(agent, "imports") == [me]
        time.sleep(0.5)  # time enough for a spare that did not wait to import
        assert ask(agent, "imports") == [me]
        spare = ask(agent, "others")
        assert len(spare) == 1
    with unit(source) as agent:
        assert ask(agent, "pid") == spare[0]
        assert ask(agent, "imports") == spare


@pytest.mark.parametrize("sent", [signal.SIGKILL, signal.SIGSTOP])
def test_a_unit_that_kills_or_stops_the_spare_harms_no_later_unit(source: AgentSource, sent: int):
    """SIGKILL and SIGSTOP cannot be ignored: the fork server sees the spare dead or stopped
    when its turn comes, ends it and forks the next unit's child afresh."""
    with unit(source) as agent:
        spare = ask(agent, "signal", signal=int(sent))
    assert len(spare) == 1
    started = time.monotonic()
    try:
        with unit(source) as agent:
            me = ask(agent, "pid")
            assert me not in spare and ask(agent, "imports") == [me]
    except AgentTimedOut:  # a stopped spare served the unit: it never answers
        pytest.fail(f"the next unit waited on the stopped spare for {time.monotonic() - started}s")
    with unit(source) as agent:  # and the jail goes on as before
        assert ask(agent, "imports") == [ask(agent, "pid")]
