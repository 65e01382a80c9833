"""A race's Python environment (docs/race.md, "The race's environment"): a virtual environment
made from what the checked commit declares, in which its build, test and lint commands run
instead of with Arena's own interpreter, whose packages (a project Arena depends on, Arena's
pytest plugins) would otherwise shadow the project under test.

- Made from the base interpreter (not Arena's virtual environment), with no pip and no system
  site-packages, then the declared requirements installed into it by the worker's pip as wheels
  only (`--only-binary=:all:`: installing a wheel runs no code of the package), from the index
  the worker's pip is configured with (PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX).
- What goes in (workers/race/requirements.py): the runtime dependencies, the groups and extras
  the race names (by default those whose name says test, else dev), and the tools the commands
  name (pytest, ruff, ...) at the version Arena pins (TOOL_PINS) where the commit does not
  declare them: the race measures with the same tool whenever it runs.
- What it holds is on record (workers/race/installed.py): every distribution's version, and the
  tools' the commands name, in each check's result and the race's summary.
- How it is made depends on the sandbox (an EnvironmentBuilder: workers/race/builders.py for the
  local jail, workers/race/builders_docker.py for containers); what it holds does not.
- An optional setup command then runs in the sandbox, the environment writable, the network as
  the race says.
- Kept under the work dir by the hash of what it holds (the requirements chosen, the setup
  command, the interpreter): a branch that changes them gets its own; the others share one,
  built once (a file lock: concurrent checks wait for the first build).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict

from workers.race.env_cache import (
    READY,
    UNUSED_KEPT_S,
    evict_over,
    locked,
    prune,
    record_size,
    stored_size,
    write_marker,
)
from workers.race.installed import described, installed_distributions, tool_versions
from workers.race.requirements import (
    TOOL_PINS,
    EnvironmentFailed,
    EnvironmentOptions,
    Selection,
    added_tools,
    by_name,
    declaring_files,
    select,
)
from workers.sandbox import Sandbox

__all__ = [  # what the race modules and tests import from here (requirements.py holds them)
    "TOOL_PINS",
    "EnvironmentFailed",
    "EnvironmentOptions",
    "added_tools",
    "by_name",
    "declaring_files",
]

# A build that failed is remembered this long: the race's other checks of the same declarations
# fail at once with its reason instead of building again (a later race tries anew).
FAILED_KEPT_S = 600.0
INSTALL_TIMEOUT_S = 900.0
TAIL_CHARS = 2_000


class CacheBounds(BaseModel):
    """What one environment (the check's disk limit) and the whole cache may take, in MiB;
    None: no bound."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    disk_mb: int | None = None
    cache_mb: int | None = None


class EnvironmentRun(BaseModel):
    """How the check's environment was had: built now or reused, what it was made from and
    what it holds (docs/race.md, "How versions are recorded")."""

    model_config = ConfigDict(extra="forbid")

    kind: str = "python"
    key: str
    reused: bool
    duration_s: float
    requirements: list[str]
    added_tools: list[str] = []  # of `requirements`: pinned tools the commands named
    groups: list[str] = []  # the groups and extras installed (besides the runtime ones)
    pinned_tools: list[str] = []  # declared with no version, pinned (environment.pin_tools)
    installed: dict[str, str] = {}  # every distribution in it: name → version
    tools: dict[str, str] = {}  # of `installed`: those the commands name
    size_bytes: int | None = None
    output_tail: str = ""


def declared_requirements(checkout: Path, options: EnvironmentOptions | None = None) -> list[str]:
    """The requirements the checkout declares that `options` choose, in the order found, each
    once (the tools the commands name aside)."""
    return select(checkout, (), options or EnvironmentOptions()).requirements


def base_python() -> str:
    """The interpreter Arena's own runs on, outside Arena's virtual environment."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in (Path(sys.base_prefix) / "bin", Path(sys.base_exec_prefix) / "bin"):
        if (folder / version).exists():
            return str(folder / version)
    return shutil.which(version) or sys.executable


def environment_key(
    checkout: Path,
    setup_command: str | None,
    commit: str = "",
    interpreter: str = "",
    added: Sequence[str] = (),
    options: EnvironmentOptions | None = None,
) -> str:
    """The key of the environment `options` choose for `checkout`, with the tools `added`."""
    requirements = declared_requirements(checkout, options) + list(added)
    return requirements_key(requirements, setup_command, commit, interpreter)


def requirements_key(
    requirements: Sequence[str], setup_command: str | None, commit: str = "", interpreter: str = ""
) -> str:
    """What an environment is made from: the interpreter and the requirements it holds (parsed
    and sorted; the groups chosen and the tools added are in them).
    With a setup command, the checked commit too: the command may run the checkout's code
    (`pip install -e .`) with the environment writable, so a branch never shares an environment
    another check's code could have written."""
    digest = hashlib.sha256()
    made_by = f"{setup_command}\0{commit}" if setup_command else ""
    interpreter = interpreter or f"{base_python()}\0{sys.version}"
    digest.update(f"{interpreter}\0{made_by}\0".encode())
    # What is installed, not the files' bytes: a comment or an order changed is the same
    # environment (else each push of a branch could make one more, docs/security.md "Disk").
    for requirement in sorted({_canonical(r) for r in requirements}):
        digest.update(f"{requirement}\0".encode())
    return digest.hexdigest()[:24]


def _canonical(requirement: str) -> str:
    parsed = Requirement(requirement)  # requirements.select let only valid ones through
    parsed.name = canonicalize_name(parsed.name)
    return str(parsed)


class EnvironmentBuilder(ABC):
    """How a sandbox backend makes a race's environment: the venv and its requirements, then
    the setup command in the sandbox; the environment's path is its final one (a virtual
    environment's scripts name their own path)."""

    @abstractmethod
    def interpreter(self) -> str:
        """What identifies the interpreter the environment is made from (part of its key)."""

    @abstractmethod
    def make(
        self, env: Path, requirements: list[str], echo: Callable[[str], None], with_pip: bool
    ) -> str:
        """A virtual environment at `env` holding `requirements` (wheels only), and pip when
        `with_pip` (for a setup command: `pip install -e .`); its output, or EnvironmentFailed
        naming why."""

    @abstractmethod
    def setup(self, env: Path, command: str, echo: Callable[[str], None]) -> None:
        """`command` run in the sandbox with `env` writable; EnvironmentFailed if it fails."""

    @abstractmethod
    def sandbox_in(self, env: Path) -> Sandbox:
        """The sandbox whose commands run in `env` (read-only) and see nothing of Arena."""


def within_disk_limit(env: Path, failed: Path, bounds: CacheBounds) -> int:
    """The new environment's size, or EnvironmentFailed (and it gone) past the disk limit."""
    size = record_size(env)
    if bounds.disk_mb is not None and size > bounds.disk_mb << 20:
        shutil.rmtree(env, ignore_errors=True)
        why = (
            f"the environment takes {size >> 20} MiB, over the disk limit of "
            f"{bounds.disk_mb} MiB (ARENA_SANDBOX_DISK_MB)"
        )
        failed.write_text(why)
        raise EnvironmentFailed(why)
    failed.unlink(missing_ok=True)
    return size


def tidy_cache(
    cache_root: Path, key: str, bounds: CacheBounds, echo: Callable[[str], None]
) -> None:
    """After a build (a Python or a Node environment's): the environments unused for days go,
    then the least recently used until the cache fits its quota."""
    for old in prune(cache_root):
        echo(f"== environment {old}: removed (unused for {UNUSED_KEPT_S / 86400:g} days)")
    if bounds.cache_mb is not None:
        for old in evict_over(cache_root, bounds.cache_mb << 20, keep=key):
            echo(f"== environment {old}: removed (the cache was over {bounds.cache_mb} MiB)")


def python_environment(
    checkout: Path,
    cache_root: Path,
    setup_command: str | None,
    builder: EnvironmentBuilder,
    echo: Callable[[str], None] = print,
    commit: str = "",
    commands: Sequence[str | None] = (),
    bounds: CacheBounds | None = None,
    options: EnvironmentOptions | None = None,
) -> tuple[Path, EnvironmentRun]:
    """The environment of `checkout` (at `commit`) for `commands`, holding what `options`
    choose: reused when one with its key is ready, else built now by `builder`, within `bounds`
    (workers/race/env_cache.py)."""
    bounds = bounds or CacheBounds()
    started = time.perf_counter()
    chosen = select(checkout, commands, options or EnvironmentOptions())
    key = requirements_key(chosen.requirements, setup_command, commit, builder.interpreter())
    cache_root.mkdir(parents=True, exist_ok=True)
    env, failed = cache_root / key, cache_root / f"{key}.failed"
    output, reused = "", True
    with locked(cache_root / f"{key}.lock"):
        if failed.is_file() and time.time() - failed.stat().st_mtime < FAILED_KEPT_S:
            raise EnvironmentFailed(f"{failed.read_text()} (this environment's build failed)")
        if (env / READY).is_file():
            (env / READY).touch()  # used now: not pruned for UNUSED_KEPT_S
            size = stored_size(env)
        else:
            reused = False
            shutil.rmtree(env, ignore_errors=True)  # a build that did not finish
            echo(f"== environment {key}: building ({_chosen(chosen)})")
            try:
                output = builder.make(env, chosen.requirements, echo, with_pip=bool(setup_command))
                if setup_command:
                    builder.setup(env, setup_command, echo)
            except EnvironmentFailed as exc:
                failed.write_text(str(exc)[:1000])
                raise
            size = within_disk_limit(env, failed, bounds)
            write_marker(env / READY, key)  # not through a link a setup command left
        installed = installed_distributions(env)
    run = EnvironmentRun(
        key=key,
        reused=reused,
        duration_s=time.perf_counter() - started,
        **chosen.model_dump(),
        installed=installed,
        tools=tool_versions(commands, installed),
        size_bytes=size,
        output_tail=output[-TAIL_CHARS:],
    )
    echo(_described(run))
    if not reused:
        tidy_cache(cache_root, key, bounds, echo)
    return env, run


def _chosen(chosen: Selection) -> str:
    groups = ", ".join(chosen.groups) or "none"
    added = (
        f"; tools at Arena's pins: {', '.join(chosen.added_tools)}" if chosen.added_tools else ""
    )
    return f"{len(chosen.requirements)} requirements; groups: {groups}{added}"


def _described(run: EnvironmentRun) -> str:
    """The log's lines on the environment: how it was had, how big, and what it holds."""
    how = "reused" if run.reused else f"built in {run.duration_s:.1f}s"
    size = f"{(run.size_bytes or 0) / (1 << 20):.1f} MiB"
    tools = ", ".join(f"{n} {v}" for n, v in run.tools.items()) or "none named"
    return (
        f"== environment {run.key}: {how} ({size}, {len(run.installed)} distributions; "
        f"groups: {', '.join(run.groups) or 'none'}; tools: {tools})\n"
        f"== installed: {described(run.installed)}"
    )
