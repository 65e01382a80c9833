"""The cache of race environments under the work dir (workers/race/environment.py builds them):
what each holds on disk, and what goes when the cache is over its quota or unused for days.

A branch decides what its environment declares, so a hostile branch could make one environment
per push (a comment changed in requirements.txt used to be enough: the key now hashes the
parsed requirements, not the files' bytes) or declare gigabytes. Two bounds hold whatever it
declares (docs/security.md, "Disk"):

- one environment is at most the check's disk limit (ARENA_SANDBOX_DISK_MB): a build past it is
  removed and the check fails naming the sizes, as a command that fills its work dir would;
- the whole cache is at most ARENA_RACE_ENV_CACHE_MB: after each build the least recently used
  environments (each use touches its marker) are removed until it fits, never one whose lock a
  check holds (a check that is building or running in it).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from workers.sandbox._reaper.caps import tree_bytes

READY = ".arena-ready"  # written last: an environment without it is a build that did not finish
SIZE = ".arena-size"  # its size in bytes, measured once it was built
# An environment no check has used this long is removed when another is built: longer than any
# check runs (3 commands × at most 6 h), so none is removed under a check using it.
UNUSED_KEPT_S = 2 * 24 * 3600.0


@contextmanager
def locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """The lock at `path`, held; with `wait=False`, yields False at once if another holds it."""
    with path.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def tree_size(folder: Path) -> int:
    """Bytes `folder` takes on its file system, measured as a sandbox's disk limit measures a
    work dir (workers/sandbox/_reaper/caps.py)."""
    return tree_bytes(str(folder), folder.stat().st_dev, set())


def write_marker(path: Path, text: str) -> None:
    """`text` in a new file at `path`, whatever was there removed first and no link followed: a
    setup command ran with the environment writable and may have left `.arena-size` as a link to
    a file of the worker's, which a plain write would overwrite outside the jail."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as marker:
        marker.write(text)


def record_size(env: Path) -> int:
    size = tree_size(env)
    write_marker(env / SIZE, str(size))
    return size


def stored_size(env: Path) -> int:
    """The environment's size as measured once it was built."""
    try:
        return int((env / SIZE).read_text())
    except (OSError, ValueError):  # built before sizes were kept: measured now, once
        return record_size(env)


def prune(cache_root: Path, now: float | None = None) -> list[str]:
    """Remove the environments no check has used for UNUSED_KEPT_S, skipping any whose lock
    another holds; the keys removed."""
    cutoff = (time.time() if now is None else now) - UNUSED_KEPT_S
    removed = []
    for marker in sorted(cache_root.glob(f"*/{READY}")):
        key = marker.parent.name
        with locked(cache_root / f"{key}.lock", wait=False) as held:
            if held and marker.is_file() and marker.stat().st_mtime < cutoff:
                shutil.rmtree(marker.parent, ignore_errors=True)
                removed.append(key)
    return removed


def evict_over(cache_root: Path, quota_bytes: int, keep: str) -> list[str]:
    """Remove the least recently used environments (not `keep`, the one just built, and none a
    check holds) until the cache fits `quota_bytes`; the keys removed."""
    ready = []
    for marker in cache_root.glob(f"*/{READY}"):
        try:
            ready.append((marker.stat().st_mtime, marker.parent))
        except OSError:
            continue  # removed meanwhile
    total = sum(stored_size(env) for _, env in ready)
    removed = []
    for _, env in sorted(ready):
        if total <= quota_bytes:
            break
        if env.name == keep:
            continue
        with locked(cache_root / f"{env.name}.lock", wait=False) as held:
            if held and (env / READY).is_file():
                size = stored_size(env)
                shutil.rmtree(env, ignore_errors=True)
                total -= size
                removed.append(env.name)
    return removed


__all__ = [
    "READY",
    "UNUSED_KEPT_S",
    "evict_over",
    "locked",
    "prune",
    "record_size",
    "stored_size",
    "tree_size",
    "write_marker",
]
