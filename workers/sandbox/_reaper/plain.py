"""An unjailed run (trusted code only): the reaper is a child subreaper (Linux prctl), so
orphans (double forks, setsid) reparent to it, not to init, and stay in its ppid tree in /proc;
at the end everything in that tree, the command's session and its group is killed. The worker's
death cancels the command (PR_SET_PDEATHSIG); the deadline is an interval timer (SIGALRM)."""

from __future__ import annotations

import os
import time

from .common import KILL_GIVE_UP_S, Stop, exit_code, ignore_stops, read_stat, spawn

TYPE_CHECKING = False  # the typing module alone costs ~15 ms of startup
if TYPE_CHECKING:
    import signal as _signal  # the same functions, without the enum module's startup cost
else:
    import _signal

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


def prctl(option: int, arg: int) -> bool:
    try:
        import ctypes  # here: 5 ms of startup, which only the unjailed mode pays

        return int(ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def targets(command_pid: int) -> list[int] | None:
    """The live processes the command left (None without /proc): our descendants (all of them,
    as a subreaper) and any process in its session or group. Reaps our exited children but the
    command, kept a zombie so that its pid, the session's and group's id, is not reused."""
    try:
        names = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    table: dict[int, list[bytes]] = {}  # pid -> [state, ppid, pgrp, session, ...]
    for pid in names:
        fields = read_stat(f"/proc/{pid}/stat", None)
        if fields is not None:
            table[pid] = fields
    me, found, children = os.getpid(), set[int](), dict[int, list[int]]()
    for pid, fields in table.items():
        children.setdefault(int(fields[1]), []).append(pid)
        if command_pid in (int(fields[2]), int(fields[3])):
            found.add(pid)
    stack = [me, *found]
    while stack:
        new = [c for c in children.get(stack.pop(), []) if c not in found]
        found.update(new)
        stack += new
    live = []
    for pid in found - {me}:
        if table[pid][0] not in (b"Z", b"X"):
            live.append(pid)
        elif int(table[pid][1]) == me and pid != command_pid:
            os.waitpid(pid, os.WNOHANG)
    return live


def signal_all(pids: list[int], signum: int) -> None:
    # SIGCONT: a stopped process acts on SIGTERM only once resumed.
    for pid, sig in [(p, s) for p in pids for s in (signum, _signal.SIGCONT)]:
        try:
            os.kill(pid, sig)
        except OSError:  # gone meanwhile
            continue


def only_child(command_pid: int) -> bool:
    """Whether the command (exited: a zombie) is our only child: as a subreaper we then have no
    other descendant, and the /proc scan is skipped."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as file:
            return file.read().split() == [str(command_pid)]
    except OSError:
        return False


def kill_tree(command_pid: int, exited: bool, subreaper: bool, grace_s: float) -> int:
    """Kill what is left: SIGTERM, then SIGKILL after `grace_s`; a process found later in a
    phase (forked meanwhile) gets its signal too. Returns how many survived."""
    if exited and subreaper and only_child(command_pid):
        return 0
    left = targets(command_pid)
    for signum, within_s in ((_signal.SIGTERM, grace_s), (_signal.SIGKILL, KILL_GIVE_UP_S)):
        if left == []:
            return 0
        signal_all([-command_pid, *(left or [])], signum)
        if left is None:  # no /proc (not Linux): only the command itself can be watched
            wait = os.WEXITED | os.WNOHANG | os.WNOWAIT
            start = time.monotonic()
            while not exited and time.monotonic() - start < grace_s:
                time.sleep(0.01)
                exited = os.waitid(os.P_PID, command_pid, wait) is not None
            continue
        sent, start, pause = set(left), time.monotonic(), 0.002
        while left and time.monotonic() - start < within_s:
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
            left = targets(command_pid) or []
            signal_all([p for p in left if p not in sent], signum)
            sent.update(left)
    return len(left or [])


def run_plain(
    argv: list[str], timeout_s: float, grace_s: float, parent: int, limits: list[str]
) -> dict[str, str]:
    # The worker dying (killed) cancels the command: SIGTERM reaches us.
    if prctl(PR_SET_PDEATHSIG, _signal.SIGTERM) and os.getppid() != parent:
        os._exit(1)  # it died before the prctl
    subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1)
    pid, failure = spawn(argv, limits, env=None)
    status = {"subreaper": str(int(subreaper)), "exit_code": "", "timed_out": "0", "error": ""}
    if failure:
        status["error"] = failure
        return status
    exited = False
    try:
        if timeout_s < 1e9:  # else: no deadline
            _signal.setitimer(_signal.ITIMER_REAL, max(timeout_s, 1e-3))
        while not exited:  # wait for the command, reaping orphans that exit meanwhile
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
            exited = info is None or info.si_pid == pid
            if not exited and info is not None:
                os.waitpid(info.si_pid, 0)
    except Stop as stop:
        status["timed_out"] = str(int(stop.args[0] == _signal.SIGALRM))  # else cancelled
    finally:
        ignore_stops()
        _signal.setitimer(_signal.ITIMER_REAL, 0)
    survivors = kill_tree(pid, exited, subreaper, grace_s)
    status["exit_code"] = exit_code(os.waitpid(pid, 0)[1])
    if survivors:
        status["error"] = f"{survivors} processes survived SIGKILL for {KILL_GIVE_UP_S:g} s"
    return status
