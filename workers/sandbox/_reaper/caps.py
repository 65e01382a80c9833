"""The jail's caps that the kernel does not enforce for a worker running as root (processes:
RLIMIT_NPROC does not apply to root) or at all (the jail's total memory, the work dir's size),
polled: past one, the jailed run kills the jail (each killed process can fork no more, so a fork
bomb stops within a round or two)."""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # the typing module alone costs ~15 ms of startup
if TYPE_CHECKING:
    from .jail import Jail

# Memory and disk are measured at most this often, and at most a twentieth of the time (a work
# dir of many files, a build of many processes: the measure's own cost stays small).
SLOW_TICK_S, COST_SHARE = 0.2, 20
BLOCK = 4096  # a file costs at least a block (an inode): a million empty files fill a disk too


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
        return tree_bytes(folder, self.device, seen)


def tree_bytes(folder: str, device: int, seen: set[int]) -> int:
    """What `folder` holds on file system `device`: allocated blocks, at least one per file or
    folder (an inode), each inode once (`seen`), links' targets and other mounts not at all."""
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
            if found.st_dev != device or found.st_ino in seen:
                continue  # another file system (a mount), or a hard link counted already
            seen.add(found.st_ino)
            size += max(found.st_blocks * 512, BLOCK)
            if entry.is_dir(follow_symlinks=False):
                size += tree_bytes(entry.path, device, seen)
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
