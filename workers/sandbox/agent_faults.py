"""How a sandboxed agent's process failed, as the worker says it (workers/sandbox/agent_process.py):
the agent's faults (AgentFault and its kinds, an ordinary exception: a game counts it as a
faulted move, Mario and bandit end the unit with it), the agent's own exceptions (AgentRaised,
named after the agent's type), and the host's (AgentSandboxBroken: an infrastructure error)."""

from __future__ import annotations

import os
import signal
from typing import Any

from workers.sandbox.base import SandboxUnavailable


class AgentFault(RuntimeError):
    """The agent's process failed the contract: it died, was killed, ran out of memory, did not
    answer within the per-step timeout, or answered something that is not an answer."""


class AgentProcessDied(AgentFault):
    pass


class AgentOutOfMemory(AgentFault):
    pass


class AgentTimedOut(AgentFault):
    pass


class AgentOutOfCPU(AgentProcessDied):
    """Its unit child used the CPU time it may (ARENA_AGENT_CPU_S) and was killed."""


class AgentRaised(Exception):
    """An exception the agent's code raised in its process; `agent_exception` names a subclass
    after the agent's own type, so reasons read as they do for an agent run in the worker."""


class AgentSandboxBroken(SandboxUnavailable):
    """The jail could not be set up here (bubblewrap failed): not the agent's doing."""


_agent_exceptions: dict[str, type[AgentRaised]] = {}


def agent_exception(name: str) -> type[AgentRaised]:
    """A subclass of AgentRaised called `name` (when it is an identifier): `RuntimeError: bug`
    in the agent's process reads `RuntimeError: bug` in the worker too."""
    if not name.isidentifier() or len(name) > 60:
        return AgentRaised
    if name not in _agent_exceptions:
        if len(_agent_exceptions) >= 256:  # names come from the agent: keep the table small
            return AgentRaised
        _agent_exceptions[name] = type(name, (AgentRaised,), {"__module__": "agent"})
    return _agent_exceptions[name]


def write_stdout(data: bytes) -> None:
    """What an agent printed, into this process's stdout (fd 1: the unit's log captures it)."""
    while data:
        data = data[os.write(1, data) :]


def exit_reason(code: int) -> str:
    """How bwrap said the agent's process ended: its exit status, or 128 + the signal."""
    if code > 128:
        number = code - 128
        try:
            name = f" ({signal.Signals(number).name})"
        except ValueError:
            name = ""
        return f"was killed by signal {number}{name}"
    if code < 0:  # bwrap itself was killed
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


def value_of(answer: dict[str, Any], memory_mb: int) -> Any:
    if "ok" in answer:
        return answer["ok"]
    if "memory" in answer:
        why = str(answer["memory"])[:200]
        raise AgentOutOfMemory(f"memory limit {memory_mb} MB exceeded ({why})")
    raised = answer.get("raised")
    if isinstance(raised, list) and len(raised) == 2:
        raise agent_exception(str(raised[0]))(str(raised[1])[:1000])
    raise AgentFault(f"the agent's process answered {str(answer)[:100]}")
