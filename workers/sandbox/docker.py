"""The Docker sandbox: each command runs in a fresh sibling container (Docker Engine API) with no
network, a read-only root, every capability dropped and cgroup limits, the work dir its only
writable host path; the container is removed afterwards whatever happens (docs/sandbox.md).

The deadline is kept from the worker's side (a kill at `timeout_s`); a worker that dies meanwhile
leaves its container to the next worker's `reap_orphans` (workers/sandbox/containers.py).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import requests

from workers.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    CommandResult,
    Sandbox,
    SandboxLimits,
    is_scrubbed,
    scrubbed_environment,
)
from workers.sandbox.containers import (
    EngineUnavailable,
    docker_client,
    hardening,
    host_path,
    owner_labels,
    remove_quietly,
)

if TYPE_CHECKING:
    import docker

DEFAULT_IMAGE = "arena-worker-cpu:latest"
DEFAULT_PATH = "/opt/arena/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Variables that describe the worker's machine, not the image: never passed in.
HOST_VARIABLES = frozenset(
    {"PATH", "HOME", "PWD", "OLDPWD", "HOSTNAME", "SHLVL", "_", "LD_PRELOAD", "LD_LIBRARY_PATH"}
)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
EXIT_KILLED = 137  # 128 + SIGKILL, as sh reports a killed command
OOM_EVENT_WAIT_S = 1.0  # how long a SIGKILLed command waits for the engine's OOM event
KILL_WAIT_S = 30.0  # for a killed container to be reported stopped
READ_WAIT_S = 10.0  # for the rest of the output once the container stopped
# Past its deadline, how long a container may still be ours (kill, wait, removal): labelled.
LABEL_GRACE_S = KILL_WAIT_S + READ_WAIT_S


class OutputCap:
    """A command's output, held within `max_bytes`: its head and its tail, and its full size."""

    def __init__(self, max_bytes: int) -> None:
        self.head_limit = max(max_bytes, 0) // 2
        self.tail_limit = max(max_bytes, 0) - self.head_limit
        self.head, self.tail = bytearray(), bytearray()
        self.size = 0
        self.failure: BaseException | None = None  # the stream broke off

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.tail_limit:  # trimmed now and then: amortised O(1)
            del self.tail[: len(self.tail) - self.tail_limit]

    def drain(self, stream: Iterable[bytes]) -> None:
        try:
            for chunk in stream:
                self.feed(chunk)
        except Exception as exc:  # the engine went away: the output so far is kept
            self.failure = exc

    def text(self) -> str:
        """As `read_capped` (local.py): whole, or head and tail around a marker line."""
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        if self.size <= self.head_limit + self.tail_limit:
            return (bytes(self.head) + bytes(self.tail)).decode(errors="replace")
        cut = self.size - len(self.head) - len(tail)
        marker = f"\n[... {cut} bytes of output cut by the sandbox ...]\n"
        return self.head.decode(errors="replace") + marker + tail.decode(errors="replace")


def container_environment(env: Mapping[str, str] | None, path: str) -> dict[str, str]:
    """The scrubbed environment, less what describes the worker's machine, with the image's PATH
    and a HOME the command can write (/tmp: the root is read-only)."""
    scrubbed = scrubbed_environment(env)
    kept = {k: v for k, v in scrubbed.items() if k.upper() not in HOST_VARIABLES}
    return {**kept, "PATH": path, "HOME": "/tmp"}


def image_scrubbed(image: Any) -> list[str]:
    """The variables the image's own ENV sets that the scrub would drop (the worker image's
    ARENA_WORK_DIR, say): the engine cannot unset them, the command's shell does."""
    names = (item.split("=", 1)[0] for item in image.attrs.get("Config", {}).get("Env") or [])
    return sorted({name for name in names if NAME.fullmatch(name) and is_scrubbed(name)})


def wrapper(unset: list[str]) -> str:
    """The outer shell's script: drop `unset`, join stderr to stdout (one stream, interleaved
    exactly as written: the engine reads two pipes and could reorder them), then run the
    command with `/bin/sh -c` as the local sandbox does."""
    drop = f"unset {' '.join(unset)}; " if unset else ""
    return drop + 'exec 2>&1; exec /bin/sh -c "$1"'


def ulimits(limits: SandboxLimits) -> list[Any]:
    """The per-process limits a cgroup does not cover, as `docker.types.Ulimit`s."""
    from docker.types import Ulimit

    found = [Ulimit(name="core", soft=0, hard=0)]  # no core files in the work dir
    if limits.file_size_mb is not None:
        size = limits.file_size_mb << 20
        found.append(Ulimit(name="fsize", soft=size, hard=size))
    if limits.open_files is not None:
        found.append(Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files))
    if limits.cpu_s is not None:  # SIGXCPU at the limit, SIGKILL a second later
        found.append(Ulimit(name="cpu", soft=limits.cpu_s, hard=limits.cpu_s + 1))
    return found


def out_of_memory(limits: SandboxLimits) -> str:
    if limits.memory_mb is None:
        return "killed: out of memory"
    return f"killed: out of memory (limit {limits.memory_mb} MiB)"


class DockerSandbox(Sandbox):
    """Runs `/bin/sh -c command` in a sibling container of `image`, as the worker's uid:gid.

    `work_dir`/`host_work_dir`: where the worker, itself in a container, keeps its work and
    where the engine's host has that folder (see `containers.host_path`); None: the worker
    runs on the engine's host. `network_mode`: for commands whose limits allow the network.
    `path`: PATH inside the image. `client`: a docker.DockerClient (default: DOCKER_HOST's)."""

    kind: ClassVar[str] = "docker"

    def __init__(
        self, image: str = DEFAULT_IMAGE, *, work_dir: Path | None = None,
        host_work_dir: Path | None = None, network_mode: str = "bridge", path: str = DEFAULT_PATH,
        client: docker.DockerClient | None = None,
    ) -> None:  # fmt: skip
        self.image = image
        self.work_dir = work_dir
        self.host_work_dir = host_work_dir
        self.network_mode = network_mode
        self.path = path
        self._client = client

    def engine(self) -> docker.DockerClient:
        """The engine's client, made (and pinged) on first use; EngineUnavailable if none."""
        if self._client is None:
            self._client = docker_client()
        return self._client

    def run(
        self, command: str, workdir: Path, timeout_s: float, env: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> CommandResult:  # fmt: skip
        import docker.errors

        limits = limits or SandboxLimits()
        started = time.monotonic()
        cap = OutputCap(max_output_bytes)

        def result(
            code: int | None, timed_out: bool, error: str | None, infrastructure: bool = False
        ) -> CommandResult:
            return CommandResult(
                command=command, exit_code=code, timed_out=timed_out,
                duration_s=time.monotonic() - started, output=cap.text(), output_bytes=cap.size,
                error=error, infrastructure=infrastructure,
            )  # fmt: skip

        if not Path(workdir).is_dir():
            return result(None, False, f"workdir {workdir} does not exist or is not a directory")
        if "\0" in command or math.isnan(timeout_s):
            return result(None, False, "a NUL byte in the command or a timeout_s of NaN")
        try:
            source = host_path(Path(workdir), self.work_dir, self.host_work_dir)
        except ValueError as exc:  # a workdir outside the folder shared with the engine's host
            return result(None, False, str(exc))
        try:
            client = self.engine()
            unset = image_scrubbed(client.images.get(self.image))
            options = self._options(command, Path(workdir), source, timeout_s, env, limits, unset)
            code, timed_out, oom = self._contain(client, options, timeout_s, cap)
        except EngineUnavailable as exc:
            return result(None, False, str(exc), infrastructure=True)
        except docker.errors.ImageNotFound:
            where = os.environ.get("DOCKER_HOST", "the local socket")
            why = f"image {self.image} not found on the Docker engine at {where}"
            return result(
                None, False, f"{why} (build it: scripts/build-images; never pulled)", True
            )
        except (docker.errors.DockerException, OSError) as exc:  # OSError: requests' too
            return result(None, False, f"the Docker engine failed: {exc}", infrastructure=True)
        if oom:  # whatever sh made of it (`cmd || true`), the command did not run to its end
            return result(EXIT_KILLED, timed_out, out_of_memory(limits))
        error = f"the command's output was cut short: {cap.failure}" if cap.failure else None
        return result(code, timed_out, error)

    def _options(
        self, command: str, workdir: Path, source: str, timeout_s: float,
        env: Mapping[str, str] | None, limits: SandboxLimits, unset: list[str],
    ) -> dict[str, Any]:  # fmt: skip
        """`containers.create` keyword arguments. The work dir (`source` on the engine's host)
        is mounted at the worker's own path for it: paths in the output read as on the worker.
        The entrypoint is ours, not the image's (the worker image's is tini, an init already)."""
        from docker.types import LogConfig, Mount

        inside = str(workdir.resolve())
        deadline = time.time() + timeout_s + LABEL_GRACE_S
        return {
            "image": self.image,
            "entrypoint": ["/bin/sh"],
            "command": ["-c", wrapper(unset), "/bin/sh", command],
            "working_dir": inside,
            # A mount, not a `volumes` bind: a source missing on the engine's host (a wrong
            # host_work_dir) is an error, not an empty folder the engine makes there.
            "mounts": [Mount(target=inside, source=source, type="bind", read_only=False)],
            "user": f"{os.getuid()}:{os.getgid()}",
            "environment": container_environment(env, self.path),
            "labels": owner_labels("command", deadline),
            "network_mode": self.network_mode if limits.network else "none",
            "ulimits": ulimits(limits),
            # The output is read from the attached stream, never stored by the engine: a chatty
            # command fills no disk, and `output_bytes` counts all of it.
            "log_config": LogConfig(type="none"),
            **hardening(limits.memory_mb, limits.cpus, limits.processes),
        }

    def _contain(
        self, client: docker.DockerClient, options: dict[str, Any], timeout_s: float,
        cap: OutputCap,
    ) -> tuple[int, bool, bool]:  # fmt: skip
        """Create, run and remove the container: (exit code, timed out, OOM-killed)."""
        container = client.containers.create(**options)
        try:
            outcome = self._execute(container, timeout_s, cap)
        except BaseException:
            # The first failure is the one to report (or a KeyboardInterrupt to re-raise); an
            # engine gone meanwhile leaves the container to the next worker's reap_orphans.
            with contextlib.suppress(Exception):
                remove_quietly(container)
            raise
        remove_quietly(container)
        return outcome

    def _execute(self, container: Any, timeout_s: float, cap: OutputCap) -> tuple[int, bool, bool]:
        # Attached before the start, so no output is missed; read by a thread meanwhile so the
        # command never blocks on a full stream.
        stream = container.attach(stdout=True, stderr=True, stream=True, logs=False)
        reader = threading.Thread(target=cap.drain, args=(stream,), daemon=True)
        reader.start()
        try:
            container.start()
            deadline = time.monotonic() + timeout_s
            status, timed_out = self._wait(container, deadline), False
            if status is None:
                timed_out = True
                self._kill(container)
                status = self._wait(container, time.monotonic() + KILL_WAIT_S)
                if status is None:
                    raise TimeoutError(f"the container did not stop {KILL_WAIT_S:g} s after kill")
            reader.join(READ_WAIT_S)
        finally:
            if reader.is_alive():  # the stream outlived the container (or we were interrupted)
                stream.close()
        return status, timed_out, self._oom_killed(container, status, timed_out)

    @staticmethod
    def _oom_killed(container: Any, status: int, timed_out: bool) -> bool:
        """Whether the kernel's OOM killer ended something in the container. The engine learns
        it from an event that can land just after the exit (seen with cgroup v1): a kill it
        does not yet explain is asked about again for up to OOM_EVENT_WAIT_S."""
        deadline = time.monotonic() + OOM_EVENT_WAIT_S
        while True:
            container.reload()
            if container.attrs.get("State", {}).get("OOMKilled"):
                return True
            if status != EXIT_KILLED or timed_out or time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    @staticmethod
    def _wait(container: Any, deadline: float) -> int | None:
        """The exit status, or None once `deadline` (monotonic) has passed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            # The engine's answer to a wait that timed out is a requests ConnectionError or
            # ReadTimeout, depending on the transport: told apart by the clock.
            done = container.wait(timeout=remaining if math.isfinite(remaining) else None)
        except requests.RequestException:
            if time.monotonic() < deadline - 0.05:
                raise
            return None
        return int(done.get("StatusCode", EXIT_KILLED))

    @staticmethod
    def _kill(container: Any) -> None:
        """SIGKILL to the container's init: the kernel ends its whole pid namespace."""
        import docker.errors

        try:
            container.kill()
        except docker.errors.APIError as exc:  # it exited on its own meanwhile
            if "is not running" not in str(exc):
                raise
