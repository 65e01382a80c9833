"""The Docker sandbox: the commands of a session (a race check's build, tests and lint) run in one
sibling container (Docker Engine API) with no network, a read-only root, every capability dropped
and cgroup limits, the work dir its only writable host path; each command is `exec`ed in it under
a wrapper that kills whatever the command left, and the container is removed when the session
ends, whatever happens (docs/sandbox.md). `DockerSandbox.run` is a session of one command.

The deadline is kept from the worker's side (the container's removal at `timeout_s`; the next
command gets a fresh one); a worker that dies meanwhile leaves its container to the next worker's
`reap_orphans` (workers/sandbox/containers.py), or to its own keeper's end at its deadline.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from workers.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    CommandResult,
    Sandbox,
    SandboxLimits,
    SandboxSession,
)
from workers.sandbox.containers import (
    EngineUnavailable,
    docker_client,
    hardening,
    host_path,
    owner_labels,
    remove_quietly,
)
from workers.sandbox.docker_exec import EXIT_KILLED, READ_WAIT_S, DiskCap, follow
from workers.sandbox.docker_mounts import ExtraMount, python_env_variables, work_mounts
from workers.sandbox.docker_wrapper import (
    KEEPER_MAX_S,
    OutputCap,
    container_environment,
    image_scrubbed,
    keeper_uid,
    out_of_memory,
    ulimits,
    wrapper,
)

if TYPE_CHECKING:
    import docker

logger = logging.getLogger(__name__)
DEFAULT_IMAGE = "arena-worker-cpu:latest"
DEFAULT_PATH = "/opt/arena/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KILL_WAIT_S = 30.0  # for a killed container to be removed
# Past its deadline, how long a container may still be ours (kill, wait, removal): labelled.
LABEL_GRACE_S = KILL_WAIT_S + READ_WAIT_S


class DockerSandbox(Sandbox):
    """Runs `/bin/sh -c command` in a sibling container of `image`, as the worker's uid:gid: one
    container per session (a check's commands), each command `exec`ed in it.

    `work_dir`/`host_work_dir`: where the worker, itself in a container, keeps its work and
    where the engine's host has that folder (see `containers.host_path`); None: the worker
    runs on the engine's host. `network_mode`: for commands whose limits allow the network.
    `path`: PATH inside the image. `client`: a docker.DockerClient (default: DOCKER_HOST's)."""

    kind: ClassVar[str] = "docker"

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        work_dir: Path | None = None,
        host_work_dir: Path | None = None,
        network_mode: str = "bridge",
        path: str = DEFAULT_PATH,
        client: docker.DockerClient | None = None,
    ) -> None:
        self.image = image
        self.work_dir = work_dir
        self.host_work_dir = host_work_dir
        self.network_mode = network_mode
        self.path = path
        self._client = client
        self.mounts: tuple[ExtraMount, ...] = ()  # beside the work dir (a race's environment)
        self.python_env: Path | None = None  # the virtual environment commands run in

    def in_python_env(self, env: Path, writable: bool = False) -> DockerSandbox:
        """The same sandbox, its commands run in the virtual environment `env`: mounted at
        its own path, read-only unless `writable`, with `python_env_variables`. ValueError:
        `env` is not under the work dir shared with the engine's host."""
        env = Path(env).resolve()
        source = host_path(env, self.work_dir, self.host_work_dir)
        made = copy.copy(self)  # the same engine client
        made.mounts = (*self.mounts, ExtraMount(str(env), source, read_only=not writable))
        made.python_env = env
        return made

    def command_environment(self, env: Mapping[str, str] | None, workdir: Path) -> dict[str, str]:
        """What an `exec`ed command in `workdir` gets: `container_environment`, in the
        sandbox's virtual environment if it has one."""
        found = container_environment(env, self.path)
        if self.python_env is not None:
            found = python_env_variables(found, self.python_env, workdir)
        return found

    def engine(self) -> docker.DockerClient:
        """The engine's client, made (and pinged) on first use; EngineUnavailable if none."""
        if self._client is None:
            self._client = docker_client()
        return self._client

    def session(
        self,
        workdir: Path,
        limits: SandboxLimits | None = None,
        *,
        budget_s: float | None = None,
    ) -> DockerSession:
        return DockerSession(self, workdir, limits, budget_s)

    def run(
        self,
        command: str,
        workdir: Path,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        read_only: Sequence[str] = (),
    ) -> CommandResult:
        """A session of one command: nothing of it runs once this returns, and the engine
        removes its container a moment later."""
        budget = timeout_s if not math.isnan(timeout_s) else None
        with self.session(workdir, limits, budget_s=budget) as session:
            return session.run(command, timeout_s, env, max_output_bytes, read_only)

    def container_options(
        self,
        workdir: Path,
        source: str,
        limits: SandboxLimits,
        deadline: float,
        read_only: Sequence[str] = (),
    ) -> dict[str, Any]:
        """`containers.create` keyword arguments for a session's container: its init and a
        keeper (`sleep` until the deadline) as `keeper_uid()`, commands come by `exec`. The work
        dir (`source` on the engine's host) is mounted at the worker's own path for it: paths
        in the output read as on the worker; the paths in `read_only` (relative) read-only."""
        from docker.types import LogConfig  # here: only workers that use Docker need the engine

        inside = str(workdir.resolve())
        left = deadline - time.time()
        keep = min(math.ceil(left), KEEPER_MAX_S) if math.isfinite(left) else KEEPER_MAX_S
        uid = keeper_uid()
        return {
            "image": self.image,
            # The image's entrypoint replaced (the worker image's is tini: the engine's init
            # takes its place). Once the keeper ends, so does the container, with every process
            # in it: a container whose worker died stops at its deadline.
            "entrypoint": ["sleep"],
            "command": [str(max(keep, 1))],
            "user": f"{uid}:{uid}",
            "working_dir": "/",
            "mounts": work_mounts(workdir, inside, source, read_only, self.mounts),
            "labels": owner_labels("command", deadline),
            "network_mode": self.network_mode if limits.network else "none",
            "ulimits": ulimits(limits),  # the exec'd commands inherit them
            # Nothing is stored by the engine: a command's output comes by its exec's stream.
            "log_config": LogConfig(type="none"),
            # Removed by the engine once stopped: a session's end need not wait for it.
            "auto_remove": True,
            **hardening(limits.memory_mb, limits.cpus, limits.processes),
        }


class DockerSession(SandboxSession):
    """The commands of one check in one container, started at the first command and removed by
    `close`. A command runs by `exec` under `wrapper`; after a command that timed out, was
    killed for memory, or killed its wrapper, the container is removed (that kills every
    process in it) and the next command gets a fresh one."""

    def __init__(
        self,
        sandbox: DockerSandbox,
        workdir: Path,
        limits: SandboxLimits | None,
        budget_s: float | None,
    ) -> None:
        self.sandbox = sandbox
        self.workdir = Path(workdir)
        self.limits = limits or SandboxLimits()
        # Until when the container is labelled ours, at least (Unix time): its reap deadline.
        self.ends = time.time() + budget_s if budget_s is not None else 0.0
        self.container: Any = None
        self.disk: DiskCap | None = None  # the last command's work dir cap
        self.deadline = 0.0  # the container's label deadline
        self.unset: list[str] | None = None  # the image's variables to drop, once known
        self.read_only: tuple[str, ...] = ()  # what the container's mounts make read-only
        self.closed = False

    def run(
        self,
        command: str,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        read_only: Sequence[str] = (),
    ) -> CommandResult:
        if self.closed:
            raise RuntimeError("this sandbox session is closed")
        started = time.monotonic()
        cap = OutputCap(max_output_bytes)

        def result(
            code: int | None, timed_out: bool, error: str | None, infrastructure: bool = False
        ) -> CommandResult:
            return CommandResult(
                command=command,
                exit_code=code,
                timed_out=timed_out,
                duration_s=time.monotonic() - started,
                output=cap.text(),
                output_bytes=cap.size,
                error=error,
                infrastructure=infrastructure,
            )

        if not self.workdir.is_dir():
            return result(
                None, False, f"workdir {self.workdir} does not exist or is not a directory"
            )
        if "\0" in command or math.isnan(timeout_s):
            return result(None, False, "a NUL byte in the command or a timeout_s of NaN")
        try:
            source = host_path(self.workdir, self.sandbox.work_dir, self.sandbox.host_work_dir)
        except ValueError as exc:  # a workdir outside the folder shared with the engine's host
            return result(None, False, str(exc))
        return result(*self._outcome(command, source, timeout_s, env, cap, tuple(read_only)))

    def _outcome(
        self,
        command: str,
        source: str,
        timeout_s: float,
        env: Mapping[str, str] | None,
        cap: OutputCap,
        read_only: tuple[str, ...] = (),
    ) -> tuple[int | None, bool, str | None, bool]:
        """Run the command: (exit code, timed out, error, infrastructure) for its result."""
        import docker.errors  # here: the Docker SDK is imported only where a sandbox runs

        try:
            try:
                code, timed_out, oom = self._command(
                    command, source, timeout_s, env, cap, read_only
                )
            except BaseException:
                # The first failure is the one to report (or a KeyboardInterrupt to re-raise); an
                # engine gone meanwhile leaves the container to the next worker's reap_orphans.
                with contextlib.suppress(Exception):
                    self._discard()
                raise
        except EngineUnavailable as exc:
            return None, False, str(exc), True
        except docker.errors.ImageNotFound:
            where = os.environ.get("DOCKER_HOST", "the local socket")
            why = f"image {self.sandbox.image} not found on the Docker engine at {where}"
            return None, False, f"{why} (build it: scripts/build-images; never pulled)", True
        except (docker.errors.DockerException, OSError) as exc:  # OSError: requests' too
            return None, False, f"the Docker engine failed: {exc}", True
        if oom:  # whatever sh made of it (`cmd || true`), the command did not run to its end
            return EXIT_KILLED, timed_out, out_of_memory(self.limits), False
        if self.disk is not None and self.disk.why:
            return EXIT_KILLED, timed_out, self.disk.why, False
        error = f"the command's output was cut short: {cap.failure}" if cap.failure else None
        return code, timed_out, error, False

    def close(self) -> None:
        """End the container without waiting for its removal: SIGTERM to its init, which ends
        the keeper; once the init exits the kernel kills whatever else is left in it, and the
        engine removes it (auto-remove). Every command's processes are gone already (the
        wrapper's reap, or the container's removal after a command that did not end cleanly).
        Should the engine refuse, it is removed here; an engine that fails meanwhile leaves it
        to `reap_orphans` (its labels say whose it is and until when)."""
        self.closed = True
        container, self.container, self.deadline = self.container, None, 0.0
        if container is None:
            return
        try:
            try:
                container.kill(signal="SIGTERM")
            except Exception:  # DockerException, requests' errors: stopped meanwhile, or worse
                remove_quietly(container)
        except Exception as exc:  # nothing left to report to: the reaper has it
            logger.warning("could not remove the sandbox container %s: %s", container.id, exc)

    def _command(
        self,
        command: str,
        source: str,
        timeout_s: float,
        env: Mapping[str, str] | None,
        cap: OutputCap,
        read_only: tuple[str, ...] = (),
    ) -> tuple[int, bool, bool]:
        """Run one command in the session's container: (exit code, timed out, OOM-killed)."""
        import docker.errors  # here: only workers that use Docker need the engine

        client = self.sandbox.engine()
        if self.unset is None:
            self.unset = image_scrubbed(client.images.get(self.sandbox.image))
        fresh = self._ensure(client, source, timeout_s, read_only)
        try:
            exec_id = self._exec(client, command, env)
        except docker.errors.APIError as exc:
            gone = isinstance(exc, docker.errors.NotFound) or "is not running" in str(exc)
            if fresh or not gone:
                raise
            self._discard()  # stopped meanwhile (the OOM killer chose its keeper): a fresh one
            self._ensure(client, source, timeout_s, read_only)
            exec_id = self._exec(client, command, env)
        disk_mb = self.limits.disk_mb
        self.disk = DiskCap(self.workdir, disk_mb) if disk_mb else None
        return follow(client, exec_id, timeout_s, cap, self.container, self._discard, self.disk)

    def _ensure(
        self,
        client: docker.DockerClient,
        source: str,
        timeout_s: float,
        read_only: tuple[str, ...] = (),
    ) -> bool:
        """Start a container unless the session's own is labelled for long enough to run a
        command of `timeout_s` and mounts the same paths read-only (mounts are fixed when a
        container starts: a race's lint gets a container of its own); whether one started."""
        needed = time.time() + timeout_s + LABEL_GRACE_S
        same = read_only == self.read_only
        if self.container is not None and needed <= self.deadline and same:
            return False
        self._discard()
        deadline = max(needed, self.ends + LABEL_GRACE_S)
        options = self.sandbox.container_options(
            self.workdir, source, self.limits, deadline, read_only
        )
        self.container, self.deadline = client.containers.create(**options), deadline
        self.read_only = read_only
        self.container.start()
        return True

    def _exec(
        self, client: docker.DockerClient, command: str, env: Mapping[str, str] | None
    ) -> str:
        environment = self.sandbox.command_environment(env, self.workdir)
        # What the command is given is kept: the image's ENV may set it too (VIRTUAL_ENV).
        script = wrapper([name for name in self.unset or [] if name not in environment])
        created = client.api.exec_create(
            self.container.id,
            ["/bin/sh", "-c", script, "/bin/sh", command],
            stdout=True,
            stderr=True,
            user=f"{os.getuid()}:{os.getgid()}",
            workdir=str(self.workdir.resolve()),
            environment=environment,
        )
        return str(created["Id"])

    def _discard(self) -> None:
        """Remove the container, if any (killing whatever runs in it); the next command of the
        session starts a fresh one."""
        container, self.container, self.deadline = self.container, None, 0.0
        if container is not None:
            remove_quietly(container)
