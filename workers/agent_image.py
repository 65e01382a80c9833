"""Agents packaged as Docker images, run as the 2018 Retro Contest ran submissions.

The image runs in a sibling container (workers/sandbox/containers.py: dropped capabilities, a
read-only root, memory / CPU / pids limits, the owner labels the reaper reads) with **no
network**: the only way in or out is a unix socket in a private host folder bind-mounted at
/run/arena, on which the image serves the agent contract over HTTP (workers/agent_server.py,
docs/agents.md "Agents as images"). The container runs as this worker's uid:gid (never root),
so both sides can use the socket, and is removed when the unit ends, whatever happens.

The image is run by its content id, resolved when the batch was submitted
(workers.images.image_fingerprint): a tag moved since still runs the submitted image.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workers.agent_server import encode_observation, plain
from workers.http_agent import CircuitBreaker, HttpAgentError
from workers.sandbox.base import SandboxUnavailable
from workers.sandbox.containers import (
    EngineUnavailable,
    docker_client,
    hardening,
    host_path,
    owner_labels,
    remove_quietly,
)
from workers.unix_http import UnixHttp

MOUNT = "/run/arena"
SOCKET = f"{MOUNT}/agent.sock"
# Defaults of the limits (settings to come: ARENA_AGENT_MEMORY_MB, ARENA_AGENT_PIDS, ...).
STEP_TIMEOUT_S = 10.0
START_TIMEOUT_S = 60.0
MEMORY_MB = 2048
CPUS = 1.0
PIDS = 256
# An arena-worker-cpu image starts tini, which warns when it is not PID 1 (the engine's init is).
QUIET = {"TINI_SUBREAPER": "1"}
UNPRIVILEGED = 10001  # the `arena` user of the worker image (workers/docker/Dockerfile)
LOG_TAIL_LINES = 12
EXIT_GRACE_S = 2.0  # how long a dropped connection waits for the container's exit status
MAX_SOCKET_PATH = 104  # sun_path holds 108 bytes on Linux, 104 on macOS
LOG_KEEP_BYTES = 256 << 10  # the container's output copied into the unit's log, at most


class AgentImageError(HttpAgentError):
    """The agent's fault: it did not start serving, crashed, hung past the per-step timeout or
    answered something that is not `{"action": ...}`. A fault, as an HTTP agent's would be."""


class ImageUnavailable(SandboxUnavailable):
    """Not the agent's fault: this worker's engine is down or lacks the submitted image (an
    infrastructure error; a resume runs the unit again)."""


class ImageAgent:
    """The agent in the container, as an in-process agent: `reset` and `act` forward over the
    socket; every failure is an AgentImageError naming what went wrong."""

    def __init__(self, connection: UnixHttp, container: Any, image: str, timeout_s: float) -> None:
        self._connection, self._container = connection, container
        self.image, self.timeout_s = image, timeout_s
        self.breaker = CircuitBreaker()  # a hung agent costs a few timeouts, not every move
        self._exited: str | None = None

    def reset(self, *, seed: int, **context: Any) -> None:
        body = json.dumps({"seed": seed, **context}, default=plain).encode()
        self._post("/reset", body, {"Content-Type": "application/json"})

    def act(self, observation: Any) -> Any:
        body, headers = encode_observation(observation)
        answer = self._post("/act", body, headers)
        if not isinstance(answer, dict) or "action" not in answer:
            raise AgentImageError('answer has no "action"')
        return answer["action"]

    def _post(self, path: str, body: bytes, headers: dict[str, str]) -> Any:
        if self._exited is not None:
            raise AgentImageError(self._exited)  # a dead container answers nothing more
        self.breaker.check()
        try:
            status, data = self._connection.exchange("POST", path, body, headers)
        except TimeoutError:
            self.breaker.failed()
            raise AgentImageError(
                f"no answer within {self.timeout_s:g}s (per-step timeout)"
            ) from None
        except (OSError, ValueError) as exc:  # NotHttp, or a length that is not a number
            self.breaker.failed()
            raise AgentImageError(self._why_unreachable(exc)) from None
        self.breaker.succeeded()
        try:
            answer = json.loads(data)
        except ValueError:
            raise AgentImageError(f"HTTP {status}, answer is not JSON") from None
        if not 200 <= status < 300:
            error = answer.get("error") if isinstance(answer, dict) else None
            raise AgentImageError(f"the agent failed: {error or f'HTTP {status}'}")
        return answer

    def _why_unreachable(self, exc: BaseException) -> str:
        """A crash shows first as a dropped connection: give the engine a moment to see the
        exit, so the fault names its code and last output."""
        with contextlib.suppress(Exception):
            self._container.wait(timeout=EXIT_GRACE_S)
        with contextlib.suppress(Exception):
            self._container.reload()
            if self._container.status in ("exited", "dead"):
                self._exited = f"the agent's container {exit_reason(self._container)}"
                return self._exited
        return f"request failed: {type(exc).__name__}: {exc}"


def exit_reason(container: Any) -> str:
    """How a stopped container ended, and what it printed last."""
    state = container.attrs.get("State", {})
    oom = " (killed: out of memory)" if state.get("OOMKilled") else ""
    code = state.get("ExitCode")
    return f"exited with code {code}{oom}; its last output: {last_lines(container)}"


def last_lines(container: Any, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = container.logs(tail=lines).decode(errors="replace").strip()
    except Exception as exc:  # the engine lost it: say so rather than hide the first error
        return f"(no log: {exc})"
    return " | ".join(text.splitlines())[-800:] or "(nothing)"


@contextlib.contextmanager
def image_agent(
    image: str,
    *,
    timeout_s: float = STEP_TIMEOUT_S,
    start_timeout_s: float = START_TIMEOUT_S,
    memory_mb: int | None = MEMORY_MB,
    cpus: float | None = CPUS,
    pids: int | None = PIDS,
    deadline_s: float = 3600.0,
    work_dir: Path | None = None,
    host_work_dir: Path | None = None,
    label: str | None = None,
) -> Iterator[ImageAgent]:
    """Start the image's container, wait until its socket answers, yield the agent; remove the
    container (and its folder) however the block ends. `deadline_s`: how long from now the
    reaper leaves the container to us. `work_dir`/`host_work_dir`: where the socket's folder
    lives for a worker that itself runs in a container (workers.sandbox.containers.host_path).
    `label`: how messages name the image (default: `image`)."""
    label = label or image
    try:
        client = docker_client()
    except EngineUnavailable as exc:
        raise ImageUnavailable(f"agent image {label}: {exc}") from None
    folder = Path(tempfile.mkdtemp(prefix="arena-agent-", dir=work_dir))
    if len(str(folder / "agent.sock")) > MAX_SOCKET_PATH:
        shutil.rmtree(folder, ignore_errors=True)
        client.close()
        raise ImageUnavailable(
            f"{folder}: too long a path for a unix socket (shorten the work dir)"
        )
    user = container_user()
    if user != (os.getuid(), os.getgid()):
        os.chown(folder, *user)  # a root worker: the agent's own user makes the socket
    name = f"arena-agent-{uuid.uuid4().hex[:12]}"  # removable by name if create is interrupted
    container: Any = None
    try:
        options = hardening(memory_mb, cpus, pids)
        mount = host_path(folder, work_dir, host_work_dir)
        container = _create(client, image, label, name, mount, user, options, deadline_s)
        _start(container, label)
        connection = UnixHttp(folder / "agent.sock", timeout_s)
        try:
            _wait_ready(connection, container, label, start_timeout_s)
            yield ImageAgent(connection, container, label, timeout_s)
        finally:
            connection.close()
    finally:
        # In a thread of its own: the unit's deadline re-fires every second in the main thread
        # (tasks/execute.py) and must not cut the removal short; the thread finishes it.
        cleanup = threading.Thread(target=_cleanup, args=(client, container, name, folder))
        cleanup.start()
        cleanup.join()


def container_user() -> tuple[int, int]:
    """The uid:gid the agent runs as: the worker's own, so both sides may use the socket, but
    never root (a worker running as root gives the agent the worker image's user)."""
    uid, gid = os.getuid(), os.getgid()
    return (uid, gid) if uid != 0 else (UNPRIVILEGED, UNPRIVILEGED)


def _create(
    client: Any,
    image: str,
    label: str,
    name: str,
    mount: str,
    user: tuple[int, int],
    options: dict[str, Any],
    deadline_s: float,
) -> Any:
    import docker.errors  # here: only workers that use Docker need the engine

    try:
        return client.containers.create(
            image,
            name=name,
            network_mode="none",
            user=f"{user[0]}:{user[1]}",
            volumes={mount: {"bind": MOUNT, "mode": "rw"}},
            environment={"ARENA_AGENT_SOCKET": SOCKET, "PYTHONDONTWRITEBYTECODE": "1", **QUIET},
            labels=owner_labels("agent", time.time() + deadline_s),
            **options,
        )
    except docker.errors.ImageNotFound:
        raise ImageUnavailable(f"this worker's Docker engine has no image {label}") from None
    except docker.errors.APIError as exc:
        raise ImageUnavailable(f"the engine refused to create agent image {label}: {exc}") from None


def _start(container: Any, image: str) -> None:
    import docker.errors  # here: only workers that use Docker need the engine

    try:
        container.start()
    except docker.errors.APIError as exc:  # e.g. its CMD is not in the image: the agent's doing
        raise AgentImageError(f"agent image {image} did not start: {exc.explanation}") from None


def _wait_ready(connection: UnixHttp, container: Any, image: str, timeout_s: float) -> None:
    """Until `GET /health` gets any HTTP answer; an exit or the start timeout is the agent's
    fault, named with the image and its last log lines."""
    end = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        if os.path.exists(connection.socket_path):
            with contextlib.suppress(OSError, ValueError):  # NotHttp too
                connection.exchange("GET", "/health")
                return
        container.reload()
        if container.status in ("exited", "dead"):
            raise AgentImageError(
                f"agent image {image} answered nothing on {SOCKET}: it {exit_reason(container)}"
            )
        if time.monotonic() > end:
            raise AgentImageError(
                f"agent image {image} did not answer on {SOCKET} within {timeout_s:g}s; "
                f"its last output: {last_lines(container)}"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def _cleanup(client: Any, container: Any, name: str, folder: Path) -> None:
    try:
        _remove(client, container, name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        client.close()


def _remove(client: Any, container: Any, name: str) -> None:
    """Copy what the container printed into the unit's log, then remove it."""
    import docker.errors  # here: only workers that use Docker need the engine

    if container is None:
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            container = client.containers.get(name)
    if container is None:
        return
    with contextlib.suppress(Exception):  # the log is a courtesy; removal is what matters
        output = container.logs()[-LOG_KEEP_BYTES:].decode(errors="replace")
        if output:
            sys.stderr.write(f"--- agent container {name} ---\n{output}")
            sys.stderr.flush()
    try:
        remove_quietly(container)
    except Exception as exc:  # never hide the unit's own error; the reaper removes it later
        print(f"could not remove agent container {name}: {exc}", file=sys.stderr)
