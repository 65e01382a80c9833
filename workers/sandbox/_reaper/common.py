"""What both modes share: starting the command (a fork and exec in a new session, under its
rlimits), its exit status as the shell reports it, a process's stat line, signals through a
pidfd, and the stop that the deadline or SIGTERM raises until the kill has begun."""

from __future__ import annotations

import os
import resource

TYPE_CHECKING = False  # the typing module alone costs ~15 ms of startup
if TYPE_CHECKING:
    import signal as _signal  # the same functions, without the enum module's startup cost
    from types import FrameType
else:
    import _signal

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


def ignore_stops() -> None:
    """The kill has begun: the deadline and SIGTERM raise Stop no more."""
    global stopping
    stopping = True


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


def spawn(argv: list[str], limits: list[str], env: dict[str, str] | None) -> tuple[int, str]:
    """Fork and exec `argv` in a new session; (pid, "") or (0, why it failed). `env` None: ours."""
    read_end, write_end = os.pipe()  # close-on-exec: an empty read means the exec worked
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            for signum in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores them; sh must not
                _signal.signal(signum, _signal.SIG_DFL)
            apply_limits(limits)
            os.dup2(2, 1)
            os.execve(argv[0], argv, os.environ if env is None else env)
        except BaseException as exc:
            os.write(write_end, f"cannot run {argv[0]}: {exc}".encode(errors="replace"))
        finally:
            os._exit(127)
    os.close(write_end)
    with open(read_end, "rb") as pipe:
        failure = pipe.read().decode(errors="replace")
    if failure:
        os.waitpid(pid, 0)
    return (0, failure) if failure else (pid, "")


def exit_code(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return str(code if code >= 0 else 128 - code)


def read_stat(path: str, dir_fd: int | None) -> list[bytes] | None:
    """A process's stat fields after its name: [state, ppid, pgrp, session, ...]."""
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    except OSError:  # exited meanwhile
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data[data.rindex(b")") + 2 :].split() if b")" in data else None


def send(pidfd: int, signum: int) -> bool:
    """Signal through a pidfd; False when the process is gone."""
    try:
        _signal.pidfd_send_signal(pidfd, signum)
    except OSError:
        return False
    return True


def real_time(pid: int, policy: int) -> bool:
    """Give `pid` the lowest real-time priority, where allowed (root, CAP_SYS_NICE)."""
    try:
        os.sched_setscheduler(pid, policy, os.sched_param(1))
    except OSError:
        return False
    return True
