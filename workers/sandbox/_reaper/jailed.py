"""A jailed run. bwrap's outer process (our child) exits when the command (pid 2 inside) does,
with its status (128+N for a signal), and the jail's init (pid 1 inside) dies with it
(--die-with-parent), which makes the kernel kill everything left in the jail's pid namespace.
The reaper holds a pidfd on that init and returns only once it is gone: nothing the command
started is running. (Orphaned by bwrap's exit, the init is reaped by the machine's init, not by
us: being a child subreaper would take ctypes, 5 ms a command.) Meanwhile it watches the
deadline, the worker and the jail's caps (caps.py), and kills the jail past any of them."""

from __future__ import annotations

import os
import select
import time

from .common import KILL_GIVE_UP_S, Stop, exit_code, ignore_stops, real_time, spawn
from .jail import Jail, parse_status, start_watching

TYPE_CHECKING = False  # the typing module alone costs ~15 ms of startup
if TYPE_CHECKING:
    import signal as _signal  # the same functions, without the enum module's startup cost

    from .caps import Watch
else:
    import _signal

TICK_S = 0.02  # how often the jail's process count, the deadline and the worker are checked


class JailedRun:
    """bwrap's process once started, what it has reported on its status pipe, the jail once
    known, and why it must be killed (a cap passed) or whether it has exited."""

    def __init__(self, pid: int, status_read: int) -> None:
        self.pid, self.status_read = pid, status_read
        self.bwrap_fd = os.pidfd_open(pid)
        self.poller = select.poll()
        self.poller.register(self.bwrap_fd, select.POLLIN)
        self.poller.register(status_read, select.POLLIN)
        # POLLERR alone: the worker closed its end of our status (it died).
        self.poller.register(1, 0)
        self.reported = b""
        self.jail: Jail | None = None
        self.why, self.exited = "", False

    def watch(self, deadline: float, parent: int, watch: Watch) -> None:
        """Until bwrap exits or a cap is passed; Stop at the deadline or once the worker is
        gone."""
        while not self.exited and not self.why:
            now = time.monotonic()
            if now >= deadline:
                raise Stop(_signal.SIGALRM)
            wait_s = min(TICK_S, deadline - now)
            for fd, _ in self.poller.poll(max(wait_s, 0.001) * 1000):
                if fd == 1:
                    raise Stop(_signal.SIGTERM)
                if fd == self.bwrap_fd:
                    self.exited = True
                elif fd == self.status_read:
                    chunk = os.read(self.status_read, 4096)
                    if not chunk:
                        self.poller.unregister(self.status_read)
                    self.reported += chunk
            if os.getppid() != parent:  # the worker died and we were reparented
                raise Stop(_signal.SIGTERM)
            if self.jail is None:
                self.jail = start_watching(parse_status(self.reported))
            if self.jail is not None and not self.exited:
                self.why = watch.exceeded(self.jail, time.monotonic())

    def grace(self, jail: Jail, grace_s: float) -> None:
        """SIGTERM to all but the init, which ignores it; SIGCONT: a stopped process acts on it
        only once resumed. The command's shell exiting ends the rest with it."""
        names = jail.others()
        jail.signal(names, _signal.SIGTERM)
        jail.signal(names, _signal.SIGCONT)
        self.exited = bool(select.select([self.bwrap_fd], [], [], grace_s)[0])

    def end(self, status: dict[str, str]) -> None:
        """Kill it all (the grace is over, a cap was passed or the worker is gone; still setting
        up, no jail known yet: its init dies with bwrap), then fill in `status`."""
        jail = self.jail
        if not self.exited and (jail is None or not jail.kill_until(self.bwrap_fd, KILL_GIVE_UP_S)):
            os.kill(self.pid, _signal.SIGKILL)
        code = exit_code(os.waitpid(self.pid, 0)[1])
        self.reported += drain(self.status_read)
        found = parse_status(self.reported)
        if jail is None:
            jail = start_watching(found)
        if "exit-code" in found:  # bwrap reports it once the jail was set up, never before
            status["exit_code"] = code
        elif not status["error"]:
            status["error"] = f"bubblewrap could not set up the jail (exit {code})"
        if jail is not None and not jail.gone(KILL_GIVE_UP_S):
            status["error"] = f"the jail survived SIGKILL for {KILL_GIVE_UP_S:g} s"
        status["error"] = self.why or status["error"]


def run_jailed(
    argv: list[str],
    timeout_s: float,
    grace_s: float,
    parent: int,
    limits: list[str],
    watch: Watch,
) -> dict[str, str]:
    # Real-time (where allowed: root, CAP_SYS_NICE), its children not: a fork bomb's thousands
    # of processes would otherwise starve the one process that counts and kills them. It
    # sleeps but for a few milliseconds a tick.
    real_time(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK)
    status_read, status_write = os.pipe()
    os.set_inheritable(status_write, True)
    argv = [argv[0], "--json-status-fd", str(status_write), *argv[1:]]
    # An empty environment: the jail's init is a fork of bwrap, and its /proc/1/environ (which
    # the command can read) is what bwrap was started with.
    pid, failure = spawn(argv, limits, env={})
    os.close(status_write)
    status = {"exit_code": "", "timed_out": "0", "error": failure}
    if failure:
        return status
    run = JailedRun(pid, status_read)
    deadline = time.monotonic() + timeout_s if timeout_s < 1e9 else float("inf")
    try:
        run.watch(deadline, parent, watch)
    except Stop as stop:
        ignore_stops()
        status["timed_out"] = str(int(stop.args[0] == _signal.SIGALRM))  # else cancelled
        if run.jail is not None and stop.args[0] == _signal.SIGALRM:
            run.grace(run.jail, grace_s)
    finally:
        ignore_stops()
    run.end(status)
    return status


def drain(fd: int) -> bytes:
    data = b""
    try:
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data
