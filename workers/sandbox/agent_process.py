"""One sandboxed agent's process, seen from the worker: started in a bubblewrap jail, asked one
question at a time over a unix socket, watched, and ended (docs/agents.md, "Where agents run").
The other side is workers/agent_child.py; what travels between them, workers/agent_wire.py.

Everything the agent's process says is untrusted: answers are an int, a str or JSON of bounded
size, never a pickle, read with a per-step timeout; a process that dies, stops answering or
answers out of turn is the agent's fault (AgentFault, an ordinary exception: a game counts it as
a faulted move, Mario and bandit end the unit with it), never the worker's. A jail that cannot
be set up at all is the host's (AgentSandboxBroken: an infrastructure error, retried on
resubmission).

A Mario frame does not travel on the socket: the worker copies it into a shared memory segment
(a memfd both processes map; the agent's side read-only) before it asks for the action.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import mmap
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from workers.agent_wire import (
    ANSWER_SPIN_S,
    HEADER,
    MAX_ANSWER,
    SPIN_S,
    ArrayRef,
    Layout,
    Observations,
    decode_answer,
    encode_request,
)
from workers.sandbox.base import SandboxUnavailable
from workers.sandbox.bwrap import Jail, require
from workers.sandbox.seccomp import jail_filter

EXIT_GRACE_S = 2.0  # how long a process that closed its socket has to exit before it is killed
SHM_BYTES = 4 << 20  # arrays up to this size travel through shared memory (a frame: 180 KiB)
OUTPUT_CHUNK = 1 << 16
# What native code prints when an allocation fails under the memory limit and it aborts.
OUT_OF_MEMORY = (b"std::bad_alloc", b"Cannot allocate memory", b"out of memory")
# Started with -I (no PYTHON* variables, no user site, no script folder on sys.path), -B (no
# byte code: every bound folder is read-only anyway) and -u (what the agent prints reaches the
# unit's log when it prints it, not when a buffer fills).
PYTHON_FLAGS = ("-I", "-B", "-u")
BOOT = "import sys; sys.path.insert(0, {root!r}); from workers.agent_child import main; main()"


class AgentFault(RuntimeError):
    """The agent's process failed the contract: it died, was killed, ran out of memory, did not
    answer within the per-step timeout, or answered something that is not an answer."""


class AgentProcessDied(AgentFault):
    pass


class AgentOutOfMemory(AgentFault):
    pass


class AgentTimedOut(AgentFault):
    pass


class AgentRaised(Exception):
    """An exception the agent's code raised in its process; `agent_exception` names a subclass
    after the agent's own type, so reasons read as they do for an agent run in the worker."""


class AgentSandboxBroken(SandboxUnavailable):
    """The jail could not be set up here (bubblewrap failed): not the agent's doing."""


@dataclass(frozen=True)
class ProcessPlan:
    """How to start one agent's process: its jail, and what the agent's side is told."""

    jail: Jail
    arena_root: Path  # the folder holding Arena's `workers` package
    paths: tuple[str, ...]  # put first on the agent's sys.path (its own folders)
    cwd: str  # where the agent's side starts if that folder exists in the jail
    memory_mb: int
    memory_rlimit: Literal["as", "data"]
    file_mb: int
    seccomp: bool = True  # the jail's system-call filter (workers.sandbox.seccomp), if there


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


class AgentProcess:
    """The agent's process in its jail. `request` asks one thing and returns the answer's value;
    after a fault that leaves the process in an unknown state it is ended, and every later
    request raises the same AgentFault at once (a dead agent answers nothing more)."""

    def __init__(self, plan: ProcessPlan, start_timeout_s: float) -> None:
        self.plan = plan
        self.dead: str | None = None  # why the process can answer nothing more
        self.started = time.perf_counter()
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

    def _spawn(self) -> None:
        bwrap = require()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_read, out_write = os.pipe()
        shm_fd = os.memfd_create("arena-agent-frame", 0)
        os.ftruncate(shm_fd, SHM_BYTES)
        seccomp_fd = jail_filter() if self.plan.seccomp else None
        config = {
            "fd": theirs.fileno(),
            "shm_fd": shm_fd,
            "paths": list(self.plan.paths),
            "cwd": self.plan.cwd,
            "memory_mb": self.plan.memory_mb,
            "memory_rlimit": self.plan.memory_rlimit,
            "file_mb": self.plan.file_mb,
            "spin_s": SPIN_S,
        }
        boot = BOOT.format(root=str(self.plan.arena_root))
        command = [sys.executable, *PYTHON_FLAGS, "-c", boot, json.dumps(config)]
        passed = [theirs.fileno(), shm_fd, *([seccomp_fd] if seccomp_fd is not None else [])]
        try:
            self.proc = subprocess.Popen(
                self.plan.jail.argv(command, bwrap, seccomp_fd=seccomp_fd),
                stdin=subprocess.DEVNULL,
                stdout=out_write,
                stderr=out_write,
                pass_fds=passed,
                close_fds=True,
                # bwrap's own environment: its process is the jail's pid 1, whose
                # /proc/1/environ the agent can read (--clearenv clears only the agent's).
                env=dict(self.plan.jail.env),
            )
        finally:
            for fd in (theirs.detach(), out_write, *passed[2:]):
                os.close(fd)
        self.sock, self.output = ours, out_read
        self.shm = mmap.mmap(shm_fd, SHM_BYTES)
        os.close(shm_fd)
        self._poll = select.poll()
        self._poll.register(self.sock, select.POLLIN)
        self._poll.register(self.output, select.POLLIN)

    def _ready(self, timeout_s: float) -> int:
        try:
            answer = self._answer(timeout_s)
        except AgentFault as fault:
            said = " ".join(self._tail.decode(errors="replace").split())[-300:]
            raise AgentSandboxBroken(
                f"the agent sandbox did not start: {fault}" + (f"; it said: {said}" if said else "")
            ) from None
        if "broken" in answer:
            raise AgentSandboxBroken(str(answer["broken"])[:500])
        if not isinstance(answer.get("ready"), int):
            raise AgentSandboxBroken(f"the agent sandbox answered {str(answer)[:100]}")
        limit = answer.get("memory_mb")  # the worker's own limit may be lower than the plan's
        self.memory_mb = limit if isinstance(limit, int) and limit > 0 else self.plan.memory_mb
        return int(answer["ready"])

    def request(self, op: str, argument: Any, timeout_s: float) -> Any:
        """Send one request and return the answer's value; the agent's failures raise."""
        if self.dead is not None:
            raise AgentProcessDied(self.dead)
        if op == "make":  # the agent's side forgets the last unit's observations too
            self.observations = Observations(self._share)
        try:
            self.sock.sendall(encode_request(op, argument))
            answer = self._answer(timeout_s)
        except AgentTimedOut as fault:
            self._end(f"it was ended after {fault}")
            raise
        except (BrokenPipeError, ConnectionResetError):
            raise AgentProcessDied(self._died()) from None
        except AgentFault:
            raise
        except BaseException:  # the unit's deadline (or Ctrl-C) mid-request
            self._end("it was ended by the unit's time limit")
            raise
        return _value(answer, self.memory_mb)

    def encode(self, observation: Any) -> tuple[int, Any, ArrayRef | None]:
        """What `act` sends of an observation (agent_wire.Observations)."""
        return self.observations.encode(observation)

    def _share(self, array: Any) -> Layout | None:
        """Copy an array into the shared memory as the bytes it spans (one memmove, where a
        strided view such as the emulator's screen costs 220 us copied element by element),
        keeping its strides: its layout, or None if it does not fit."""
        if array.dtype.hasobject or array.size == 0:
            return None
        extents = [stride * (n - 1) for stride, n in zip(array.strides, array.shape, strict=True)]
        low = sum(e for e in extents if e < 0)
        span = sum(e for e in extents if e > 0) - low + array.itemsize
        if span > SHM_BYTES:
            return None
        if self._shm_address is None:
            import numpy  # here: NumPy (the mario extra) only once an array is shared

            self._shm_bytes = numpy.frombuffer(self.shm, numpy.uint8)
            self._shm_address = int(self._shm_bytes.ctypes.data)
        ctypes.memmove(self._shm_address, array.ctypes.data + low, span)
        return tuple(array.shape), array.dtype.str, tuple(array.strides), -low

    @property
    def reusable(self) -> bool:
        """Alive, idle and with nothing unasked-for waiting on its socket."""
        if self.dead is not None or self.proc.poll() is not None or self._buffer:
            return False
        for fd, _ in self._poll.poll(0):
            if fd == self.output:
                self._forward_output()
            else:
                return False  # an answer nobody asked for, or the socket closed
        return True

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        """The next whole answer, forwarding what the process prints meanwhile. Asked for
        without sleeping for ANSWER_SPIN_S first (agent_wire says why)."""
        spin_end = time.perf_counter() + ANSWER_SPIN_S
        while time.perf_counter() < spin_end:
            try:
                chunk = self.sock.recv(1 << 20, socket.MSG_DONTWAIT)
            except BlockingIOError:
                os.sched_yield()
                continue
            if not chunk:
                raise AgentProcessDied(self._died())
            self._buffer += chunk
            answer = self._take()
            if answer is not None:
                return answer
        end = time.monotonic() + timeout_s
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
                    raise AgentProcessDied(self._died())
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

    def _forward_output(self) -> None:
        """What the agent printed, into this process's stdout: the unit's log captures it."""
        with contextlib.suppress(BlockingIOError, OSError):
            self._forward(os.read(self.output, OUTPUT_CHUNK))

    def _forward(self, data: bytes) -> None:
        self._tail = (self._tail + data)[-2000:]
        write_stdout(data)

    def _died(self) -> str:
        """Why the process stopped answering, once it has exited (killed if it will not)."""
        try:
            code = self.proc.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            self._end("it closed its socket and was ended")
            return str(self.dead)
        self._drain()
        note = self._note
        if note is None and any(sign in self._tail for sign in OUT_OF_MEMORY):
            note = f"out of memory: memory limit {self.memory_mb} MB"
        self.dead = f"the agent's process {exit_reason(code)}" + (f" ({note})" if note else "")
        self.close()
        return self.dead

    def _end(self, why: str) -> None:
        if self.dead is None:
            self.dead = f"the agent's process can answer nothing more: {why}"
        self.close()

    def _drain(self) -> None:
        os.set_blocking(self.output, False)
        for _ in range(64):  # up to 4 MiB of last words
            try:
                data = os.read(self.output, OUTPUT_CHUNK)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            with contextlib.suppress(OSError):
                self._forward(data)

    def close(self) -> None:
        """End the process (and with it everything in its jail) and free what it held."""
        if self.dead is None:
            self.dead = "the agent's process was ended"
        if getattr(self, "proc", None) is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()  # bwrap: its init in the jail dies with it, and the jail with that
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        if self.sock.fileno() >= 0:
            self._drain()
            self._poll.unregister(self.sock)
            self._poll.unregister(self.output)
            self.sock.close()
            os.close(self.output)
            self._shm_bytes = self._shm_address = None
            with contextlib.suppress(BufferError):  # an array of the agent's still views it
                self.shm.close()


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


def _value(answer: dict[str, Any], memory_mb: int) -> Any:
    if "ok" in answer:
        return answer["ok"]
    if "memory" in answer:
        why = str(answer["memory"])[:200]
        raise AgentOutOfMemory(f"memory limit {memory_mb} MB exceeded ({why})")
    raised = answer.get("raised")
    if isinstance(raised, list) and len(raised) == 2:
        raise agent_exception(str(raised[0]))(str(raised[1])[:1000])
    raise AgentFault(f"the agent's process answered {str(answer)[:100]}")
