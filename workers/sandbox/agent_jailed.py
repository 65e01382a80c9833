"""A Python process in a bubblewrap jail, seen from the worker: started, told its configuration,
its printing forwarded into the unit's log, its frames shared, and ended (the jail as a whole).
What it serves is workers/sandbox/agent_process.py's (AgentProcess: the agent's units)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import mmap
import os
import select
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
)
from workers.sandbox.agent_faults import (
    AgentFault,
    AgentSandboxBroken,
    AgentTimedOut,
    exit_reason,
    write_stdout,
)
from workers.sandbox.bwrap import Jail, require
from workers.sandbox.seccomp import jail_filter

EXIT_GRACE_S = 2.0  # how long a process that closed its socket has to exit before it is killed
SHM_BYTES = 4 << 20  # arrays up to this size travel through shared memory (a frame: 180 KiB)
OUTPUT_CHUNK = 1 << 16
# What one unit's agent may print into the unit's log (its capture file, on the worker's disk):
# beyond it, only a count and the last TAIL_BYTES. The log itself keeps 1 MiB (tasks/capture.py).
OUTPUT_KEPT_BYTES = 1 << 20
TAIL_BYTES = 2000
# What native code prints when an allocation fails under the memory limit and it aborts.
OUT_OF_MEMORY = (b"std::bad_alloc", b"Cannot allocate memory", b"out of memory")
# Started with -I (no PYTHON* variables, no user site, no script folder on sys.path), -B (no
# byte code: every bound folder is read-only anyway) and -u (what the agent prints reaches the
# unit's log when it prints it, not when a buffer fills).
PYTHON_FLAGS = ("-I", "-B", "-u")
BOOT = "import sys; sys.path.insert(0, {root!r}); from workers.agent_child import main; main()"


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
    preload: tuple[str, ...] = ()  # trusted modules the zygote imports for every unit child


class JailedProcess:
    """The jail's process and what the worker holds of it: its sockets, its output pipe, the
    shared memory. `close` ends the jail (bwrap, and with it everything in the jail)."""

    plan: ProcessPlan
    dead: str | None
    unit: int | None
    memory_mb: int
    _death: type[AgentFault]
    _note: str | None
    _tail: bytes
    _printed: int = 0  # what the unit's agent printed so far, kept or not
    _shm_bytes: Any
    _shm_address: int | None
    observations: Observations

    def _answer(self, timeout_s: float, since: float | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def fault(self) -> AgentFault:
        """What every request of a unit whose agent is dead raises."""
        return self._death(self.dead)

    def _spawn(self) -> None:
        bwrap = require()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_read, out_write = os.pipe()
        shm_fd = os.memfd_create("arena-agent-frame", 0)
        os.ftruncate(shm_fd, SHM_BYTES)
        # The jail gets the segment read-only: no mapping of it there can be made writable.
        shm_read = os.open(f"/proc/self/fd/{shm_fd}", os.O_RDONLY)
        seccomp_fd = jail_filter() if self.plan.seccomp else None
        config = {
            "fd": theirs.fileno(),
            "shm_fd": shm_read,
            "paths": list(self.plan.paths),
            "cwd": self.plan.cwd,
            "memory_mb": self.plan.memory_mb,
            "memory_rlimit": self.plan.memory_rlimit,
            "file_mb": self.plan.file_mb,
            "spin_s": SPIN_S,
            "preload": list(self.plan.preload),
        }
        boot = BOOT.format(root=str(self.plan.arena_root))
        command = [sys.executable, *PYTHON_FLAGS, "-c", boot, json.dumps(config)]
        passed = [theirs.fileno(), shm_read, *([seccomp_fd] if seccomp_fd is not None else [])]
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
            for fd in (theirs.detach(), out_write, *passed[1:]):
                os.close(fd)
        self.control = self.sock = ours  # the zygote's; a unit's own while one serves
        self.output = out_read
        self.shm = mmap.mmap(shm_fd, SHM_BYTES)
        os.close(shm_fd)
        self._poll = select.poll()  # the output and the socket requests go to now
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

    def _forward_output(self) -> None:
        """What the agent printed, into this process's stdout: the unit's log captures it."""
        with contextlib.suppress(BlockingIOError, OSError):
            self._forward(os.read(self.output, OUTPUT_CHUNK))

    def _forward(self, data: bytes) -> None:
        self._tail = (self._tail + data)[-TAIL_BYTES:]
        room = OUTPUT_KEPT_BYTES - self._printed
        self._printed += len(data)
        if room > 0:
            write_stdout(data[:room])

    def _output_kept(self) -> None:
        """At a unit's end: what was not kept of the agent's printing, counted, and its end;
        the next unit's count starts afresh."""
        if self._printed:
            self._drain()  # what it printed last, before the unit's log closes
        if self._printed > OUTPUT_KEPT_BYTES:
            cut = self._printed - OUTPUT_KEPT_BYTES
            write_stdout(
                f"\n[... the agent printed {self._printed:,} bytes: {cut:,} not kept (at most "
                f"{OUTPUT_KEPT_BYTES:,} a unit); its last {len(self._tail):,}:]\n".encode()
                + self._tail
                + b"\n"
            )
        self._printed = 0

    def _jail_died(self) -> AgentFault:
        """Why the jail stopped answering, once bwrap has exited (killed if it will not)."""
        try:
            code = self.proc.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            self._end("it closed its socket and was ended")
            return self.fault()
        self._drain()
        self.dead = self._exited(code)
        self.close()
        return self.fault()

    def _exited(self, code: int) -> str:
        note = self._note
        if note is None and any(sign in self._tail for sign in OUT_OF_MEMORY):
            note = f"out of memory: memory limit {self.memory_mb} MB"
        return f"the agent's process {exit_reason(code)}" + (f" ({note})" if note else "")

    def _zygote_answer(self, timeout_s: float) -> tuple[dict[str, Any], list[int]]:
        """The zygote's next answer, with the descriptors it passed."""
        data, fds, end = bytearray(), list[int](), time.monotonic() + timeout_s
        # Asked for without sleeping for ANSWER_SPIN_S first, as a unit's answers are: the
        # next unit waits on the end of the last one and on its child's socket.
        spin_end, flags = time.perf_counter() + ANSWER_SPIN_S, int(socket.MSG_DONTWAIT)
        while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack_from(data)[0]:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise AgentTimedOut(f"its jail did not answer within {timeout_s:g}s")
            if flags and time.perf_counter() > spin_end:
                flags = 0
            if not flags:
                ready = select.select([self.control.fileno(), self.output], [], [], remaining)[0]
                if self.output in ready:
                    self._forward_output()
                if self.control.fileno() not in ready:
                    continue
            try:
                chunk, passed, _, _ = socket.recv_fds(self.control, 1 << 16, 4, flags)
            except BlockingIOError:
                os.sched_yield()
                continue
            fds += passed
            if not chunk:
                raise ConnectionResetError("the agent's jail closed its socket")
            data += chunk
        length = HEADER.unpack_from(data)[0]
        answer = decode_answer(data[HEADER.size], bytes(data[HEADER.size + 1 :]))
        if length > MAX_ANSWER or len(data) != HEADER.size + length or answer is None:
            self._end("its jail sent something that is not an answer")
            raise AgentFault(self.dead)
        return answer, fds

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
        self.unit = None
        if self.control.fileno() >= 0:
            self._drain()
            self._poll.unregister(self.sock)
            self._poll.unregister(self.output)
            self.sock.close()
            self.control.close()
            os.close(self.output)
            self._shm_bytes = self._shm_address = None
            with contextlib.suppress(BufferError):  # an array of the agent's still views it
                self.shm.close()
