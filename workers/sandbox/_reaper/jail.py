"""The jail seen from outside: its init (a pidfd, checked to be in the jail's pid namespace),
its processes (from the jail's own /proc once bwrap has mounted it, else the init's descendants
in ours), what they use and hold open, and the kill in rounds that empties the namespace; and
where bwrap reports the jail (its --json-status-fd)."""

from __future__ import annotations

import os
import select
import time

from .common import read_stat, real_time, send

TYPE_CHECKING = False  # the typing module alone costs ~15 ms of startup
if TYPE_CHECKING:
    import signal as _signal  # the same functions, without the enum module's startup cost
else:
    import _signal

PAGE = os.sysconf("SC_PAGE_SIZE")


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


def start_watching(found: dict[str, int]) -> Jail | None:
    if "child-pid" not in found or "pid-namespace" not in found:
        return None
    try:  # the namespace's device: nsfs's, the same for every namespace
        device = os.stat("/proc/self/ns/pid").st_dev
    except OSError:
        return None
    return Jail(found["child-pid"], (device, found["pid-namespace"]))
