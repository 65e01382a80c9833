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
- An optional setup command then runs in the sandbox, the environment writable, the network as
  the race says.
- Kept under the work dir by the hash of what declares it (those files, the setup command, the
  interpreter): a branch that changes them gets its own; the others share one, built once
  (a file lock: concurrent checks wait for the first build).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict

READY = ".arena-ready"  # written last: an environment without it is a build that did not finish
# A build that failed is remembered this long: the race's other checks of the same declarations
# fail at once with its reason instead of building again (a later race tries anew).
FAILED_KEPT_S = 600.0
MAX_DECLARING_BYTES = 1 << 20
INSTALL_TIMEOUT_S = 900.0
TAIL_CHARS = 2_000


class EnvironmentFailed(RuntimeError):
    """The environment cannot be made (a requirement with no wheel, a setup command that
    failed): the check cannot measure the branch, and says why."""


class EnvironmentRun(BaseModel):
    """How the check's environment was had: built now or reused, and what it holds."""

    model_config = ConfigDict(extra="forbid")

    kind: str = "python"
    key: str
    reused: bool
    duration_s: float
    requirements: list[str]
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
        project = data.get("project", {})
        found += project.get("dependencies", [])
        for extra in project.get("optional-dependencies", {}).values():
            found += extra
        for group in data.get("dependency-groups", {}).values():
            found += [r for r in group if isinstance(r, str)]  # {include-group} is not a name
    for path in (p for p in files if p.name.startswith("requirements")):
        for line in _read(path).splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith(("#", "-")):  # options (-r, -e, --index) are not read
                found.append(line)
    cleaned = [r.strip() for r in found if isinstance(r, str) and r.strip()]
    for requirement in cleaned:
        # A direct reference (`pkg @ https://...`, `file:...`) would have the worker's pip fetch
        # whatever address or read whatever file a branch names: only names from the index.
        if "@" in requirement or "://" in requirement or requirement.startswith(("file:", ".")):
            raise EnvironmentFailed(
                f"{requirement[:200]!r}: only requirements by name are installed, not direct "
                "references (a URL or a path)"
            )
    return list(dict.fromkeys(cleaned))


def base_python() -> str:
    """The interpreter Arena's own runs on, outside Arena's virtual environment."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in (Path(sys.base_prefix) / "bin", Path(sys.base_exec_prefix) / "bin"):
        if (folder / version).exists():
            return str(folder / version)
    return shutil.which(version) or sys.executable


def environment_key(checkout: Path, setup_command: str | None, commit: str = "") -> str:
    """What an environment is made from. With a setup command, the checked commit too: the
    command may run the checkout's code (`pip install -e .`) with the environment writable, so
    a branch never shares an environment another check's code could have written."""
    digest = hashlib.sha256()
    made_by = f"{setup_command}\0{commit}" if setup_command else ""
    digest.update(f"{base_python()}\0{sys.version}\0{made_by}\0".encode())
    for path in declaring_files(checkout):
        digest.update(f"{path.name}\0".encode() + _read(path).encode() + b"\0")
    return digest.hexdigest()[:24]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _install(env: Path, requirements: list[str], echo: Callable[[str], None]) -> str:
    """The requirements into `env` as wheels only, by the worker's pip (no code of theirs
    runs); the output, or EnvironmentFailed with its end."""
    if not requirements:
        return ""
    argv = [sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install"]
    argv += ["--only-binary=:all:", "--no-input", "--disable-pip-version-check", *requirements]
    # Arena's own PYTHONPATH and virtual environment must not leak into the new one.
    env_vars = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env_vars
        )
    except subprocess.TimeoutExpired:
        took = f"installing the requirements took over {INSTALL_TIMEOUT_S:g}s"
        raise EnvironmentFailed(took) from None
    output = done.stdout + done.stderr
    echo(output.rstrip("\n"))
    if done.returncode != 0:
        last = [line for line in output.splitlines() if line.strip()][-3:]
        raise EnvironmentFailed("installing the requirements failed: " + " | ".join(last))
    return output


SetupRunner = Callable[[Path, str], None]  # (environment, command): runs it or raises


def _build(
    env: Path,
    requirements: list[str],
    setup_command: str | None,
    run_setup: SetupRunner,
    echo: Callable[[str], None],
) -> str:
    made = subprocess.run(
        [base_python(), "-m", "venv", "--without-pip", str(env)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if made.returncode != 0:
        raise EnvironmentFailed(f"cannot make a virtual environment: {made.stderr[-300:]}")
    output = _install(env, requirements, echo)
    if setup_command:
        run_setup(env, setup_command)
    return output


def python_environment(
    checkout: Path,
    cache_root: Path,
    setup_command: str | None,
    run_setup: SetupRunner,
    echo: Callable[[str], None] = print,
    commit: str = "",
) -> tuple[Path, EnvironmentRun]:
    """The environment of `checkout` (at `commit`): reused when one with its key is ready, else
    built now (at its final path: a virtual environment's scripts name their own path)."""
    started = time.perf_counter()
    key = environment_key(checkout, setup_command, commit)
    requirements = declared_requirements(checkout)
    cache_root.mkdir(parents=True, exist_ok=True)
    env, failed = cache_root / key, cache_root / f"{key}.failed"
    with _locked(cache_root / f"{key}.lock"):
        if failed.is_file() and time.time() - failed.stat().st_mtime < FAILED_KEPT_S:
            raise EnvironmentFailed(f"{failed.read_text()} (this environment's build failed)")
        if (env / READY).is_file():
            echo(f"== environment {key}: reused ({len(requirements)} requirements)")
            duration = time.perf_counter() - started
            return env, EnvironmentRun(
                key=key, reused=True, duration_s=duration, requirements=requirements
            )
        shutil.rmtree(env, ignore_errors=True)  # a build that did not finish
        echo(f"== environment {key}: building ({len(requirements)} requirements)")
        try:
            output = _build(env, requirements, setup_command, run_setup, echo)
        except EnvironmentFailed as exc:
            failed.write_text(str(exc)[:1000])
            raise
        failed.unlink(missing_ok=True)
        (env / READY).write_text(key)
    duration = time.perf_counter() - started
    echo(f"== environment {key}: built in {duration:.1f}s")
    return env, EnvironmentRun(
        key=key,
        reused=False,
        duration_s=duration,
        requirements=requirements,
        output_tail=output[-TAIL_CHARS:],
    )
