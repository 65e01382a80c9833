"""The Docker sandbox's race environments (placeholder until built)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from workers.race.environment import EnvironmentBuilder, EnvironmentFailed
from workers.sandbox import Sandbox, SandboxLimits
from workers.sandbox.docker import DockerSandbox


class DockerBuilder(EnvironmentBuilder):
    def __init__(
        self,
        sandbox: DockerSandbox,
        workdir: Path,
        limits: SandboxLimits | None,
        timeout_s: float,
    ) -> None:
        self.sandbox = sandbox

    def interpreter(self) -> str:
        return self.sandbox.image

    def make(self, env: Path, requirements: list[str], echo: Callable[[str], None]) -> str:
        raise EnvironmentFailed("the Docker sandbox cannot make a race's environment yet")

    def setup(self, env: Path, command: str, echo: Callable[[str], None]) -> None:
        raise EnvironmentFailed("the Docker sandbox cannot make a race's environment yet")

    def sandbox_in(self, env: Path) -> Sandbox:
        return self.sandbox
