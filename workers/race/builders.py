"""The local sandbox's race environments (workers/race/environment.py): a virtual environment of
the base interpreter (not Arena's virtual environment), with no pip and no system site-packages,
the requirements installed into it by the worker's own pip as wheels only (installing a wheel
runs no code of the package), from the index the worker's pip is configured with (PIP_INDEX_URL,
PIP_FIND_LINKS, PIP_NO_INDEX); a setup command in the bubblewrap jail."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from workers.race.environment import EnvironmentBuilder, EnvironmentFailed, base_python
from workers.race.pip import run_pip
from workers.sandbox import Sandbox, SandboxLimits
from workers.sandbox.docker import DockerSandbox
from workers.sandbox.local import LocalSandbox


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

    def make(
        self, env: Path, requirements: list[str], echo: Callable[[str], None], with_pip: bool
    ) -> str:
        pip = [] if with_pip else ["--without-pip"]
        made = subprocess.run(
            [base_python(), "-m", "venv", *pip, str(env)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if made.returncode != 0:
            raise EnvironmentFailed(f"cannot make a virtual environment: {made.stderr[-300:]}")
        if not requirements:
            return ""
        python = str(env / "bin" / "python")
        return run_pip(["--python", python, "install", "--only-binary=:all:"], requirements, echo)

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
