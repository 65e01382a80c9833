"""Why a Redis that answers is not keeping Arena's data: it refuses writes (tasks/refusal.py:
out of memory, a replica, MISCONF), or it accepts them but fails to put them on disk (its
append-only file or its snapshot cannot be written: a full disk, most often). The second
answers every command as usual, so only INFO persistence tells (docs/reliability.md)."""

from __future__ import annotations

import shutil
from contextlib import suppress
from typing import TYPE_CHECKING

import redis

if TYPE_CHECKING:
    from tasks.store import Store

# INFO persistence's fields that read "err" once a disk write failed, and what each means.
FAILED_WRITES = {
    "aof_last_write_status": "its last write to the append-only file failed",
    "aof_last_bgrewrite_status": "its last rewrite of the append-only file failed",
    "rdb_last_bgsave_status": "its last snapshot (RDB) failed",
}
LOW_FREE_BYTES = 1 << 20  # a data folder with less than this free is called full


def redis_problem(db: Store) -> str | None:
    """One line on why Redis is not keeping what Arena writes, or None when it is: a refused
    write (the refusal's line) first, else a failed write to disk from INFO persistence, with
    Redis's data folder and, where that folder is on this machine (a unix socket), its free
    space."""
    from tasks.refusal import probe_writes  # Celery's import: only where Redis is asked

    refused = probe_writes(db)
    if refused is not None:
        return refused + (where(db) if "MISCONF" in refused else "")
    try:
        info = db.persistence()
    except redis.ResponseError:
        return None  # INFO renamed or refused (a managed Redis): nothing more to tell
    failed = [
        why
        for field, why in FAILED_WRITES.items()
        if info.get(field) == "err" and (field.startswith("rdb") or info.get("aof_enabled"))
    ]
    if not failed:
        return None
    return (
        f"Redis is not saving to disk: {'; '.join(failed)}{where(db)}: unit results may be "
        "lost if it stops; free space on its disk (a full disk?) and see its log"
    )


def where(db: Store) -> str:
    """' (in DIR[, N free])': Redis's data folder, with the free space where it is local."""
    folder, local = db.data_folder()
    if not folder:
        return ""  # CONFIG disabled (a managed Redis)
    space = free_space(folder) if local else None
    return f" (in {folder}{', ' + space if space else ''})"


def free_space(folder: str) -> str | None:
    """'N free of M' for the disk holding `folder` (None if it cannot be read)."""
    with suppress(OSError):
        usage = shutil.disk_usage(folder)
        return f"{size(usage.free)} free of {size(usage.total)}"
    return None


def size(count: int) -> str:
    """Bytes for people: 0 B, 12 KiB, 3.4 MiB, 1.2 GiB."""
    amount, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            break
        amount /= 1024
    return f"{amount:.0f} {unit}" if unit == "B" or amount >= 10 else f"{amount:.1f} {unit}"
