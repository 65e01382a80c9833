"""The local sandbox's helper: runs one command, enforces its deadline and its limits, and kills
every process the command started. It stays outside the command's jail: the command never sees
it, its argv (which names the worker's pid) or its environment (empty in a jail).

A fresh interpreter (`python -I -S -c "import _reaper; _reaper.main(...)"`: cached bytecode),
not a fork of the worker (Python in a fork of a threaded process can deadlock); on every
command's critical path, so it imports only light modules (typing, signal, json or subprocess
would each add 10-15 ms of startup; ctypes 5 ms, which only the unjailed mode pays).

argv: MODE TIMEOUT_S GRACE_S PARENT_PID, the five RLIMITS ("" unlimited), then PIDS MEMORY_MB
DISK_MB (the jail's caps, "" none) and WATCH (the work dir), then `--` and the argv to run.
MODE "jail": the argv is a bubblewrap command line (the reaper adds `--json-status-fd`); MODE
"plain": `shell -c command` run as the worker's user (trusted code only). fd 0: /dev/null;
fd 2: the output file, the command's stdout and stderr; fd 1: the status, `key=value` lines.

Jail: bwrap's outer process (our child) exits when the command (pid 2 inside) does, with its
status (128+N for a signal), and the jail's init (pid 1 inside) dies with it (--die-with-parent),
which makes the kernel kill everything left in the jail's pid namespace. The reaper holds a
pidfd on that init and returns only once it is gone: nothing the command started is running.
(Orphaned by bwrap's exit, the init is reaped by the machine's init, not by us: being a child
subreaper would take ctypes, 5 ms a command.)
Limits the kernel does not enforce for a worker running as root (processes: RLIMIT_NPROC does not
apply to root) or at all (the jail's total memory, the work dir's size) are polled: past one,
the init gets SIGKILL and every process of the jail too (each killed process can fork no more,
so a fork bomb stops within a round or two).

Plain: a child subreaper (Linux prctl), so orphans (double forks, setsid) reparent to it, not to
init, and stay in its ppid tree in /proc; the deadline and the worker's death as in the jail.
"""

from __future__ import annotations

import os
import resource
import select
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
TICK_S = 0.02  # how often the jail's process count, the deadline and the worker are checked
# Memory and disk are measured at most this often, and at most a twentieth of the time (a work
# dir of many files, a build of many processes: the measure's own cost stays small).
SLOW_TICK_S, COST_SHARE = 0.2, 20
BLOCK = 4096  # a file costs at least a block (an inode): a million empty files fill a disk too
PAGE = os.sysconf("SC_PAGE_SIZE")
S_IFMT, S_IFREG = 0o170000, 0o100000
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


# --- The jail --------------------------------------------------------------------------------


class Jail:
    """The jail seen from outside: its init (a pidfd, checked to be in the jail's pid namespace)
    and its processes, listed from the jail's own /proc when it has one, else by walking the
    init's descendants in ours."""

    def __init__(self, init_pid: int, pidns: tuple[int, int]) -> None:
        self.init_pid, self.pidns = init_pid, pidns
        self.init_fd = self._pidfd(init_pid)
        self.procfd: int | None = None
        self.own_proc_tried = 0

    def _pidfd(self, pid: int) -> int | None:
        """A pidfd on `pid` if it is (still) a process of the jail: a pid reused meanwhile by
        another process is never signalled."""
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return None
        try:
            found = os.stat(f"/proc/{pid}/ns/pid")
            if (found.st_dev, found.st_ino) == self.pidns:
                return fd
        except OSError:
            pass
        os.close(fd)
        return None

    def _own_proc(self) -> int | None:
        """The jail's /proc (its pid namespace's processes only), once bwrap has mounted it: a
        folder whose `1` is the jail's init in the jail's namespace is nothing else."""
        if self.procfd is None and self.own_proc_tried < 50:
            self.own_proc_tried += 1
            try:
                fd = os.open(f"/proc/{self.init_pid}/root/proc", os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                return None
            try:
                found = os.stat("1/ns/pid", dir_fd=fd)
                if (found.st_dev, found.st_ino) == self.pidns:
                    self.procfd = fd
                    return fd
            except OSError:
                pass
            os.close(fd)
        return self.procfd

    def others(self) -> list[str]:
        """The jail's processes but its init."""
        names = self.processes()
        init = "1" if self.procfd is not None else str(self.init_pid)
        return [name for name in names if name != init]

    def processes(self) -> list[str]:
        """The jail's processes: names in its /proc, or our pids of the init's descendants."""
        procfd = self._own_proc()
        if procfd is not None:
            try:
                return [name for name in os.listdir(procfd) if name.isdigit()]
            except OSError:
                return []
        found, stack = [], [self.init_pid]
        while stack:
            pid = stack.pop()
            found.append(str(pid))
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for task in tasks:  # a child's parent is the thread that forked it
                try:
                    with open(f"/proc/{pid}/task/{task}/children", "rb") as children:
                        stack += [int(child) for child in children.read().split()]
                except OSError:
                    continue
        return found

    def _path(self, name: str) -> tuple[str, int | None]:
        procfd = self.procfd
        return (name, procfd) if procfd is not None else (f"/proc/{name}", None)

    def usage(self, names: list[str]) -> tuple[int, int]:
        """(threads, resident bytes) of these processes."""
        threads = pages = 0
        for name in names:
            path, dir_fd = self._path(name)
            fields = read_stat(f"{path}/stat", dir_fd)
            if fields is not None and len(fields) > 21:
                threads, pages = threads + int(fields[17]), pages + int(fields[21])
        return threads, pages * PAGE

    def signal(self, names: list[str], signum: int) -> None:
        for name in names:
            path, dir_fd = self._path(name)
            if dir_fd is not None:  # a /proc/PID folder is a pidfd; the jail's own cannot lie
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY, dir_fd=dir_fd)
                except OSError:
                    continue
            else:
                found = self._pidfd(int(name))
                if found is None:
                    continue
                fd = found
            send(fd, signum)
            os.close(fd)

    def kill(self) -> None:
        """SIGKILL to the init and to every process. The init's end makes the kernel refuse
        forks in the namespace and kill all of it at once, but only once the init runs: among
        the thousands of a fork bomb that takes seconds, so it is made real-time first (where
        allowed: root). A killed process forks no more either: the rounds converge."""
        if self.init_fd is not None and send(self.init_fd, 0):  # alive: its pid is still its
            real_time(self.init_pid, os.SCHED_FIFO)  # not allowed: it runs when its turn comes
            send(self.init_fd, _signal.SIGKILL)
        self.signal(self.processes(), _signal.SIGKILL)

    def gone(self, within_s: float) -> bool:
        """Wait until the init has exited, killing meanwhile: the namespace is then empty."""
        return self.init_fd is None or self.kill_until(self.init_fd, within_s)

    def kill_until(self, pidfd: int, within_s: float) -> bool:
        """Kill in rounds until the process of `pidfd` has exited: whatever a round missed
        (forked meanwhile) the next one gets, until the init's end stops all forks."""
        start = time.monotonic()
        while not select.select([pidfd], [], [], 0)[0]:
            if time.monotonic() - start > within_s:
                return False
            self.kill()
            select.select([pidfd], [], [], 0.01)
        return True

    def open_files(self, names: list[str]) -> list[os.stat_result]:
        """What the jail's processes hold open (a deleted file still takes its space)."""
        found = []
        for name in names:
            path, dir_fd = self._path(name)
            try:
                fds = os.open(f"{path}/fd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                for entry in os.listdir(fds):
                    try:
                        found.append(os.stat(entry, dir_fd=fds))
                    except OSError:
                        continue
            except OSError:
                pass
            finally:
                os.close(fds)
        return found


class Disk:
    """The work dir's size under a cap. Measuring it walks the folder, so it is measured only
    when the file system has grown (bytes, or a block per new inode: one statvfs a tick) by what
    is left under the cap since the last measure, and at most a twentieth of the time; the
    measure counts the work dir's files and folders and the deleted files the jail still holds
    open on the same file system."""

    def __init__(self, folder: str, cap_bytes: int) -> None:
        self.folder, self.cap = folder, cap_bytes
        self.device = os.stat(folder).st_dev
        self.start = self._used()
        self.next_at = cap_bytes // 4  # the folder's size at the start is not measured
        self.size, self.next_walk = 0, 0.0

    def _used(self) -> int:
        fs = os.statvfs(self.folder)
        return (fs.f_blocks - fs.f_bfree) * fs.f_frsize + (fs.f_files - fs.f_ffree) * BLOCK

    def over(self, jail: Jail, names: list[str], now: float) -> bool:
        grown = self._used() - self.start
        if grown < self.next_at or now < self.next_walk:
            return False
        seen: set[int] = set()
        size = self._walk(self.folder, seen)
        for found in jail.open_files(names):
            if found.st_dev == self.device and found.st_nlink == 0 and found.st_ino not in seen:
                seen.add(found.st_ino)
                size += max(found.st_blocks * 512, BLOCK)
        self.size, self.next_at = size, grown + max(self.cap - size, 0)
        self.next_walk = now + COST_SHARE * (time.monotonic() - now)
        return size > self.cap

    def _walk(self, folder: str, seen: set[int]) -> int:
        size = 0
        try:
            entries = os.scandir(folder)
        except OSError:
            return 0
        with entries:
            for entry in entries:
                try:
                    found = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if found.st_dev != self.device or found.st_ino in seen:
                    continue  # another file system (a mount), or a hard link counted already
                seen.add(found.st_ino)
                size += max(found.st_blocks * 512, BLOCK)
                if entry.is_dir(follow_symlinks=False):
                    size += self._walk(entry.path, seen)
        return size


class Watch:
    """The jail's caps: processes (and threads), total resident memory, the work dir's size."""

    def __init__(self, pids: str, memory_mb: str, disk_mb: str, folder: str) -> None:
        self.pids = int(pids) if pids else None
        self.memory = int(memory_mb) << 20 if memory_mb else None
        self.disk = Disk(folder, int(disk_mb) << 20) if disk_mb else None
        self.next_slow = 0.0

    def exceeded(self, jail: Jail, now: float) -> str:
        """Why the jail must be killed now, or ""."""
        names = jail.processes()
        if self.pids is not None and len(names) > self.pids:
            return f"killed: process limit {self.pids} exceeded"
        if self.disk is not None and self.disk.over(jail, names, now):
            return (
                f"killed: disk limit {self.disk.cap >> 20} MiB exceeded (the work dir held "
                f"{self.disk.size >> 20} MiB)"
            )
        if now < self.next_slow:
            return ""
        threads, resident = jail.usage(names)
        self.next_slow = now + max(SLOW_TICK_S, COST_SHARE * (time.monotonic() - now))
        if self.pids is not None and threads > self.pids:
            return f"killed: process limit {self.pids} exceeded ({threads} threads)"
        if self.memory is not None and resident > self.memory:
            return f"killed: out of memory (limit {self.memory >> 20} MiB)"
        return ""


def send(pidfd: int, signum: int) -> bool:
    """Signal through a pidfd; False when the process is gone."""
    try:
        _signal.pidfd_send_signal(pidfd, signum)
    except OSError:
        return False
    return True


def parse_status(data: bytes) -> dict[str, int]:
    """bwrap's --json-status-fd lines ({ "child-pid": 12, "pid-namespace": 4026532254, ... }),
    read without the json module's import."""
    found: dict[str, int] = {}
    for line in data.splitlines():
        for item in line.strip().strip(b"{}").split(b","):
            key, _, value = item.partition(b":")
            try:
                found[key.strip().strip(b'"').decode()] = int(value)
            except ValueError:
                continue
    return found


def run_jailed(
    argv: list[str], timeout_s: float, grace_s: float, parent: int, limits: list[str],
    watch: Watch,
) -> dict[str, str]:  # fmt: skip
    global stopping
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
    bwrap_fd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(bwrap_fd, select.POLLIN)
    poller.register(status_read, select.POLLIN)
    poller.register(1, 0)  # POLLERR alone: the worker closed its end of our status (it died)
    deadline = time.monotonic() + timeout_s if timeout_s < 1e9 else float("inf")
    reported, jail, why, exited = b"", None, "", False
    try:
        while not exited and not why:
            now = time.monotonic()
            if now >= deadline:
                raise Stop(_signal.SIGALRM)
            wait_s = min(TICK_S, deadline - now)
            for fd, _ in poller.poll(max(wait_s, 0.001) * 1000):
                if fd == 1:
                    raise Stop(_signal.SIGTERM)
                if fd == bwrap_fd:
                    exited = True
                elif fd == status_read:
                    chunk = os.read(status_read, 4096)
                    if not chunk:
                        poller.unregister(status_read)
                    reported += chunk
            if os.getppid() != parent:  # the worker died and we were reparented
                raise Stop(_signal.SIGTERM)
            if jail is None:
                jail = start_watching(parse_status(reported))
            if jail is not None and not exited:
                why = watch.exceeded(jail, time.monotonic())
    except Stop as stop:
        stopping = True
        status["timed_out"] = str(int(stop.args[0] == _signal.SIGALRM))  # else cancelled
        if jail is not None and stop.args[0] == _signal.SIGALRM:
            # SIGTERM to all but the init, which ignores it; SIGCONT: a stopped process acts
            # on it only once resumed. The command's shell exiting ends the rest with it.
            names = jail.others()
            jail.signal(names, _signal.SIGTERM)
            jail.signal(names, _signal.SIGCONT)
            exited = bool(select.select([bwrap_fd], [], [], grace_s)[0])
    finally:
        stopping = True
    # The grace is over, a cap was passed or the worker is gone: kill it all (still setting up,
    # no jail known yet: its init dies with bwrap).
    if not exited and (jail is None or not jail.kill_until(bwrap_fd, KILL_GIVE_UP_S)):
        os.kill(pid, _signal.SIGKILL)
    code = exit_code(os.waitpid(pid, 0)[1])
    reported += drain(status_read)
    found = parse_status(reported)
    if jail is None:
        jail = start_watching(found)
    if "exit-code" in found:  # bwrap reports it once the jail was set up, never before
        status["exit_code"] = code
    elif not status["error"]:
        status["error"] = f"bubblewrap could not set up the jail (exit {code})"
    if jail is not None and not jail.gone(KILL_GIVE_UP_S):
        status["error"] = f"the jail survived SIGKILL for {KILL_GIVE_UP_S:g} s"
    status["error"] = why or status["error"]
    return status


def real_time(pid: int, policy: int) -> bool:
    """Give `pid` the lowest real-time priority, where allowed (root, CAP_SYS_NICE)."""
    try:
        os.sched_setscheduler(pid, policy, os.sched_param(1))
    except OSError:
        return False
    return True


def start_watching(found: dict[str, int]) -> Jail | None:
    if "child-pid" not in found or "pid-namespace" not in found:
        return None
    try:  # the namespace's device: nsfs's, the same for every namespace
        device = os.stat("/proc/self/ns/pid").st_dev
    except OSError:
        return None
    return Jail(found["child-pid"], (device, found["pid-namespace"]))


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


# --- Plain (unjailed: trusted code only) -------------------------------------------------------


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
    global stopping
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
        stopping = True
        _signal.setitimer(_signal.ITIMER_REAL, 0)
    survivors = kill_tree(pid, exited, subreaper, grace_s)
    status["exit_code"] = exit_code(os.waitpid(pid, 0)[1])
    if survivors:
        status["error"] = f"{survivors} processes survived SIGKILL for {KILL_GIVE_UP_S:g} s"
    return status


def main(argv: list[str]) -> None:
    split = argv.index("--")
    mode, timeout_s, grace_s, parent, *limits, pids, memory_mb, disk_mb, folder = argv[:split]
    command = argv[split + 1 :]
    for signum in (_signal.SIGTERM, _signal.SIGALRM):
        _signal.signal(signum, on_signal)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])  # a worker thread's mask is inherited
    timeout, grace = float(timeout_s), float(grace_s)
    if mode == "jail":
        watch = Watch(pids, memory_mb, disk_mb, folder)
        status = run_jailed(command, timeout, grace, int(parent), limits, watch)
    else:
        status = run_plain(command, timeout, grace, int(parent), limits)
    lines = [f"{key}={' '.join(value.split())}\n" for key, value in status.items()]
    try:
        os.write(1, "".join(lines).encode())
    finally:  # (OSError: the worker is gone, nobody to tell)
        os._exit(0)  # the interpreter's own shutdown would cost ~4 ms of the command's time


if __name__ == "__main__":
    main(sys.argv[1:])
