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
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import docker

LABEL = "arena.sandbox"
LABEL_HOST = "arena.host"
LABEL_PID = "arena.pid"
LABEL_DEADLINE = "arena.deadline"
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
        LABEL_DEADLINE: f"{deadline:.0f}",
    }


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


def remove_quietly(container: Any) -> None:
    """Kill and remove a container; one already gone is fine."""
    import docker.errors

    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_orphan(labels: dict[str, str], host: str, now: float) -> bool:
    """Whether nobody will remove this container: its owner on this host is gone, or it is well
    past its deadline (an owner elsewhere died, or hung)."""
    try:
        deadline = float(labels.get(LABEL_DEADLINE, "inf"))
        pid = int(labels.get(LABEL_PID, "0"))
    except ValueError:
        return True  # labels we did not write: nobody owns it
    if now > deadline + REAP_AFTER_DEADLINE_S:
        return True
    return labels.get(LABEL_HOST) == host and pid > 0 and pid != os.getpid() and not _alive(pid)


def reap_orphans(client: docker.DockerClient | None = None) -> list[str]:
    """Remove Arena's containers that no live worker owns; returns their names. Called when a
    worker starts (a SIGKILLed worker's containers go with its restart)."""
    client = client or docker_client()
    host, now, reaped = socket.gethostname(), time.time(), []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=1"}):
        if is_orphan(container.labels, host, now):
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
