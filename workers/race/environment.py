"""A race's Python environment (docs/race.md, "The race's environment"): a virtual environment
made from what the checked commit declares, in which its build, test and lint commands run
instead of with Arena's own interpreter, whose packages (a project Arena depends on, Arena's
pytest plugins) would otherwise shadow the project under test.

- Made from the base interpreter (not Arena's virtual environment), with no pip and no system
  site-packages, then the declared requirements installed into it by the worker's pip as wheels
  only (`--only-binary=:all:`: installing a wheel runs no code of the package), from the index
  the worker's pip is configured with (PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX).
- Declared: `[project] dependencies`, every `[project.optional-dependencies]` extra and every
  `[dependency-groups]` group of pyproject.toml, and the lines of top-level requirements*.txt.
  A tool the race's commands name (pytest, ruff, ...) that the commit does not declare is added
  at the version Arena pins (TOOL_PINS): the race measures with the same tool whenever it runs.
- How it is made depends on the sandbox (an EnvironmentBuilder: workers/race/builders.py for the
  local jail, workers/race/builders_docker.py for containers); what it holds does not.
- An optional setup command then runs in the sandbox, the environment writable, the network as
  the race says.
- Kept under the work dir by the hash of what declares it (those files, the setup command, the
  interpreter): a branch that changes them gets its own; the others share one, built once
  (a file lock: concurrent checks wait for the first build).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import time
import tomllib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict

from workers.race.env_cache import READY, UNUSED_KEPT_S, evict_over, locked, prune, record_size
from workers.sandbox import Sandbox

# A build that failed is remembered this long: the race's other checks of the same declarations
# fail at once with its reason instead of building again (a later race tries anew).
FAILED_KEPT_S = 600.0
MAX_DECLARING_BYTES = 1 << 20
INSTALL_TIMEOUT_S = 900.0
TAIL_CHARS = 2_000
# The versions of the tools a race's commands may name without declaring them (docs/race.md,
# "The race's environment"). Pinned, so that a race measures with the same tool whenever it
# runs; raising one is a change of protocol, like a new emulator version for Mario.
TOOL_PINS: dict[str, str] = {
    "pytest": "pytest==9.2.0",
    "ruff": "ruff==0.17.6",
    "flake8": "flake8==7.5.0",
    "mypy": "mypy==2.4.1",
    "black": "black==26.10.1",
    "pylint": "pylint==4.1.4",
    "coverage": "coverage==7.17.3",
}
_TOOL_WORD = re.compile(r"(?<![\w.-])(py\.test|" + "|".join(TOOL_PINS) + r")(?![\w.-])")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class EnvironmentFailed(RuntimeError):
    """The environment cannot be made (a requirement with no wheel, a setup command that
    failed): the check cannot measure the branch, and says why."""


class CacheBounds(BaseModel):
    """What one environment (the check's disk limit) and the whole cache may take, in MiB;
    None: no bound."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    disk_mb: int | None = None
    cache_mb: int | None = None


class EnvironmentRun(BaseModel):
    """How the check's environment was had: built now or reused, and what it holds."""

    model_config = ConfigDict(extra="forbid")

    kind: str = "python"
    key: str
    reused: bool
    duration_s: float
    requirements: list[str]
    added_tools: list[str] = []  # of `requirements`: pinned tools the commands named
    output_tail: str = ""


def declaring_files(checkout: Path) -> list[Path]:
    names = ["pyproject.toml", "setup.cfg", "setup.py"]
    found = [checkout / n for n in names if (checkout / n).is_file()]
    found += sorted(p for p in checkout.glob("requirements*.txt") if p.is_file())
    return [p for p in found if not p.is_symlink()]


def _read(path: Path) -> str:
    if path.stat().st_size > MAX_DECLARING_BYTES:
        raise EnvironmentFailed(f"{path.name}: over {MAX_DECLARING_BYTES} bytes")
    return path.read_text(errors="replace")


def _table(data: dict[str, Any], name: str) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise EnvironmentFailed(f"pyproject.toml: {name} is not a table")
    return table


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EnvironmentFailed(f"pyproject.toml: {where} is not a list of requirements")
    return value


def declared_requirements(checkout: Path) -> list[str]:
    """The requirements the checkout declares, in the order found, each once."""
    found: list[str] = []
    files = declaring_files(checkout)
    pyproject = checkout / "pyproject.toml"
    if pyproject in files:
        try:
            data = tomllib.loads(_read(pyproject))
        except tomllib.TOMLDecodeError as exc:
            raise EnvironmentFailed(f"pyproject.toml: not valid TOML ({exc})") from None
        project = _table(data, "project")
        found += _strings(project.get("dependencies", []), "[project] dependencies")
        for name, extra in _table(project, "optional-dependencies").items():
            found += _strings(extra, f"[project.optional-dependencies] {name}")
        for name, group in _table(data, "dependency-groups").items():
            # An {include-group = ...} table names another group, not a requirement.
            if isinstance(group, list):
                group = [r for r in group if not isinstance(r, dict)]
            found += _strings(group, f"[dependency-groups] {name}")
    for path in (p for p in files if p.name.startswith("requirements")):
        for line in _read(path).splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith(("#", "-")):  # options (-r, -e, --index) are not read
                found.append(line)
    cleaned = [by_name(r.strip()) for r in found if r.strip()]
    return list(dict.fromkeys(cleaned))


def by_name(requirement: str) -> str:
    """`requirement` if it is a PEP 508 requirement by name (from the index); else
    EnvironmentFailed. The worker's pip, outside the jail, installs them: a direct reference
    (`pkg @ https://...`, `file:...`, a path) would have it fetch whatever address or read
    whatever file a branch names, and an option (`-r/etc/passwd`) read a file of the worker's."""
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        raise EnvironmentFailed(
            f"{requirement[:200]!r}: not a requirement by name (PEP 508); only requirements "
            "by name are installed, not options, paths or URLs"
        ) from None
    if parsed.url is not None:
        raise EnvironmentFailed(
            f"{requirement[:200]!r}: only requirements by name are installed, not direct "
            "references (a URL or a path)"
        )
    return requirement


def base_python() -> str:
    """The interpreter Arena's own runs on, outside Arena's virtual environment."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in (Path(sys.base_prefix) / "bin", Path(sys.base_exec_prefix) / "bin"):
        if (folder / version).exists():
            return str(folder / version)
    return shutil.which(version) or sys.executable


def _project_name(requirement: str) -> str:
    found = _NAME.match(requirement)
    return re.sub(r"[-_.]+", "-", found.group(1)).lower() if found else ""


def added_tools(commands: Sequence[str | None], declared: Sequence[str]) -> list[str]:
    """The pinned tools (TOOL_PINS) that `commands` name and `declared` does not."""
    named = {_project_name(r) for r in declared}
    found: list[str] = []
    for command in (c for c in commands if c):
        for word in _TOOL_WORD.findall(command):
            tool = "pytest" if word == "py.test" else word
            if tool not in named and TOOL_PINS[tool] not in found:
                found.append(TOOL_PINS[tool])
    return found


def environment_key(
    checkout: Path,
    setup_command: str | None,
    commit: str = "",
    interpreter: str = "",
    added: Sequence[str] = (),
) -> str:
    """What an environment is made from: the interpreter, the requirements the checkout declares
    (parsed and sorted), the tools added.
    With a setup command, the checked commit too: the command may run the checkout's code
    (`pip install -e .`) with the environment writable, so a branch never shares an environment
    another check's code could have written."""
    digest = hashlib.sha256()
    made_by = f"{setup_command}\0{commit}" if setup_command else ""
    interpreter = interpreter or f"{base_python()}\0{sys.version}"
    digest.update(f"{interpreter}\0{made_by}\0{' '.join(added)}\0".encode())
    # What is installed, not the files' bytes: a comment or an order changed is the same
    # environment (else each push of a branch could make one more, docs/security.md "Disk").
    for requirement in sorted({_canonical(r) for r in declared_requirements(checkout)}):
        digest.update(f"{requirement}\0".encode())
    return digest.hexdigest()[:24]


def _canonical(requirement: str) -> str:
    parsed = Requirement(requirement)  # declared_requirements let only valid ones through
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


def _within_disk(env: Path, failed: Path, bounds: CacheBounds) -> int:
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


def _tidy(cache_root: Path, key: str, bounds: CacheBounds, echo: Callable[[str], None]) -> None:
    """After a build: the environments unused for days go, then the least recently used until
    the cache fits its quota."""
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
) -> tuple[Path, EnvironmentRun]:
    """The environment of `checkout` (at `commit`) for `commands`: reused when one with its key
    is ready, else built now by `builder`, within `bounds` (workers/race/env_cache.py)."""
    bounds = bounds or CacheBounds()
    started = time.perf_counter()
    declared = declared_requirements(checkout)
    added = added_tools(commands, declared)
    requirements = declared + added
    key = environment_key(checkout, setup_command, commit, builder.interpreter(), added)
    cache_root.mkdir(parents=True, exist_ok=True)
    env, failed = cache_root / key, cache_root / f"{key}.failed"
    with locked(cache_root / f"{key}.lock"):
        if failed.is_file() and time.time() - failed.stat().st_mtime < FAILED_KEPT_S:
            raise EnvironmentFailed(f"{failed.read_text()} (this environment's build failed)")
        if (env / READY).is_file():
            (env / READY).touch()  # used now: not pruned for UNUSED_KEPT_S
            echo(f"== environment {key}: reused ({len(requirements)} requirements)")
            duration = time.perf_counter() - started
            return env, EnvironmentRun(
                key=key,
                reused=True,
                duration_s=duration,
                requirements=requirements,
                added_tools=added,
            )
        shutil.rmtree(env, ignore_errors=True)  # a build that did not finish
        echo(f"== environment {key}: building ({len(requirements)} requirements)")
        try:
            output = builder.make(env, requirements, echo, with_pip=bool(setup_command))
            if setup_command:
                builder.setup(env, setup_command, echo)
        except EnvironmentFailed as exc:
            failed.write_text(str(exc)[:1000])
            raise
        size = _within_disk(env, failed, bounds)
        (env / READY).write_text(key)
    duration = time.perf_counter() - started
    echo(f"== environment {key}: built in {duration:.1f}s ({size >> 20} MiB)")
    _tidy(cache_root, key, bounds, echo)
    return env, EnvironmentRun(
        key=key,
        reused=False,
        duration_s=duration,
        requirements=requirements,
        added_tools=added,
        output_tail=output[-TAIL_CHARS:],
    )
