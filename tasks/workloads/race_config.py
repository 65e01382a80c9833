"""A race's scoring configuration from the repository's hydra.toml (the seed's format), read
from the base ref at submission: an agent's branch cannot change how it is scored."""

from __future__ import annotations

import tempfile
import tomllib
from pathlib import Path
from typing import Any

from tasks.validation import InputError
from workers.race.git import GitError, git, is_local, read_file, resolve_commit
from workers.race.requirements import (
    REQUIREMENTS_FOLDER,
    EnvironmentFailed,
    EnvironmentOptions,
    UnknownGroup,
    chosen_groups,
    declarations,
)

CONFIG_FILE = "hydra.toml"


def read_hydra_toml(repo: str, base: str, *, required: bool = True) -> dict[str, Any]:
    """The [scoring] table of hydra.toml on `base` of `repo`, a local repository the asker may
    name (tasks/repo_policy.py has admitted it); give a URL's race a `scoring` block.
    `required=False` (command-line flags give the scoring): no hydra.toml, or a URL, is {}."""
    where = f"{repo} ({base})"
    if not is_local(repo):
        if not required:
            return {}
        raise InputError(
            f"scoring: give a scoring block (hydra.toml is read only from a local "
            f"repository, not {repo})"
        )
    try:
        text = read_file(Path(repo), base, CONFIG_FILE)
    except GitError as exc:
        if _missing(repo, base):  # the base itself: say that
            raise InputError(
                f"base: {base!r} is not a branch, tag or commit of the repository"
            ) from None
        if not required:
            return {}
        raise InputError(
            f"scoring: no scoring block in the spec, and no {CONFIG_FILE} on {where} "
            f"({' '.join(str(exc).split())[:200]})"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{CONFIG_FILE} on {where}: not valid TOML ({exc})") from None
    scoring = data.get("scoring")
    if not isinstance(scoring, dict):
        raise InputError(f"{CONFIG_FILE} on {where}: no [scoring] table")
    return scoring


def _missing(repo: str, ref: str) -> bool:
    try:
        return resolve_commit(repo, ref) is None
    except GitError:
        return False  # the repository itself: refused when the refs are resolved


def check_groups(repo: str, base: str, options: EnvironmentOptions, where: str) -> None:
    """InputError naming the field when `options` name a group the base does not declare
    (workers/race/requirements.py); a URL, a base git cannot read (refused when the refs are
    resolved), or declarations the worker will refuse itself, are left to those checks."""
    if options.groups is None or not is_local(repo):
        return
    with tempfile.TemporaryDirectory(prefix="arena-groups-") as folder:
        try:
            _copy_declarations(Path(repo), base, Path(folder))
        except GitError:
            return
        try:
            chosen_groups(declarations(Path(folder)), options.groups)
        except UnknownGroup as exc:
            raise InputError(f"{where}{exc}") from None
        except EnvironmentFailed:
            return


def _copy_declarations(repo: Path, base: str, folder: Path) -> None:
    """pyproject.toml, requirements*.txt and requirements/*.txt as committed on `base`."""
    names = _listed(repo, base)
    wanted = [n for n in names if n == "pyproject.toml" or _requirements_file(n)]
    if REQUIREMENTS_FOLDER in names:
        inside = _listed(repo, f"{base}:{REQUIREMENTS_FOLDER}")
        wanted += [f"{REQUIREMENTS_FOLDER}/{n}" for n in inside if n.endswith(".txt")]
    (folder / REQUIREMENTS_FOLDER).mkdir()
    for name in wanted:
        (folder / name).write_text(read_file(repo, base, name))


def _listed(repo: Path, tree: str) -> list[str]:
    return git("ls-tree", "--name-only", "--end-of-options", tree, cwd=repo).splitlines()


def _requirements_file(name: str) -> bool:
    return name.startswith("requirements") and name.endswith(".txt") and "/" not in name
