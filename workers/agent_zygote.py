"""The jail's fork server (the zygote) of the agent sandbox: what forks each unit's child and ends
it, and keeps the jail as fresh as it was between units (workers/agent_child.py says how a jail
works as a whole). Arena's code only, standard library only: it runs before any agent code."""

from __future__ import annotations

import contextlib
import mmap
import os
import select
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workers import agent_precompile
from workers.agent_jail import WRITABLE, JailState
from workers.agent_wire import SPIN_S, Pacer, encode_answer, receive_request

# How long a spare told to go has to say it began (it is awake, roused: microseconds); one
# that does not is ended and the unit gets a new child.
BEGUN_TIMEOUT_S = 2.0

# What a forked child runs (agent_child.unit_child): the zygote, the child's socket, the `make`
# it serves, and the pipe's end a spare waits on (None: it begins at once). Never returns.
UnitChild = Callable[["Zygote", socket.socket, dict[str, Any], "int | None"], None]


def send(sock: socket.socket, answer: dict[str, Any]) -> None:
    sock.sendall(encode_answer(answer))


@dataclass
class Spare:
    """The next unit's child, forked as soon as a unit's child was handed out (a jail serves one
    agent: the next `make` is most likely the last one's): its limits and filter in place, it
    waits on `go` before anything of the agent's runs, and `go` comes only once the unit before
    it has ended and the jail is put back as it was. Until then it is not dumpable: the unit
    child running beside it can neither read nor change it (only kill or stop it, which the
    zygote sees, `Zygote._release`, and answers with a fresh fork)."""

    pid: int
    sock: socket.socket  # the worker's end of its socket
    argument: dict[str, Any]  # the `make` it was forked for
    go: int | None  # the pipe's end it waits on; None once it was told to go


class Zygote:
    """The fork server: Arena's code only, one unit child at a time, and the next one waiting
    (Spare)."""

    def __init__(
        self, control: socket.socket, config: dict[str, Any], unit_child: UnitChild
    ) -> None:
        self.control, self.config, self.unit_child = control, config, unit_child
        self.child: int | None = None
        self.spin_s = float(config.get("spin_s", SPIN_S))
        shm_fd = int(config.get("shm_fd", -1))
        self.shm = mmap.mmap(shm_fd, 0, prot=mmap.PROT_READ) if shm_fd >= 0 else None
        if shm_fd >= 0:
            os.close(shm_fd)  # the mapping stays; the unit child gets no descriptor to map anew
        self.fresh = JailState.taken(WRITABLE)
        self.spare: Spare | None = None

    def serve(self) -> None:
        buffer, pacer = bytearray(), Pacer(self.spin_s)
        while (request := receive_request(self.control, buffer, pacer)) is not None:
            op, argument = request
            if op == "make":
                self.fork(argument)
            elif op == "end":
                self._rouse()
                send(self.control, {"ok": self.end(float(argument.get("wait_s", 0)))})
                self._release()  # the jail is as it was at the start: the spare may begin
            else:
                send(self.control, {"raised": ["ValueError", f"unknown request {op!r}"]})
            pacer.sent()
        self.end(0)
        self._drop_spare()

    def fork(self, argument: dict[str, Any]) -> None:
        """A unit child that makes the agent and serves its unit on a socket of its own, whose
        other end goes to the worker with the answer {"unit": pid}: the spare when it was
        forked for this very `make`, else a new one. Then the next spare, if asked for."""
        if self.child is not None:
            self.end(0)
        if "entry_point" in argument:  # compiled once here, imported afresh in each child
            agent_precompile.precompile(str(argument["entry_point"]).partition(":")[0])
        spare, self.spare = self.spare, None
        if spare is not None and spare.argument == argument and self._release(spare):
            pid, ours = spare.pid, spare.sock
        else:
            self._drop_spare(spare)
            pid, ours = self._forked(argument)
        self.child = pid
        socket.send_fds(self.control, [encode_answer({"ok": {"unit": pid}})], [ours.fileno()])
        ours.close()
        if argument.get("spare"):
            go, told = os.pipe()
            self.spare = Spare(*self._forked(argument, (go, told)), dict(argument), told)
            os.close(go)

    def _forked(
        self, argument: dict[str, Any], pipe: tuple[int, int] | None = None
    ) -> tuple[int, socket.socket]:
        """A unit child; a spare (`pipe`: the end it waits on, the zygote's end) waits."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            ours.close()
            if pipe is not None:
                os.close(pipe[1])
            self.unit_child(self, theirs, dict(argument), None if pipe is None else pipe[0])
        theirs.close()
        return pid, ours

    def _rouse(self) -> None:
        """Wake the spare to wait for its `go` without sleeping: waking a sleeping process
        costs ~1 ms on a virtual machine's idle CPU, spent while this one ends the unit."""
        if self.spare is not None and self.spare.go is not None:
            with contextlib.suppress(OSError):
                os.write(self.spare.go, b"w")

    def _release(self, spare: Spare | None = None) -> bool:
        """Tell the spare (`self.spare` if none is given) to begin, the jail being fresh and no
        other unit child alive, and hear it say it began: False, and the spare ended, if it is
        dead or stopped (a signal the last unit sent it may still be on its way: only its
        answer tells)."""
        spare = spare or self.spare
        if spare is None or spare.go is None:
            return spare is not None
        go, spare.go = spare.go, None
        try:
            changed = os.waitid(
                os.P_PID, spare.pid, os.WEXITED | os.WSTOPPED | os.WNOHANG | os.WNOWAIT
            )
            if changed is None:
                os.write(go, b"g")
                spare.sock.settimeout(BEGUN_TIMEOUT_S)
                begun = spare.sock.recv(1) == b"!"
                spare.sock.settimeout(None)
                if begun:
                    return True
        except OSError:  # its socket timed out, or it is gone
            pass
        finally:
            os.close(go)
        self._drop_spare(spare)  # and no longer self.spare, if it was
        return False

    def _drop_spare(self, spare: Spare | None = None) -> None:
        """A spare not wanted after all is ended; the jail put back if it had begun."""
        spare = spare or self.spare
        if spare is None:
            return
        if spare is self.spare:
            self.spare = None
        began = spare.go is None
        if spare.go is not None:
            os.close(spare.go)  # it reads the end of the pipe and exits
        spare.sock.close()
        _reap(spare.pid, 0)
        if began:
            self.fresh.restore()

    def end(self, wait_s: float) -> dict[str, Any]:
        """The unit child ended (given `wait_s` to exit by itself, then killed) and the jail's
        writable places as they were at the start: how it ended, its CPU time, and whether the
        jail is as fresh as it was (else the worker does not reuse it)."""
        if self.child is None:
            return {"code": None, "clean": self.fresh.restore()}
        pid, self.child = self.child, None
        code, cpu_s = _reap(pid, wait_s)
        return {"code": code, "cpu_s": cpu_s, "clean": self.fresh.restore()}


def _reap(pid: int, wait_s: float) -> tuple[int, float]:
    """A child ended, given `wait_s` to exit by itself, then killed: its exit code, CPU time."""
    _wait_for(pid, wait_s)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    return _exit_code(status), usage.ru_utime + usage.ru_stime


def _wait_for(pid: int, wait_s: float) -> None:
    """Until the child has exited, for at most wait_s."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # gone already, or a kernel without pidfds: it is killed at once
        return
    try:
        select.select([pidfd], [], [], wait_s)
    finally:
        os.close(pidfd)


def _exit_code(status: int) -> int:
    """As bwrap reports its child's end: the exit status, or 128 + the signal that killed it."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code
