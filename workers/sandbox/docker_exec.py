"""One command's exec in a Docker sandbox session's container: started under the wrapper and
followed to its end or the deadline (its output read by a thread meanwhile), and, where the
wrapper could not say, the container's OOM count read by another exec. The session
(workers/sandbox/docker.py) owns the container; these only use it."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workers.sandbox._reaper.caps import Disk
from workers.sandbox.docker_wrapper import (
    OOM_READ_WAIT_S,
    OOM_SCRIPT,
    OutputCap,
    WrapperStatus,
    drain_demuxed,
    keeper_uid,
)

if TYPE_CHECKING:
    import docker

DISK_TICK_S = 0.2  # how often the work dir's growth is looked at (a statvfs; a walk seldom)
EXIT_KILLED = 137  # 128 + SIGKILL, as sh reports a killed command
READ_WAIT_S = 10.0  # for the rest of the output once the container stopped


def follow(
    client: docker.DockerClient,
    exec_id: str,
    timeout_s: float,
    cap: OutputCap,
    container: Any,
    discard: Callable[[], None],
    disk: DiskCap | None = None,
) -> tuple[int, bool, bool]:
    """Start the exec in `container` and follow it to its end or the deadline: (exit code, timed
    out, OOM-killed). `discard` removes the container (with every process in it) where the
    command's end is not sure otherwise, and once the work dir passes `disk` (its `why` says)."""
    deadline = time.monotonic() + timeout_s
    status = WrapperStatus()
    stream = client.api.exec_start(exec_id, stream=True, demux=True)
    # Read by a thread meanwhile, so the command never blocks on a full stream.
    reader = threading.Thread(target=drain_demuxed, args=(stream, cap, status), daemon=True)
    reader.start()
    try:
        if _watched(reader, deadline, disk):  # past the disk limit: the container goes
            discard()
            reader.join(READ_WAIT_S)
            return EXIT_KILLED, False, False
        info = None if reader.is_alive() else finished(client, exec_id, deadline)
        if info is None:  # the deadline: the container goes, with every process in it
            oom = oom_since(client, container, status.before())
            discard()
            reader.join(READ_WAIT_S)
            return EXIT_KILLED, True, oom
    finally:
        if reader.is_alive():  # the stream outlived the container (or we were interrupted)
            stream.close()
    reported = status.outcome()
    if info.get("ExitCode") == 0 and reported is not None:  # the wrapper ran to its end
        code, ooms = reported
        if ooms:  # the OOM killer may have chosen more than the command: a fresh container
            discard()
        return code, False, ooms > 0
    # The wrapper was killed (by the command, or for memory): what the command left may
    # still run, and only the container's end is sure to stop it.
    oom = oom_since(client, container, status.before())
    discard()
    code = info.get("ExitCode")
    return (code if isinstance(code, int) else EXIT_KILLED), False, oom


class _NoJail:
    """The container's processes are the engine's: only the work dir's files are measured."""

    def open_files(self, names: list[str]) -> list[os.stat_result]:
        return []


class DiskCap:
    """The work dir's size under the check's disk limit (ARENA_SANDBOX_DISK_MB), measured as the
    local jail's helper measures it (workers/sandbox/_reaper/caps.py): the engine has no quota
    for a bind mount, so the worker measures the folder it shares with the container."""

    def __init__(self, folder: Path, cap_mb: int) -> None:
        self.disk = Disk(str(folder), cap_mb << 20)
        self.why = ""

    def exceeded(self) -> bool:
        if self.disk.over(_NoJail(), [], time.monotonic()):  # type: ignore[arg-type]
            self.why = (
                f"killed: disk limit {self.disk.cap >> 20} MiB exceeded (the work dir held "
                f"{self.disk.size >> 20} MiB)"
            )
        return bool(self.why)


def _watched(reader: threading.Thread, deadline: float, disk: DiskCap | None) -> bool:
    """Wait for `reader` to end or `deadline`; True once the work dir passed `disk`."""
    while reader.is_alive():
        left = remaining(deadline)
        if left == 0:
            return False
        waits = [t for t in (left, DISK_TICK_S if disk is not None else None) if t is not None]
        reader.join(min(waits) if waits else None)
        if disk is not None and reader.is_alive() and disk.exceeded():
            return True
    return False


def finished(client: docker.DockerClient, exec_id: str, deadline: float) -> Any:
    """The exec's record once the engine has it ended (its stream closes a moment before),
    or None once `deadline` (monotonic) has passed."""
    pause = 0.002
    while True:
        info = client.api.exec_inspect(exec_id)
        if not info.get("Running"):
            return info
        if remaining(deadline) == 0:
            return None
        time.sleep(min(pause, remaining(deadline) or pause))
        pause = min(pause * 2, 0.05)


def oom_since(client: docker.DockerClient, container: Any, before: int | None) -> bool:
    """Whether the OOM killer struck since the wrapper read `before` (None: it never did):
    the container's memory cgroup's count, read by an exec as the keeper's uid, for a
    command whose wrapper could not say (killed, or still running at the deadline). A few
    seconds at most: an exec may fail or hang in a container whose pids are used up."""
    if before is None or container is None:
        return False
    uid = keeper_uid()
    read = OOM_SCRIPT + 'arena_ooms; echo "$arena_n"'
    out, status = OutputCap(64), WrapperStatus()
    try:
        created = client.api.exec_create(container.id, ["/bin/sh", "-c", read], user=f"{uid}:{uid}")
        stream = client.api.exec_start(created["Id"], stream=True, demux=True)
    except Exception:  # DockerException, requests' errors: it stopped meanwhile, say
        return False
    reader = threading.Thread(target=drain_demuxed, args=(stream, out, status), daemon=True)
    reader.start()
    reader.join(OOM_READ_WAIT_S)
    if reader.is_alive():
        stream.close()
        return False
    text = out.text().strip()
    return text.isdigit() and int(text) > before


def remaining(deadline: float) -> float | None:
    """Seconds left until `deadline` (monotonic), never below 0; None without one."""
    if not math.isfinite(deadline):
        return None
    return max(deadline - time.monotonic(), 0.0)
