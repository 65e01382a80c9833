"""The worker's own pip, as the race environment builders run it (workers/race/builders*.py):
outside any sandbox, so it is given only requirements by name (environment.declared_requirements
checks them), after `--`, and none of Arena's PYTHONPATH or virtual environment."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

from workers.race.environment import INSTALL_TIMEOUT_S, EnvironmentFailed


def install_failed(output: str) -> EnvironmentFailed:
    last = [line for line in output.splitlines() if line.strip()][-3:]
    return EnvironmentFailed("installing the requirements failed: " + " | ".join(last))


def worker_pip_environment() -> dict[str, str]:
    """The worker's environment for its pip: Arena's own PYTHONPATH and virtual environment
    must not leak into the environment being made."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def run_pip(argv: list[str], requirements: list[str], echo: Callable[[str], None]) -> str:
    """The worker's pip with `argv`, then `--` and `requirements` (none can be read as an
    option); its output, or EnvironmentFailed with its end."""
    pip = [sys.executable, "-m", "pip", "--no-input", "--disable-pip-version-check", *argv]
    try:
        done = subprocess.run(
            [*pip, "--", *requirements],
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
