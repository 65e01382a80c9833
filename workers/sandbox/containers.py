"""What every container Arena starts for code it did not write has in common: the engine client,
the hardening options, the labels, and the reaping of containers a dead worker left behind.

The Docker sandbox (race commands) and agent images (Mario, Alympics) both start sibling
containers through the Docker Engine API; they share these so that one reaper finds them all.

Labels: `arena.sandbox=1` on every such container; `arena.host` and `arena.pid` name the worker
process that owns it; `arena.deadline` is the Unix time after which nobody waits for it. A
worker reaps at start (`reap_orphans`): its own host's containers whose owner process is gone,
and any Arena container a minute past its deadline (its owner died or hung, wherever it ran).
"""

from __future__ import annotations

import os
import re
import socket
import time
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import docker

LABEL = "arena.sandbox"
LABEL_HOST = "arena.host"
LABEL_PID = "arena.pid"
LABEL_DEADLINE = "arena.deadline"
LABEL_OWNER = "arena.owner"  # process_identity() of the owning worker process
LABEL_CONTAINER = "arena.owner-container"  # the owner's own container, when it runs in one
LABEL_KIND = "arena.kind"  # "command" (a sandboxed shell command) or "agent" (an agent image)
# How long past its deadline a container may live before any worker removes it.
REAP_AFTER_DEADLINE_S = 60.0


class EngineUnavailable(RuntimeError):
    """No Docker engine answers where the settings point (DOCKER_HOST or the default socket)."""


def docker_client(timeout_s: float = 60.0) -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (default: the local socket), checked by a
    ping; EngineUnavailable names the address when nothing answers."""
    import docker as docker_sdk  # imported here: only workers that use Docker need the engine

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker_sdk.from_env(timeout=int(timeout_s))
        client.ping()
    except Exception as exc:  # DockerException, requests' ConnectionError, PermissionError
        raise EngineUnavailable(f"no Docker engine answers at {where}: {exc}") from exc
    return client


def owner_labels(kind: str, deadline: float) -> dict[str, str]:
    """The labels that tie a container to this worker process and say when to give up on it."""
    return {
        LABEL: "1",
        LABEL_KIND: kind,
        LABEL_HOST: socket.gethostname(),
        LABEL_PID: str(os.getpid()),
        LABEL_OWNER: process_identity(os.getpid()) or "",
        LABEL_CONTAINER: own_container_id(),
        LABEL_DEADLINE: f"{deadline:.0f}",
    }


@cache
def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def process_identity(pid: int) -> str | None:
    """`<pid namespace>/<pid>/<start time>` of a live process, None if there is none: unlike a
    pid, never the same for two processes (containers on one host share hostnames and pids)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # from field 3 on: the name may hold spaces
    if fields[0] in ("Z", "X"):
        return None  # killed, not yet reaped by its new parent: gone all the same
    return f"{_pid_namespace()}/{pid}/{fields[19]}"  # field 22: the start time


@cache
def own_container_id() -> str:
    """The id of the container this process runs in ("" on a host): the engine mounts
    /etc/hostname from the container's own folder."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/etc/hostname":
            found = re.search(r"/containers/([0-9a-f]{64})/", fields[3])
            if found:
                return found.group(1)
    return ""


def hardening(memory_mb: int | None, cpus: float | None, pids: int | None) -> dict[str, Any]:
    """`containers.create` options for untrusted code: every capability dropped, no new
    privileges, a read-only root with a private /tmp, and the cgroup limits given (memory
    without swap on top; None leaves one unlimited)."""
    options: dict[str, Any] = {
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "read_only": True,
        "tmpfs": {"/tmp": "rw,nosuid,nodev,size=512m"},
        "init": True,  # an init as PID 1 reaps zombies and forwards the kill to the tree
    }
    if memory_mb is not None:
        options["mem_limit"] = f"{memory_mb}m"
        options["memswap_limit"] = f"{memory_mb}m"
    if cpus is not None:
        options["nano_cpus"] = int(cpus * 1e9)
    if pids is not None:
        options["pids_limit"] = pids
    return options


def remove_quietly(container: Any, wait_s: float = 10.0) -> None:
    """Kill and remove a container, and return once the engine no longer lists it (a removal
    already in progress elsewhere is waited for); one already gone is fine."""
    import docker.errors  # here: only workers that use Docker need the engine

    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            container.reload()
        except docker.errors.NotFound:
            return
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_orphan(labels: dict[str, str], host: str, now: float) -> bool:
    """Whether nobody will remove this container, as far as this process can tell: it is well
    past its deadline (an owner anywhere died or hung), or its owner process was in this pid
    namespace and is gone. (`reap_orphans` also asks the engine about an owner's container.)"""
    try:
        deadline = float(labels.get(LABEL_DEADLINE, "inf"))
        pid = int(labels.get(LABEL_PID, "0"))
    except ValueError:
        return True  # labels we did not write: nobody owns it
    if now > deadline + REAP_AFTER_DEADLINE_S:
        return True
    if labels.get(LABEL_HOST) != host or pid <= 0 or pid == os.getpid():
        return False
    owner = labels.get(LABEL_OWNER)
    if not owner:  # written without an identity: the pid alone
        return not _alive(pid)
    if owner.rsplit("/", 2)[0] != _pid_namespace():
        return False  # another container's process: its pid means nothing here
    return process_identity(pid) != owner


def _owner_container_gone(client: docker.DockerClient, container: Any) -> bool:
    """The owner's container no longer runs, or restarted since (its workers are new)."""
    import docker.errors  # here: only workers that use Docker need the engine

    owner_id = container.labels.get(LABEL_CONTAINER, "")
    if not owner_id:
        return False
    try:
        owner = client.containers.get(owner_id)
    except docker.errors.NotFound:
        return True
    state = owner.attrs.get("State", {})
    started = engine_time(str(state.get("StartedAt", "")))
    return not state.get("Running") or started > engine_time(str(container.attrs.get("Created")))


def engine_time(stamp: str) -> float:
    """An engine timestamp (RFC 3339, up to nanoseconds, trailing zeros trimmed) in Unix time."""
    found = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", stamp)
    if not found:
        return 0.0
    whole, fraction, zone = found.groups()
    moment = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone))
    return moment.timestamp() + float("0." + (fraction or "0"))


def reap_orphans(client: docker.DockerClient | None = None) -> list[str]:
    """Remove Arena's containers that no live worker owns; returns their names. Called when a
    worker starts: a SIGKILLed worker's containers go with its restart, on a host or in a
    container (compose restarts it: its record says it started after they were made)."""
    client = client or docker_client()
    host, now, reaped = socket.gethostname(), time.time(), []
    # ignore_removed: a container removed between the listing and its inspection (a sandbox
    # session's, removed by the engine once it stopped) is no error.
    found = client.containers.list(all=True, filters={"label": f"{LABEL}=1"}, ignore_removed=True)
    for container in found:
        if is_orphan(container.labels, host, now) or _owner_container_gone(client, container):
            remove_quietly(container)
            reaped.append(container.name)
    return reaped


def host_path(path: Path, work_dir: Path | None = None, host_work_dir: Path | None = None) -> str:
    """The path the *engine* must bind-mount to show a sibling container `path`.

    A worker on the host passes its own paths through. A worker that itself runs in a container
    keeps its work under `work_dir` (ARENA_WORK_DIR), a bind mount of `host_work_dir` on the
    engine's host (ARENA_SANDBOX_HOST_WORK_DIR): the engine knows only the latter's paths."""
    path = Path(path).resolve()
    if work_dir is None or host_work_dir is None:
        return str(path)
    try:
        relative = path.relative_to(Path(work_dir).resolve())
    except ValueError:
        raise ValueError(
            f"{path} is not under the work dir {work_dir} shared with the engine's host"
        ) from None
    return str(Path(host_work_dir) / relative)
