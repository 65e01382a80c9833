"""Why the embedded Redis stopped, or could not start, in one line: the reason it wrote last
in its log (redis.log in the data folder), and the data folder's free space when its disk is
full. A Redis that exited for a full disk comes back only once there is room, so the command
says so and ends instead of waiting for it (docs/reliability.md, "Reasons, not symptoms")."""

from __future__ import annotations

import errno
import os
from collections import deque
from pathlib import Path

from tasks.redis_health import LOW_FREE_BYTES, size
from tasks.validation import RunFailed

REDIS_LOG = "redis.log"
TAIL_LINES = 40
START_MARK = "Redis is starting"  # the first line of each start: what came before is older
# Redis's warnings at every start that say nothing about why it stopped.
STARTUP_NOISE = ("WARNING", "Configuration loaded", "Redis version=", "Server initialized")
FULL_DISK_SIGNS = ("No space left on device", "Short write", "Disk quota exceeded")
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DataDiskFull(RunFailed):
    """The data folder's disk has no room for Redis's data: one line, exit status 1 (the
    machine cannot run this now; nothing wrong with the input)."""


def last_reason(data_dir: Path) -> str | None:
    """Redis's last warning lines of its latest start ('#' lines, its startup notices left
    out), the last two joined; None when it wrote none."""
    try:
        with open(data_dir / REDIS_LOG, errors="replace") as log:
            lines = deque(log, maxlen=TAIL_LINES)
    except OSError:
        return None
    reasons: list[str] = []
    for line in lines:
        if START_MARK in line:
            reasons = []
            continue
        _, mark, text = line.partition(" # ")
        if mark and not text.strip().startswith(STARTUP_NOISE):
            reasons.append(" ".join(text.split()))
    return "; ".join(reasons[-2:]) or None


def disk_line(data_dir: Path) -> str:
    """'the data folder DIR has N free of M' (and 'its disk is full' when nearly nothing)."""
    try:
        stat = os.statvfs(data_dir)
    except OSError as exc:
        return f"the data folder {data_dir} cannot be read ({exc.strerror or exc})"
    free, total = stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize
    full = ": its disk is full" if free < LOW_FREE_BYTES else ""
    return (
        f"the data folder {data_dir} (ARENA_DATA_DIR) has {size(free)} free of {size(total)}{full}"
    )


def disk_is_full(data_dir: Path, reason: str | None) -> bool:
    try:
        stat = os.statvfs(data_dir)
    except OSError:
        return False
    low = stat.f_bavail * stat.f_frsize < LOW_FREE_BYTES
    return low or any(sign in (reason or "") for sign in FULL_DISK_SIGNS)


def redis_stopped(data_dir: Path, what: str = "the embedded Redis exited") -> RunFailed:
    """The error of an embedded Redis that stopped or did not start: its log's reason and the
    data folder's free space; DataDiskFull when the disk is full."""
    reason = last_reason(data_dir)
    line = f"{what}" + (f" ({reason})" if reason else "") + f"; {disk_line(data_dir)}"
    if disk_is_full(data_dir, reason):
        return DataDiskFull(f"{line}: free space there, or set ARENA_DATA_DIR to another disk")
    return RunFailed(f"{line}; see {data_dir / REDIS_LOG}")


def check_room(data_dir: Path, probe_bytes: int = 64 * 1024) -> None:
    """DataDiskFull when `probe_bytes` cannot be written and synced in the data folder (what
    Redis's append-only file needs first), before anything starts there."""
    probe = data_dir / ".arena-room"
    try:
        with open(probe, "wb") as out:
            out.write(bytes(probe_bytes))
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        if exc.errno not in DISK_FULL_ERRNOS:
            raise
        raise DataDiskFull(
            f"no room for Redis's data: {disk_line(data_dir)}; free space there, or set "
            "ARENA_DATA_DIR to another disk"
        ) from None
    finally:
        probe.unlink(missing_ok=True)
