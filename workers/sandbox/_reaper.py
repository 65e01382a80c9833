"""The local sandbox's helper: runs one command, enforces its deadline, and kills every process
the command started. A child subreaper (Linux prctl), so orphans (double forks, setsid) reparent
to it, not to init, and stay in its ppid tree in /proc.

A fresh interpreter (`python -I -S _reaper.py ...`), not a fork of the worker (Python in a fork
of a threaded process can deadlock); on every command's critical path, so it imports only light
modules (typing, signal, json or subprocess would each add 10-15 ms of startup).
argv: shell timeout_s grace_s parent_pid, the LIMITS ("" unlimited), command. fd 0: /dev/null;
fd 2: the output file, the command's stdout and stderr; fd 1: the status, `key=value` lines.
"""

from __future__ import annotations

import os
import resource
import sys
import time

TYPE_CHECKING = False  # the typing module alone costs ~15 ms of startup
if TYPE_CHECKING:
    import signal as _signal  # the same functions, without the enum module's startup cost
    from types import FrameType
else:
    import _signal

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
# The limits in argv order, with their unit in bytes.
LIMITS = [("RLIMIT_AS", 1 << 20), ("RLIMIT_CPU", 1), ("RLIMIT_FSIZE", 1 << 20)]
LIMITS += [("RLIMIT_NOFILE", 1), ("RLIMIT_NPROC", 1)]
KILL_GIVE_UP_S = 5.0  # SIGKILL cannot fail, but a process stuck in the kernel (D state) waits
stopping = False  # once the kill has begun, the deadline and SIGTERM are ignored


class Stop(BaseException):
    """The deadline passed (args[0] is SIGALRM) or the sandbox was cancelled (SIGTERM)."""


def on_signal(signum: int, frame: FrameType | None) -> None:
    if not stopping:
        raise Stop(signum)


def prctl(option: int, arg: int) -> bool:
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def apply_limits(values: list[str]) -> None:
    """In the child: soft = hard, never above the hard limit inherited (CPU: SIGXCPU at the
    limit, SIGKILL a second later should that be ignored)."""
    wanted = [
        (getattr(resource, name, None), int(value) * scale)
        for (name, scale), value in zip(LIMITS, values, strict=True)
        if value
    ]
    for limit, soft in [*wanted, (resource.RLIMIT_CORE, 0)]:
        if limit is None:  # not on this platform
            continue
        hard, inherited = soft + (limit == resource.RLIMIT_CPU), resource.getrlimit(limit)[1]
        if inherited != resource.RLIM_INFINITY:
            soft, hard = min(soft, inherited), min(hard, inherited)
        resource.setrlimit(limit, (soft, hard))


def spawn(shell: str, command: str, limits: list[str]) -> tuple[int, str]:
    """Fork and exec `shell -c command` in a new session; (pid, "") or (0, why it failed)."""
    read_end, write_end = os.pipe()  # close-on-exec: an empty read means the exec worked
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            for signum in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores them; sh must not
                _signal.signal(signum, _signal.SIG_DFL)
            apply_limits(limits)
            os.dup2(2, 1)
            os.execv(shell, [shell, "-c", command])
        except BaseException as exc:
            os.write(write_end, f"cannot run {shell}: {exc}".encode(errors="replace"))
        finally:
            os._exit(127)
    os.close(write_end)
    with open(read_end, "rb") as pipe:
        failure = pipe.read().decode(errors="replace")
    if failure:
        os.waitpid(pid, 0)
    return (0, failure) if failure else (pid, "")


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
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                data = stat.read()
        except OSError:  # exited meanwhile
            continue
        table[pid] = data[data.rindex(b")") + 2 :].split()
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


def main(argv: list[str]) -> None:
    global stopping
    shell, timeout_s, grace_s, parent, *limits, command = argv
    for signum in (_signal.SIGTERM, _signal.SIGALRM):
        _signal.signal(signum, on_signal)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])  # a worker thread's mask is inherited
    # The worker dying (killed) cancels the command: SIGTERM reaches us.
    if prctl(PR_SET_PDEATHSIG, _signal.SIGTERM) and os.getppid() != int(parent):
        os._exit(1)  # it died before the prctl
    subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1)
    pid, failure = spawn(shell, command, limits)
    status = {"subreaper": str(int(subreaper)), "exit_code": "", "timed_out": "0", "error": ""}
    if failure:
        status["error"] = failure
    else:
        exited = False
        try:
            if float(timeout_s) < 1e9:  # else: no deadline
                _signal.setitimer(_signal.ITIMER_REAL, max(float(timeout_s), 1e-3))
            while not exited:  # wait for the command, reaping orphans that exit meanwhile
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
                exited = info is None or info.si_pid == pid
                if not exited and info is not None:
                    os.waitpid(info.si_pid, 0)
        except Stop as stop:
            status["timed_out"] = str(int(stop.args[0] == _signal.SIGALRM))  # else cancelled
        finally:
            stopping = True
            _signal.setitimer(_signal.ITIMER_REAL, 0)
        survivors = kill_tree(pid, exited, subreaper, float(grace_s))
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        status["exit_code"] = str(code if code >= 0 else 128 - code)
        if survivors:
            status["error"] = f"{survivors} processes survived SIGKILL for {KILL_GIVE_UP_S:g} s"
    lines = [f"{key}={' '.join(value.split())}\n" for key, value in status.items()]
    os.write(1, "".join(lines).encode())


if __name__ == "__main__":
    main(sys.argv[1:])
