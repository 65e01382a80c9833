"""The local sandbox's race environments (workers/race/environment.py): a virtual environment of
the base interpreter (not Arena's virtual environment), with no pip and no system site-packages,
the requirements installed into it by the worker's own pip as wheels only (installing a wheel
runs no code of the package), from the index the worker's pip is configured with (PIP_INDEX_URL,
PIP_FIND_LINKS, PIP_NO_INDEX); a setup command in the bubblewrap jail."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from workers.race.environment import (
    INSTALL_TIMEOUT_S,
    EnvironmentBuilder,
    EnvironmentFailed,
    base_python,
)
from workers.sandbox import Sandbox, SandboxLimits
from workers.sandbox.docker import DockerSandbox
from workers.sandbox.local import LocalSandbox


def install_failed(output: str) -> EnvironmentFailed:
    last = [line for line in output.splitlines() if line.strip()][-3:]
    return EnvironmentFailed("installing the requirements failed: " + " | ".join(last))


def worker_pip_environment() -> dict[str, str]:
    """The worker's environment for its pip: Arena's own PYTHONPATH and virtual environment
    must not leak into the environment being made."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def run_pip(argv: list[str], echo: Callable[[str], None]) -> str:
    """The worker's pip with `argv`; its output, or EnvironmentFailed with its end."""
    pip = [sys.executable, "-m", "pip", "--no-input", "--disable-pip-version-check", *argv]
    try:
        done = subprocess.run(
            pip,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            env=worker_pip_environment(),
        )
    except subprocess.TimeoutExpired:
        took = f"installing the requirements took over {INSTALL_TIMEOUT_S:g}s"
        raise EnvironmentFailed(took) from None
    output = done.stdout + done.stderr
    echo(output.rstrip("\n"))
    if done.returncode != 0:
        raise install_failed(output)
    return output


class LocalBuilder(EnvironmentBuilder):
    """Environments for the local sandbox, a check's setup command run in `sandbox`'s jail in
    `workdir` (the checkout) with `limits`."""

    def __init__(
        self,
        sandbox: LocalSandbox,
        workdir: Path,
        limits: SandboxLimits | None,
        timeout_s: float,
    ) -> None:
        self.sandbox = sandbox
        self.workdir = workdir
        self.limits = limits
        self.timeout_s = timeout_s

    def interpreter(self) -> str:
        return f"{base_python()}\0{sys.version}"

    def make(self, env: Path, requirements: list[str], echo: Callable[[str], None]) -> str:
        made = subprocess.run(
            [base_python(), "-m", "venv", "--without-pip", str(env)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if made.returncode != 0:
            raise EnvironmentFailed(f"cannot make a virtual environment: {made.stderr[-300:]}")
        if not requirements:
            return ""
        python = str(env / "bin" / "python")
        return run_pip(["--python", python, "install", "--only-binary=:all:", *requirements], echo)

    def setup(self, env: Path, command: str, echo: Callable[[str], None]) -> None:
        done = self.sandbox.in_python_env(env, writable=True).run(
            command, self.workdir, self.timeout_s, None, self.limits
        )
        status = "timed out" if done.timed_out else f"exit {done.exit_code}"
        echo(f"== setup: {command} ({status}, {done.duration_s:.2f}s)")
        echo(done.output.rstrip("\n"))
        if done.exit_code != 0 or done.timed_out or done.error is not None:
            raise EnvironmentFailed(f"setup command {command!r} failed ({done.error or status})")

    def sandbox_in(self, env: Path) -> Sandbox:
        return self.sandbox.in_python_env(env)


def builder_for(
    sandbox: Sandbox, workdir: Path, limits: SandboxLimits | None, timeout_s: float
) -> EnvironmentBuilder:
    """The builder of `sandbox`'s backend, for the check of the checkout `workdir`."""
    if isinstance(sandbox, LocalSandbox):
        return LocalBuilder(sandbox, workdir, limits, timeout_s)
    if isinstance(sandbox, DockerSandbox):
        from workers.race.builders_docker import DockerBuilder

        return DockerBuilder(sandbox, workdir, limits, timeout_s)
    raise EnvironmentFailed(f"the {sandbox.kind} sandbox cannot make a race's environment")
