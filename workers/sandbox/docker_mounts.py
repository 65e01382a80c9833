"""What a Docker sandbox's container sees of the worker's files: the work dir at the worker's own
path, and a race's Python environment beside it (workers/race/builders_docker.py), with the
variables that run its commands in that environment instead of with the image's Arena.
workers/sandbox/docker.py starts the container; this module says what it mounts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ARENA_BIN = "/opt/arena/bin"  # the image's Arena (workers/docker/Dockerfile): never a check's


@dataclass(frozen=True)
class ExtraMount:
    """A folder of the worker's mounted at `target`, its own path, from `source`, the engine's
    host's path of it (`containers.host_path`)."""

    target: str
    source: str
    read_only: bool


def work_mounts(
    workdir: Path,
    inside: str,
    source: str,
    read_only: Sequence[str] = (),
    extra: Sequence[ExtraMount] = (),
) -> list[Any]:
    """The work dir at the worker's own path, read-write. Mounts, not `volumes` binds: a source
    missing on the engine's host (a wrong host_work_dir) is an error, not an empty folder the
    engine makes there. A checkout's .git read-only: a local clone hard-links the source
    repository's object files, so writing them would rewrite the source (as locally). Then
    `extra`, the sandbox's own (a race's environment)."""
    from docker.types import Mount  # here: only workers that use Docker need the engine

    whole = any(name in ("", ".") for name in read_only)
    mounts = [Mount(target=inside, source=source, type="bind", read_only=whole)]
    if (workdir / ".git").is_dir():
        git = Mount(target=f"{inside}/.git", source=f"{source}/.git", type="bind", read_only=True)
        mounts.append(git)
    for name in read_only:  # over the work dir's own mount, as a path of it
        path = workdir / name
        if name in ("", ".", ".git") or path.is_symlink() or not path.exists():
            continue
        mounts.append(
            Mount(target=f"{inside}/{name}", source=f"{source}/{name}", type="bind", read_only=True)
        )
    for mount in extra:
        target, source, read = mount.target, mount.source, mount.read_only
        mounts.append(Mount(target=target, source=source, type="bind", read_only=read))
    return mounts


def python_env_variables(variables: Mapping[str, str], env: Path, workdir: Path) -> dict[str, str]:
    """A command's `variables` (PATH the image's) in the virtual environment `env`, as
    `local.in_python_env` has it in the jail: its bin/ first on PATH and the image's Arena
    (ARENA_BIN) off it, VIRTUAL_ENV, and a checkout's src/ on PYTHONPATH, else none (the
    project itself is not installed)."""
    bin_dir = str(env / "bin")
    rest = [p for p in variables.get("PATH", "").split(":") if p and p not in (ARENA_BIN, bin_dir)]
    found = {**variables, "PATH": ":".join([bin_dir, *rest]), "VIRTUAL_ENV": str(env)}
    found.pop("PYTHONPATH", None)
    found.pop("PYTHONHOME", None)
    if (workdir / "src").is_dir():
        found["PYTHONPATH"] = str(workdir.resolve() / "src")
    return found
