"""The sandbox interface: how code we did not write (a race check's build/test/lint commands)
runs. Engine-neutral on purpose: the local-process sandbox and the Docker sandbox take the same
call and return the same record, so callers never learn which one ran them.

A command that cannot start is a result (`error` set, `exit_code` None), not an exception: a
check runner records it like any failed check instead of crashing the unit.

The commands of one check (build, tests, lint) run in a session (`Sandbox.session`): one work
dir, one set of limits, commands one after the other. A backend may share what it sets up
between them (the Docker sandbox: one container per session instead of one per command).
"""

from __future__ import annotations

import os
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

# Arena's own settings and the worker's credentials never reach a command (docs/sandbox.md):
# its services, the cloud's, the agents and sockets that act for the worker's user (ssh-agent,
# gpg-agent, the Docker engine, a Kubernetes config), files of passwords, git's own settings
# (credential helpers, extra headers), and any URL that carries a user or password.
SCRUBBED_PREFIXES = (
    "ARENA_",
    "CELERY_",
    "REDIS_",
    "PROMETHEUS_",
    "AWS_",
    "GOOGLE_",
    "AZURE_",
    "DOCKER_",
    "SSH_",
    "GPG_",
    "KUBE",
    "GIT_CONFIG",
    "VAULT_",
)
SCRUBBED_NAMES = frozenset(
    {
        "PYTHONPATH",
        "PYTHONHOME",
        "VIRTUAL_ENV",
        "REDISCLI_AUTH",
        "DATABASE_URL",
        "NETRC",
        "PGPASSFILE",
        "PGSERVICEFILE",
        "MYSQL_PWD",
        "GIT_ASKPASS",
        "BOTO_CONFIG",
        "NPM_CONFIG_USERCONFIG",
        "CLOUDSDK_CONFIG",
    }
)
SCRUBBED_PARTS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "ACCESS_KEY",
    "SESSION_KEY",
    "_AUTH_",
)
SCRUBBED_SUFFIXES = ("_AUTH", "_DSN")  # REDISCLI_AUTH, NPM_CONFIG__AUTH, SENTRY_DSN (not AUTHOR)
# scheme://user@host or scheme://user:password@host, in any variable's value.
URL_WITH_USER = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s@]+@", re.IGNORECASE)
DEFAULT_MAX_OUTPUT_BYTES = 1_048_576


class SandboxLimits(BaseModel):
    """Resource limits for a command and everything it starts; None leaves one unlimited. The
    local sandbox sets rlimits per process; the Docker sandbox puts memory, processes and cpus
    on the container's cgroup (docs/sandbox.md, "Limits")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Local: the address space of each process (RLIMIT_AS) and, jailed, the resident memory of
    # all of them together; Docker: the container's cgroup.
    memory_mb: int | None = 4096
    cpu_s: int | None = None  # RLIMIT_CPU; None: none beyond the deadline
    file_size_mb: int | None = 1024  # RLIMIT_FSIZE; the captured output counts too
    open_files: int | None = 4096  # RLIMIT_NOFILE
    # RLIMIT_NPROC, which the kernel does not enforce for root; the local sandbox's jail also
    # counts its processes and threads and kills it past this (docs/sandbox.md, "Limits").
    processes: int | None = 1024
    # Local sandbox, jailed: the work dir's whole size (what the command writes and the files
    # it holds open after deleting them); past it, the jail is killed. Docker: not enforced.
    disk_mb: int | None = 10240
    # Docker only: CPUs the container may use.
    cpus: float | None = Field(None, gt=0)
    # Whether commands may reach the network at all (the local jail then shares the worker's).
    network: bool = False


class CommandResult(BaseModel):
    """What one command did. `exit_code` is the shell's status: a process killed by signal N
    reads 128+N as sh reports it; None only when the command never started (`error` says why).
    `output` is stdout and stderr interleaved as written, decoded as UTF-8 (invalid bytes
    replaced) and capped: head and tail kept, a marker line between saying how much was cut."""

    command: str
    exit_code: int | None
    timed_out: bool  # the deadline killed it
    duration_s: float  # wall time from start to the end of the kill
    output: str
    output_bytes: int  # the output's full size before the cap
    # Why it could not start, what the sandbox killed it for (Docker: out of memory), or what
    # the sandbox itself failed at.
    error: str | None = None
    # The sandbox itself could not run it (no engine, no image): not the command's doing, so
    # the unit is retried on resubmission rather than scored as the agent's failure.
    infrastructure: bool = False


class SandboxUnavailable(RuntimeError):
    """Raised by callers for a CommandResult with `infrastructure` set: the unit is an
    infrastructure error (tasks/execute.py), never the agent's fault."""


class Sandbox(ABC):
    """Runs shell commands for checks. After `run` returns, nothing the command started runs."""

    kind: ClassVar[str]

    @abstractmethod
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
        """Run `/bin/sh -c command` in `workdir` with at most `timeout_s` of wall time.

        `env` is the base environment (default: the worker's), scrubbed either way by
        `scrubbed_environment`; `limits` None means `SandboxLimits()` (the defaults).
        `read_only`: paths in `workdir` (relative) this command cannot change (a race's lint
        sees the committed files so); not enforced unjailed (`LocalSandbox(jail=False)`)."""

    def unavailable(self) -> str | None:
        """Why this sandbox cannot run untrusted commands here (each `run` then returns it as
        an infrastructure error), or None. A caller may ask first and skip wasted work."""
        return None

    def session(
        self,
        workdir: Path,
        limits: SandboxLimits | None = None,
        *,
        budget_s: float | None = None,
    ) -> SandboxSession:
        """A session for several commands in `workdir` under `limits` (a check's build, tests
        and lint), to use as a context manager: `with sandbox.session(w) as s: s.run(...)`.
        `budget_s`: about how long all its commands may take together (their deadlines
        summed), a hint for backends that label what they start; None: unknown. Each command
        keeps every guarantee of `run`; what a backend shares between commands of a session
        (the Docker sandbox: its container, so its /tmp) is in docs/sandbox.md. This default
        runs each command as `run` does."""
        return CommandSession(self, workdir, limits)


class SandboxSession(ABC):
    """Commands run one after the other in one work dir under one set of limits; `close` (or
    leaving the `with` block, whatever happens) ends everything the session set up."""

    @abstractmethod
    def run(
        self,
        command: str,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        read_only: Sequence[str] = (),
    ) -> CommandResult:
        """As `Sandbox.run`, in the session's work dir under its limits. After it returns,
        nothing the command started runs."""

    @abstractmethod
    def close(self) -> None:
        """End what the session set up; idempotent."""

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


class CommandSession(SandboxSession):
    """A session that sets nothing up: each command runs as `sandbox.run` runs it."""

    def __init__(self, sandbox: Sandbox, workdir: Path, limits: SandboxLimits | None) -> None:
        self.sandbox, self.workdir, self.limits = sandbox, workdir, limits

    def run(
        self,
        command: str,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        read_only: Sequence[str] = (),
    ) -> CommandResult:
        return self.sandbox.run(
            command,
            self.workdir,
            timeout_s,
            env=env,
            limits=self.limits,
            max_output_bytes=max_output_bytes,
            read_only=read_only,
        )

    def close(self) -> None:
        """Nothing to end: each command's run ended all of its own."""


def is_scrubbed(name: str) -> bool:
    """Whether a variable is one of Arena's settings or looks like a credential."""
    upper = name.upper()
    return (
        upper in SCRUBBED_NAMES
        or upper.startswith(SCRUBBED_PREFIXES)
        or upper.endswith(SCRUBBED_SUFFIXES)
        or any(part in upper for part in SCRUBBED_PARTS)
    )


def scrubbed_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) without Arena's settings and secrets, with
    CI=true and TERM=dumb (tools then print plainly, without prompts or colour), and with the
    directory of this interpreter first on PATH: `python`, `pytest` or `ruff` in a check are
    the worker environment's unless the command names another."""
    source = os.environ if base is None else base
    env = {
        name: value
        for name, value in source.items()
        if not is_scrubbed(name) and not URL_WITH_USER.search(value)
    }
    env["CI"] = "true"
    env["TERM"] = "dumb"
    bin_dir = os.path.dirname(sys.executable)
    path = env.get("PATH", os.defpath)
    if bin_dir:
        path = os.pathsep.join([bin_dir, *(p for p in path.split(os.pathsep) if p != bin_dir)])
    env["PATH"] = path
    return env
