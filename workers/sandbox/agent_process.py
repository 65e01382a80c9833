"""One sandboxed agent's jail, seen from the worker: started with bubblewrap, asked one question
at a time over unix sockets, watched, and ended (docs/agents.md, "Where agents run"). The other
side is workers/agent_child.py; what travels between them, workers/agent_wire.py.

The jail's first process is a fork server (the zygote, Arena's code only). Each unit's `make`
goes to it; it forks a unit child that makes the agent and serves the unit on a socket of its
own, handed to the worker with the answer. At the unit's end (`end_unit`) the zygote kills the
child and puts the jail's /tmp back as it was: the next unit of the agent, in the same warm
jail, starts as a fresh process would (a `device: cuda` checkpoint keeps its unit child, whose
CUDA context cannot be forked: docs/agents.md says what that leaves).

Everything the agent's process says is untrusted: answers are an int, a str or JSON of bounded
size, never a pickle, read with a per-step timeout; a process that dies, stops answering or
answers out of turn is the agent's fault (workers/sandbox/agent_faults.py), never the worker's.
A jail that cannot be set up at all is the host's (AgentSandboxBroken: an infrastructure error,
retried on resubmission).

A Mario frame does not travel on the socket: the worker copies it into a shared memory segment
(a memfd both processes map; the agent's side read-only) before it asks for the action.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from workers.agent_wire import (
    ANSWER_SPIN_S,
    HEADER,
    MAX_ANSWER,
    Observations,
    decode_answer,
    encode_request,
)
from workers.sandbox.agent_faults import (
    AgentFault,
    AgentOutOfCPU,
    AgentOutOfMemory,
    AgentProcessDied,
    AgentRaised,
    AgentSandboxBroken,
    AgentTimedOut,
    agent_exception,
    exit_reason,
    value_of,
    write_stdout,
)
from workers.sandbox.agent_jailed import EXIT_GRACE_S, SHM_BYTES, JailedProcess, ProcessPlan

END_TIMEOUT_S = 10.0  # the zygote's answer to `end` (kill, reap, empty /tmp); else the jail goes


class AgentProcess(JailedProcess):
    """The agent's jail. `request` asks one thing and returns the answer's value; `make` starts
    a unit (a new unit child, unless one lives on: `device: cuda`), `end_unit` ends it. After a
    fault that leaves the unit child in an unknown state it is ended, and every later request
    of the unit raises the same AgentFault at once (a dead agent answers nothing more)."""

    def __init__(self, plan: ProcessPlan, start_timeout_s: float) -> None:
        self.plan = plan
        self.dead: str | None = None  # why the unit's agent can answer nothing more
        self._death: type[AgentFault] = AgentProcessDied
        self.unit: int | None = None  # the unit child's pid in the jail, while it serves
        self.cpu_s: float | None = None  # the unit child's CPU limit
        self.limit_hit = False  # the unit child reached a limit it survived (a MemoryError)
        self.started = time.perf_counter()
        self._asked_at = 0.0  # when the request `finish` answers was sent (monotonic)
        self._pending = 0  # answers to the request begun last not read yet
        self._ending = False  # an `end` sent to the zygote whose answer is not read yet
        self._buffer = bytearray()
        self._note: str | None = None  # what the agent's side said before it exited
        self.memory_mb = plan.memory_mb
        self._shm_bytes: Any = None  # a NumPy view of the shared memory, for its address
        self._shm_address: int | None = None
        self.observations = Observations(self._share)
        self._tail = b""  # the end of what the process printed (bwrap's own errors too)
        self._spawn()
        try:
            self.pid = self._ready(start_timeout_s)
        except BaseException:
            self.close()
            raise
        self.ready_s = time.perf_counter() - self.started

    def request(self, op: str, argument: Any, timeout_s: float) -> Any:
        """Send one request and return the answer's value; the agent's failures raise."""
        forking = op == "make" and self.unit is None and self.control.fileno() >= 0
        if self.dead is not None and not forking:
            raise self.fault()
        if op == "make":  # the agent's side forgets the last unit's observations too
            self.observations = Observations(self._share)
        if forking:
            self._asked_at = time.monotonic()
            with self._faults():
                self._fork_unit(argument, timeout_s)
            return self.finish(timeout_s)
        self.begin(op, argument)
        return self.finish(timeout_s)

    def begin(self, op: str, argument: Any, answers: int = 1) -> None:
        """Send a request whose `answers` answers `finish` reads, one a call: the worker may do
        other work meanwhile (an Alympics round's other moves), the agent's step time running
        from now (`many`: the calls of several episodes, answered in order; two of them may be
        in flight, answered one after the other)."""
        if self.dead is not None:
            raise self.fault()
        if not self._pending:  # else its first answer is timed from the last one before
            self._asked_at = time.monotonic()
        self._pending += answers
        with self._faults():
            self.sock.sendall(encode_request(op, argument))

    def finish(self, timeout_s: float) -> Any:
        """The next answer to the request sent last, within `timeout_s` of its sending or of
        the answer before it (each call of a `many` has the step timeout of its own)."""
        return value_of(self.finish_many(1, timeout_s)[0], self.memory_mb)

    def finish_many(self, count: int, timeout_s: float) -> list[dict[str, Any]]:
        """The next `count` answers as they came (agent_faults.value_of reads each), each within
        `timeout_s` of the one before: `finish`, `count` times, at the cost of one. A fault
        that ends the process raises (the calls' answers read before it are lost with it)."""
        if self.dead is not None:
            self._pending = 0
            raise self.fault()
        answers = []
        try:
            with self._faults():
                for _ in range(count):
                    answers.append(self._answer(timeout_s, since=self._asked_at))
                    self._asked_at = time.monotonic()
        except BaseException:
            self._pending = 0  # its process ended, or left for the next unit
            raise
        self._pending = max(0, self._pending - count)
        self.limit_hit = self.limit_hit or any("memory" in answer for answer in answers)
        return answers

    @contextmanager
    def _faults(self) -> Iterator[None]:
        """A request's failures as the agent's faults; the unit child ended where its state is
        unknown after them."""
        try:
            yield
        except AgentTimedOut as fault:
            self._end(f"it was ended after {fault}")
            raise
        except (BrokenPipeError, ConnectionResetError):
            raise self._died() from None
        except AgentFault:
            raise
        except BaseException:  # the unit's deadline (or Ctrl-C) mid-request
            self._end("it was ended by the unit's time limit")
            raise

    def _fork_unit(self, argument: Any, timeout_s: float) -> None:
        """The zygote forks the unit's child, which makes the agent: requests go to the child's
        socket from now on (the make's answer comes on it)."""
        if not self.settle():
            raise AgentFault(self.dead)
        answer, fds = self._ask_zygote("make", argument, timeout_s)
        made = answer.get("ok")
        if not fds or not isinstance(made, dict):
            self._end(f"its jail answered {str(answer)[:100]}")
            raise AgentFault(self.dead)
        for extra in fds[1:]:
            os.close(extra)
        self._use(socket.socket(fileno=fds[0]))
        self.unit = made.get("unit")
        self.cpu_s = argument.get("cpu_s") if isinstance(argument, dict) else None
        self.dead, self._death, self._note, self.limit_hit = None, AgentProcessDied, None, False

    def _use(self, sock: socket.socket) -> None:
        self._poll.unregister(self.sock)
        self.sock = sock
        self._poll.register(self.sock, select.POLLIN)

    def _ask_zygote(
        self, op: str, argument: Any, timeout_s: float
    ) -> tuple[dict[str, Any], list[int]]:
        """One request to the zygote and its answer, with the descriptors it passed."""
        self.control.sendall(encode_request(op, argument))
        return self._zygote_answer(timeout_s)

    def end_unit(self) -> None:
        """The unit is over: the zygote is asked to end its child and put the jail back as it
        was when it started. Its answer is read when the jail is next taken (`settle`): the
        worker stores the unit's result meanwhile."""
        if self.unit is None or self.control.fileno() < 0:
            return
        self._leave_child()
        try:
            self.control.sendall(encode_request("end", {"wait_s": 0}))
        except OSError:
            self._end("its jail did not end the unit")
            return
        self._ending = True
        self.dead = self.dead or "the unit's agent was ended with its unit"

    def settle(self) -> bool:
        """Whether the jail can serve another unit, once the zygote has said how the last one
        ended (a jail it could not put back as it was is ended, never reused)."""
        if self._ending:
            self._ending = False
            try:
                ended, fds = self._zygote_answer(END_TIMEOUT_S)
            except (AgentFault, OSError):
                self._end("its jail did not end the unit")
                return False
            for fd in fds:
                os.close(fd)
            if not isinstance(ended.get("ok"), dict) or not ended["ok"].get("clean"):
                self._end("its jail could not be put back as it was")
                return False
        return self.control.fileno() >= 0

    def _leave_child(self) -> None:
        """Requests go to the zygote again; the unit child reads its socket's end and exits."""
        unit_sock = self.sock
        self._use(self.control)
        if unit_sock is not self.control:
            unit_sock.close()
        self._buffer.clear()
        self.unit = None
        self._output_kept()

    def _end_child(self, wait_s: float) -> dict[str, Any]:
        """The zygote's word on the unit child: `code` (bwrap's way: 128 + a signal), its CPU
        seconds, and whether the jail is clean again."""
        self._leave_child()
        answer, fds = self._ask_zygote("end", {"wait_s": wait_s}, END_TIMEOUT_S + wait_s)
        for fd in fds:
            os.close(fd)
        ended = answer.get("ok")
        if not isinstance(ended, dict):
            raise AgentFault(f"its jail answered {str(answer)[:100]}")
        return ended

    @property
    def reusable(self) -> bool:
        """Alive, idle and with nothing unasked-for waiting on its sockets; a unit child kept
        for the next unit (cuda) alive too."""
        if self.control.fileno() < 0 or self.proc.poll() is not None or self._buffer:
            return False
        if self._pending:  # begun and never finished (the unit's deadline between the two)
            return False
        if self.unit is not None and (self.dead is not None or self.limit_hit):
            return False
        if self.sock is not self.control and select.select([self.control], [], [], 0)[0]:
            return False  # the zygote said something nobody asked for, or it is gone
        for fd, _ in self._poll.poll(0):
            if fd == self.output:
                self._forward_output()
            elif not (self._ending and fd == self.control.fileno()):  # that: `settle` reads it
                return False  # an answer nobody asked for, or the socket closed
        return True

    def _answer(self, timeout_s: float, since: float | None = None) -> dict[str, Any]:
        """The next whole answer, within `timeout_s` of `since` (monotonic; default now),
        forwarding what the process prints meanwhile. Asked for without sleeping for
        ANSWER_SPIN_S first (agent_wire says why)."""
        answer = self._take()  # came with the one before (the calls of a `many`)
        if answer is not None:
            return answer
        spin_end = time.perf_counter() + ANSWER_SPIN_S
        while time.perf_counter() < spin_end:
            try:
                chunk = self.sock.recv(1 << 20, socket.MSG_DONTWAIT)
            except BlockingIOError:
                os.sched_yield()
                continue
            if not chunk:
                raise self._died()
            self._buffer += chunk
            answer = self._take()
            if answer is not None:
                return answer
        end = (time.monotonic() if since is None else since) + timeout_s
        while True:
            answer = self._take()
            if answer is not None:
                return answer
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise AgentTimedOut(f"no answer within {timeout_s:g}s (per-step timeout)")
            for fd, _ in self._poll.poll(max(1, int(remaining * 1000))):
                if fd == self.output:
                    self._forward_output()
                    continue
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    raise self._died()
                self._buffer += chunk

    def _take(self) -> dict[str, Any] | None:
        if len(self._buffer) < HEADER.size:
            return None
        length: int = HEADER.unpack_from(self._buffer)[0]
        if length > MAX_ANSWER + 1:
            self._end(f"it sent an answer of {length:,} bytes (at most {MAX_ANSWER:,})")
            raise AgentFault(self.dead)
        if len(self._buffer) < HEADER.size + length:
            return None
        start, end = HEADER.size, HEADER.size + length
        tag, raw = self._buffer[start] if length else 0, bytes(self._buffer[start + 1 : end])
        del self._buffer[:end]
        answer = decode_answer(tag, raw)
        if answer is None:
            self._end("it sent something that is not an answer")
            raise AgentFault(self.dead)
        if "exit" in answer:  # SystemExit: the process says why, then exits
            self._note = str(answer["exit"][1] if isinstance(answer["exit"], list) else "")[:300]
            return None
        return answer

    def _died(self) -> AgentFault:
        """Why the unit's child stopped answering, as the zygote saw it end (given a moment to
        exit by itself); the jail's own end if the zygote is gone."""
        if self.unit is None:
            return self._jail_died()
        try:
            ended = self._end_child(EXIT_GRACE_S)
        except (AgentFault, OSError):
            return self._jail_died()
        code, cpu_s = ended.get("code"), ended.get("cpu_s")
        self._drain()
        self._death, self.dead = AgentProcessDied, self._exited(int(code or 0))
        signal_ended = isinstance(code, int) and code - 128 in (signal.SIGXCPU, signal.SIGKILL)
        if self.cpu_s and signal_ended and isinstance(cpu_s, float) and cpu_s >= self.cpu_s:
            self._death = AgentOutOfCPU
            self.dead = (
                f"the agent's process {exit_reason(int(code or 0))}: it used {cpu_s:.1f}s of "
                f"CPU, its limit is {self.cpu_s:g}s (ARENA_AGENT_CPU_S)"
            )
        if not ended.get("clean"):
            self._end("its jail could not be put back as it was")
        return self.fault()


__all__ = [
    "SHM_BYTES",
    "AgentFault",
    "AgentOutOfCPU",
    "AgentOutOfMemory",
    "AgentProcess",
    "AgentProcessDied",
    "AgentRaised",
    "AgentSandboxBroken",
    "AgentTimedOut",
    "ProcessPlan",
    "agent_exception",
    "exit_reason",
    "write_stdout",
]
