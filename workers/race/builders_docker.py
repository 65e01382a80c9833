"""The Docker sandbox's race environments (workers/race/environment.py; docs/race.md, "The race's
environment"). Made for the image's interpreter at its own path under the work dir, mounted
there as the checkout is (`containers.host_path`): the virtual environment by the image's base
interpreter (not its Arena's: Arena's packages must not be visible) in a container with no
network; the wheels downloaded by the *worker's* pip (its index settings) for the image's Python
version and platforms into a folder in it; installed from that folder alone by the image's pip
(`--python`) in a container with no network. The image is pinned by its ID: the environment's
key names it, and the checks run in it."""

from __future__ import annotations

import copy
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

from workers.race.environment import INSTALL_TIMEOUT_S, EnvironmentBuilder, EnvironmentFailed
from workers.race.pip import install_failed, run_pip
from workers.sandbox import CommandResult, Sandbox, SandboxLimits, SandboxUnavailable
from workers.sandbox.containers import host_path
from workers.sandbox.docker import DockerSandbox
from workers.sandbox.docker_python import ImagePython, image_python

WHEELS = ".arena-wheels"  # in the environment while it is made, then removed


class DockerBuilder(EnvironmentBuilder):
    """Environments for the Docker sandbox, a check's setup command run in its container in
    `workdir` (the checkout) with `limits`."""

    def __init__(
        self,
        sandbox: DockerSandbox,
        workdir: Path,
        limits: SandboxLimits | None,
        timeout_s: float,
    ) -> None:
        self.sandbox = sandbox
        self.workdir = workdir
        self.limits = limits
        self.timeout_s = timeout_s
        self._python: ImagePython | None = None

    def python(self) -> ImagePython:
        if self._python is None:
            self._python = image_python(self.sandbox)
        return self._python

    def pinned(self) -> DockerSandbox:
        """The sandbox, its image named by the ID the environment was made for."""
        box = copy.copy(self.sandbox)
        box.image = self.python().image_id
        return box

    def interpreter(self) -> str:
        python = self.python()
        return f"docker\0{python.image_id}\0{python.base}\0{python.version}"

    def make(
        self, env: Path, requirements: list[str], echo: Callable[[str], None], with_pip: bool
    ) -> str:
        python, env = self.python(), Path(env).resolve()
        try:
            host_path(env, self.sandbox.work_dir, self.sandbox.host_work_dir)
        except ValueError as exc:
            raise EnvironmentFailed(str(exc)) from None
        env.mkdir(parents=True, exist_ok=True)
        pip = [] if with_pip else ["--without-pip"]
        venv = shlex.join([python.base, "-m", "venv", *pip, str(env)])
        done = self._offline(venv, env, echo)
        if done.exit_code != 0 or done.timed_out or done.error is not None:
            why = done.error or done.output.strip()[-300:]
            raise EnvironmentFailed(f"cannot make a virtual environment: {why}")
        if not requirements:
            return done.output
        wheels = env / WHEELS
        try:
            downloaded = self._download(wheels, requirements, echo)
            return downloaded + self._install(env, requirements, echo)
        finally:
            shutil.rmtree(wheels, ignore_errors=True)

    def _download(self, wheels: Path, requirements: list[str], echo: Callable[[str], None]) -> str:
        """The wheels, by the worker's pip, for the image's interpreter and platforms."""
        python = self.python()
        platforms = [f"--platform={tag}" for tag in python.platforms]
        target = [f"--python-version={python.version}", f"--implementation={python.implementation}"]
        argv = ["download", "--only-binary=:all:", f"--dest={wheels}", *target, *platforms]
        return run_pip(argv, requirements, echo)

    def _install(self, env: Path, requirements: list[str], echo: Callable[[str], None]) -> str:
        """The wheels in `env` installed by the image's pip, from them alone, no network."""
        python = self.python()
        pip = [python.pip, "-m", "pip", "--no-input", "--disable-pip-version-check"]
        target = ["--no-cache-dir", "--python", str(env / "bin" / "python"), "install"]
        only = ["--no-index", f"--find-links={env / WHEELS}", "--only-binary=:all:"]
        done = self._offline(shlex.join([*pip, *target, *only, "--", *requirements]), env, echo)
        if done.exit_code != 0 or done.timed_out or done.error is not None:
            raise install_failed(done.output + (done.error or ""))
        return done.output

    def _offline(self, command: str, env: Path, echo: Callable[[str], None]) -> CommandResult:
        """`command` in a container of the image with no network, in `env` (mounted writable),
        with none of the worker's variables (its index settings name the worker's paths)."""
        quiet = {"PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        limits = SandboxLimits(network=False)
        done = self.pinned().run(command, env, INSTALL_TIMEOUT_S, quiet, limits)
        echo(f"== environment: {command[:300]} (exit {done.exit_code}, {done.duration_s:.2f}s)")
        echo(done.output.rstrip("\n"))
        if done.infrastructure:
            raise SandboxUnavailable(f"the environment could not be made: {done.error}")
        return done

    def setup(self, env: Path, command: str, echo: Callable[[str], None]) -> None:
        box = self.pinned().in_python_env(Path(env), writable=True)
        done = box.run(command, self.workdir, self.timeout_s, None, self.limits)
        status = "timed out" if done.timed_out else f"exit {done.exit_code}"
        echo(f"== setup: {command} ({status}, {done.duration_s:.2f}s)")
        echo(done.output.rstrip("\n"))
        if done.infrastructure:
            raise SandboxUnavailable(f"setup command could not run: {done.error}")
        if done.exit_code != 0 or done.timed_out or done.error is not None:
            raise EnvironmentFailed(f"setup command {command!r} failed ({done.error or status})")

    def sandbox_in(self, env: Path) -> Sandbox:
        return self.pinned().in_python_env(Path(env))
