"""The writable places of an agent's jail put back as they were when it started, between one unit
and the next (workers/agent_child.py's zygote runs this after each unit child has ended): every
file and folder the unit made is removed, and what was there at the start (the folders bwrap
made to bind the agent's files under /tmp) gets back its mode, its times and no extended
attributes of the unit's. So nothing the unit wrote reaches the next unit of the agent, not even
as a folder's mode or date. Standard library only: it runs in the jail before any agent code.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field

WRITABLE = ("/tmp", "/dev/shm")  # the jail's only writable places (workers/sandbox/bwrap.py)


@dataclass
class Kept:
    """What one path was at the start."""

    mode: int
    times: tuple[int, int]  # atime, mtime (ns)
    device: int


@dataclass
class JailState:
    """The writable places as they were at the start."""

    kept: dict[str, Kept] = field(default_factory=dict)

    @classmethod
    def taken(cls, roots: tuple[str, ...]) -> JailState:
        state = cls()
        for root in roots:
            with contextlib.suppress(OSError):
                state._take(root, os.lstat(root).st_dev)
        return state

    def _take(self, path: str, device: int) -> None:
        found = os.lstat(path)
        self.kept[path] = Kept(found.st_mode, (found.st_atime_ns, found.st_mtime_ns), device)
        if found.st_dev != device or not stat.S_ISDIR(found.st_mode):
            return  # a bound file or folder: read-only, not the jail's
        for entry in os.scandir(path):
            self._take(entry.path, device)

    def restore(self) -> bool:
        """Put every root back; False if something could not be (the jail is then not reused)."""
        try:
            for root, kept in list(self.kept.items()):
                if os.path.dirname(root) not in self.kept:
                    self._restore(root, kept.device)
        except (OSError, RecursionError):
            return False
        return True

    def _restore(self, path: str, device: int) -> None:
        found = os.lstat(path)
        if found.st_dev != device:
            return
        if stat.S_ISDIR(found.st_mode):
            os.chmod(path, 0o700)  # a folder the unit made unreadable is emptied all the same
            for entry in os.scandir(path):
                if entry.path in self.kept:
                    self._restore(entry.path, device)
                else:
                    _remove(entry.path, device)
        kept = self.kept[path]
        os.chmod(path, stat.S_IMODE(kept.mode), follow_symlinks=False)
        for name in _attributes(path):
            os.removexattr(path, name, follow_symlinks=False)
        os.utime(path, ns=kept.times, follow_symlinks=False)


def _remove(path: str, device: int) -> None:
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode):
        os.unlink(path)
        return
    if found.st_dev != device:
        raise OSError(f"{path} is a mount of the unit's")  # it cannot make one: never reused
    os.chmod(path, 0o700)
    for entry in os.scandir(path):
        _remove(entry.path, device)
    os.rmdir(path)


def _attributes(path: str) -> list[str]:
    """The unit's own extended attributes (`user.`: the only ones it can set)."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:  # a file system without extended attributes
        return []
    return [name for name in names if name.startswith("user.")]
