"""The agent's side of the agent sandbox: what runs inside the bubblewrap jail (docs/agents.md,
"Where agents run"). The worker's side is workers/sandbox/agent_process.py.

    python -I -B -u -c "from workers.agent_child import main; main()" CONFIG

The process bwrap starts is a fork server (the zygote) that runs Arena's own code only: it caps
its memory and files (rlimits, which its children inherit), puts the agent's folders on
`sys.path`, says it is ready, and imports trusted libraries the agent may use (CONFIG's
`preload`: NumPy; torch and SB3 for a checkpoint), never the agent's own module. Each unit's
`make` forks a unit child that, before any agent code runs, closes the zygote's socket, caps its
CPU time (RLIMIT_CPU), forbids itself to start processes (a seccomp filter: threads yes,
processes no, so a fork bomb has nothing to multiply), then imports the agent and serves the
unit on a socket of its own, handed to the worker over the zygote's socket (SCM_RIGHTS). At the
unit's end the zygote kills the child (if it still lives), says how it ended and empties the
jail's /tmp and /dev/shm: the next unit starts in the state a fresh process would, whatever the
last one left in module globals, caches, files or memory. What travels: workers/agent_wire.py;
a NumPy array of an observation (a Mario frame) lies in the shared memory `CONFIG["shm_fd"]`
maps read-only, written by the worker just before.

Standard library only at start (NumPy and the rest of `preload` come after "ready"), so a jail is
ready in tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import io
import json
import math
import mmap
import os
import resource
import signal
import socket
import sys
import time
from typing import Any

from workers import agent_precompile
from workers.agent_seccomp import forbid_processes
from workers.agent_wire import History, Pacer, encode_answer, receive_request
from workers.agent_zygote import Zygote, send

MAX_REASON = 1000
STDIO_LIMIT_FILES = 1024
CPU_GRACE_S = 1  # from SIGXCPU at the unit's CPU limit to SIGKILL
PR_SET_DUMPABLE = 4
ROUSED_SPIN_S = 5e-3  # a spare roused as its unit ends asks for its `go` without sleeping
MANY_SEND_S = 1e-3  # the longest an answer of a `many` waits to be sent with the next


def set_limits(config: dict[str, Any]) -> int:
    """Memory (RLIMIT_AS, or RLIMIT_DATA where a GPU driver reserves address space it never
    uses), file size (the private /tmp is the only writable place anyway), open files, and no
    core dumps (the host's core handler would receive the agent's memory). Never above what the
    worker itself has (ARENA_UNIT_MEMORY_MB): the memory limit in force, in MiB."""
    memory = int(config["memory_mb"]) << 20
    kind = resource.RLIMIT_DATA if config.get("memory_rlimit") == "data" else resource.RLIMIT_AS
    limits = [
        (kind, memory),
        (resource.RLIMIT_FSIZE, int(config["file_mb"]) << 20),
        (resource.RLIMIT_NOFILE, STDIO_LIMIT_FILES),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in limits:
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))
    return resource.getrlimit(kind)[0] >> 20


class Server:
    """One agent at a time: `make` replaces it (in a unit child kept for the next unit, as a
    `device: cuda` checkpoint's is: CUDA cannot be forked)."""

    def __init__(self, shm: mmap.mmap | None) -> None:
        self.agent: Any = None
        self.history = History()
        # A block of episodes played together (workers/games/lockstep.py): an instance of the
        # agent per episode slot, slot 0 the one `make` made, each with its observations.
        self.slots: list[Any] = []
        self.histories: list[History] = []
        self.played: list[bool] = []  # whether the slot's agent has had an episode
        self.made: dict[str, Any] = {}
        self.shm = shm
        self._arrays: dict[tuple[Any, ...], Any] = {}

    def slot_call(self, op: str, slot: int, argument: Any) -> Any:
        """One call of a `many` request: `reset` or `act` of the agent in `slot`."""
        if op == "reset":  # every episode's agent is new: made by the factory, then reset
            if self.played[slot]:
                self.slots[slot] = None  # gone before the next is made
                self.slots[slot] = make(self.made)
            self.played[slot] = True
            self.slots[slot].reset(**argument)
            return None
        agent = self.slots[slot]
        if op == "act":
            kind, payload = argument
            return agent.act(self.histories[slot].observation(kind, payload))
        raise ValueError(f"unknown request {op!r}")

    def handle(self, op: str, argument: Any) -> Any:
        if op == "act":
            kind, payload, array = argument
            observation = self.history.observation(kind, payload)
            if array is not None:
                key, *layout = array
                observation[key] = self._frame(*layout)
            return self.agent.act(observation)
        if op == "reset":
            self.agent.reset(**argument)
            return None
        if op == "make":
            self.agent = None  # the last unit's agent is gone before the next is made
            self.slots, self.histories = [], []
            self.history = History()
            self.agent = make(argument)
            if "slots" in argument:  # more instances, by the factory that made the agent
                self.made = dict(argument)
                more = (make(argument) for _ in range(int(argument["slots"]) - 1))
                self.slots = [self.agent, *more]
                self.histories = [History() for _ in self.slots]
                self.played = [False for _ in self.slots]
            label = getattr(self.agent, "label", None)
            # Only a checkpoint's loader says where it runs (an entry point's attribute is its own).
            runtime = getattr(self.agent, "runtime", None) if "sb3" in argument else None
            return {
                "label": label if isinstance(label, str) else type(self.agent).__name__,
                "runtime": runtime if isinstance(runtime, dict) else None,
            }
        raise ValueError(f"unknown request {op!r}")

    def _frame(self, shape: Any, dtype: str, strides: Any, offset: int) -> Any:
        """A read-only array over the shared memory, laid out as the worker's was: the live
        frame, as in-process agents get the emulator's own screen (valid until the next step)."""
        layout = (tuple(shape), dtype, tuple(strides), offset)
        found = self._arrays.get(layout)
        if found is None:
            import numpy  # here: NumPy (the mario extra) only once a frame is shared

            found = numpy.ndarray(
                layout[0], numpy.dtype(dtype), buffer=self.shm, offset=offset, strides=layout[2]
            )
            self._arrays[layout] = found
        return found


def make(what: dict[str, Any]) -> Any:
    """The unit's agent: the entry point's factory called, or the checkpoint loaded."""
    if "entry_point" in what:
        module, _, attribute = str(what["entry_point"]).partition(":")
        return getattr(importlib.import_module(module), attribute)()
    from workers.mario.sb3 import load_checkpoint_agent  # here: the sb3 extra, for checkpoints only

    return load_checkpoint_agent(**what["sb3"])


def serve(sock: socket.socket, server: Server, spin_s: float, first: Any = None) -> None:
    """Answer requests (`first`, then what comes on the socket) until the worker closes it. A
    `many` request is several episodes' calls, each answered as soon as it is made (the worker
    times each answer from the one before)."""
    buffer, pacer = bytearray(), Pacer(spin_s)
    while (request := first or receive_request(sock, buffer, pacer)) is not None:
        op, argument = request
        first = None
        if op == "many":
            answer_many(sock, server, argument)
        else:
            send(sock, _answered(sock, bytearray(), server.handle, op, argument))
        pacer.sent()


def answer_many(sock: socket.socket, server: Server, calls: list[Any]) -> None:
    """Each call's answer in order, sent together with the ones before it unless MANY_SEND_S
    has passed since the last were sent: a send costs ~10 us on a virtual machine, as much as
    the rest of a move, and the worker, which times each answer from the one before, sees
    every answer within a millisecond of its making."""
    waiting, sent_at = bytearray(), time.perf_counter()
    for call, slot, value in calls:
        waiting += encode_answer(_answered(sock, waiting, server.slot_call, call, slot, value))
        if time.perf_counter() - sent_at > MANY_SEND_S:
            sock.sendall(waiting)
            waiting.clear()
            sent_at = time.perf_counter()
    if waiting:
        sock.sendall(waiting)


def _answered(
    sock: socket.socket, waiting: bytearray, call: Any, *arguments: Any
) -> dict[str, Any]:
    """`call`'s answer: its value, or what it raised. A SystemExit ends the process, once the
    answers `waiting` to be sent and the reason have gone."""
    try:
        return {"ok": call(*arguments)}
    except MemoryError as exc:
        return {"memory": _reason(exc)}
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sock.sendall(bytes(waiting) + encode_answer({"exit": [code, _reason(exc)]}))
        _exit(code)
        raise  # not reached: _exit ends the process
    except BaseException as exc:  # the agent's exception, whatever it is: the worker's fault
        return {"raised": [type(exc).__name__, str(exc)[:MAX_REASON]]}


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}"[:MAX_REASON] if text else type(exc).__name__


def _exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed stream: nothing to flush
            stream.flush()
    os._exit(code)


def unit_child(
    zygote: Zygote, sock: socket.socket, argument: dict[str, Any], go: int | None
) -> None:
    """In the forked child, before any of the agent's code: no way back to the zygote, the
    unit's CPU limit, no processes; a spare then waits for its `go` (Spare). Then the agent
    made and its unit served. Never returns."""
    try:
        zygote.control.close()
        if zygote.spare is not None:  # a spare forked earlier: none of this child's business
            zygote.spare.sock.close()
            if zygote.spare.go is not None:
                os.close(zygote.spare.go)
        argument.pop("spare", None)
        cpu_s = argument.pop("cpu_s", None)
        if cpu_s:
            # SIGXCPU at the limit (the default action ends the process), SIGKILL a second later
            # for an agent that catches it.
            limit = math.ceil(float(cpu_s))
            resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + CPU_GRACE_S))
        forbid_processes()
    except (OSError, ValueError) as exc:
        send(sock, {"broken": f"the agent sandbox could not be set up: {exc}"})
        _exit(70)
    if go is not None:
        if not _await_turn(go):
            _exit(0)  # dropped before its turn: the pipe closed
        sock.sendall(b"!")  # begun (the zygote reads it before handing the socket over)
    _dumpable()
    serve(sock, Server(zygote.shm), zygote.spin_s, ("make", argument))
    _exit(0)


def _await_turn(go: int) -> bool:
    """A spare's wait for `go` (False: the pipe closed). Roused (`w`) as its unit ends, it asks
    without sleeping for up to ROUSED_SPIN_S, yielding the CPU to anything runnable."""
    said = os.read(go, 1)
    if said == b"w":  # roused as its unit ends: ask without sleeping a while
        os.set_blocking(go, False)
        end = time.perf_counter() + ROUSED_SPIN_S
        while said == b"w" and time.perf_counter() < end:
            try:
                said = os.read(go, 1)
            except BlockingIOError:
                os.sched_yield()
        os.set_blocking(go, True)
        while said == b"w":
            said = os.read(go, 1)
    return said == b"g"


def _dumpable() -> None:
    """The zygote is not dumpable (no process of the jail may read or write its memory); the
    unit child is again, so that its own /proc files are its own."""
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)


def _preload(names: list[str]) -> None:
    """Trusted libraries imported once in the zygote, inherited by every unit child. What they
    print on import (gym's "unmaintained" notice, which SB3 brings) is nobody's unit's: it
    would open the log of the jail's first unit."""
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        for name in names:
            with contextlib.suppress(Exception):  # missing here: the agent's import says so
                importlib.import_module(name)


def _guard_zygote() -> None:
    """Ignore every signal a unit child could send (SIGKILL and SIGSTOP cannot be: those end
    or stall the jail, which the worker then ends) and forbid reading its memory."""
    for number in signal.valid_signals():
        if number not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            with contextlib.suppress(OSError, ValueError):
                signal.signal(number, signal.SIG_IGN)
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def main(argv: list[str] | None = None) -> None:
    config = json.loads((argv or sys.argv)[1])
    control = socket.socket(fileno=int(config["fd"]))
    try:
        memory_mb = set_limits(config)
        _guard_zygote()
    except (OSError, ValueError) as exc:
        send(control, {"broken": f"the agent sandbox could not be set up: {exc}"})
        _exit(70)
    sys.path[:0] = [p for p in config["paths"] if p not in sys.path]
    if os.path.isdir(config["cwd"]):
        os.chdir(config["cwd"])  # where the worker runs (only the bound folders exist there)
    else:
        os.chdir("/tmp")
    agent_precompile.install()
    zygote = Zygote(control, config, unit_child)
    send(control, {"ready": os.getpid(), "memory_mb": memory_mb})
    _preload(list(config.get("preload", [])))
    zygote.serve()
    _exit(0)
