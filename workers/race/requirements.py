"""What goes into a race's environment (docs/race.md, "What goes into an environment"): the
project's runtime dependencies, the groups the race names (or, by default, those whose name says
test; where none does, dev), and the tools the race's commands name, at Arena's pins where the
commit leaves them undeclared (or, with `pin_tools`, unversioned).

A group is a `[dependency-groups]` group of pyproject.toml (its `{include-group = ...}` entries
resolved by packaging's PEP 735 resolver), a `[project.optional-dependencies]` extra, or a
top-level `requirements-NAME.txt` (`requirements_NAME.txt`); `requirements.txt` itself is
runtime. Installing every group is what issue 36 measured on pallets/itsdangerous: sphinx, tox,
pre-commit, mypy and pyright for commands that needed pytest and ruff (134 packages, 295 MB).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from packaging.dependency_groups import DependencyGroupResolver
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, Field

MAX_DECLARING_BYTES = 1 << 20
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
# The groups chosen when the race names none: those whose name says test (tests, testing,
# tests-random); where none does, those that say dev (a `dev = ["pytest", ...]` that is the
# project's only test declaration). Not dev beside a test group: pallets' dev is ruff, tox and
# tox-uv (uv alone about 40 MiB), which test commands never run. Never docs, lint or typing.
_TEST_GROUP = re.compile(r"(?:^|-)test\w*(?:-|$)")
_DEV_GROUP = re.compile(r"(?:^|-)(?:dev|develop|development)(?:-|$)")
_REQUIREMENTS_FILE = re.compile(r"^requirements[-_](.+)\.txt$")
REQUIREMENTS_FOLDER = "requirements"  # requirements/NAME.txt: group NAME
GroupName = Annotated[str, Field(pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$")]


class EnvironmentFailed(RuntimeError):
    """The environment cannot be made (a requirement with no wheel, a setup command that
    failed): the check cannot measure the branch, and says why."""


class UnknownGroup(EnvironmentFailed):
    """The race names a group the commit does not declare."""


class EnvironmentOptions(BaseModel):
    """The race's `scoring.environment` table: the groups to install (None: those whose name
    says test, else dev) and whether declared tools with no version take Arena's pins too."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["python"] = "python"
    groups: Annotated[list[GroupName], Field(max_length=64)] | None = None
    pin_tools: bool = False


class Selection(BaseModel):
    """What an environment is made of: the requirements, the groups they came from, the tools
    added at Arena's pins and those whose declaration was pinned (`pin_tools`)."""

    model_config = ConfigDict(extra="forbid")

    requirements: list[str]
    groups: list[str]
    added_tools: list[str]
    pinned_tools: list[str] = []


class Declarations(BaseModel):
    """What a checkout declares: its name, runtime requirements and every group by name."""

    model_config = ConfigDict(extra="forbid")

    project: str = ""
    runtime: list[str] = []
    groups: dict[str, list[str]] = {}


def declaring_files(checkout: Path) -> list[Path]:
    names = ["pyproject.toml", "setup.cfg", "setup.py"]
    found = [checkout / n for n in names if (checkout / n).is_file()]
    found += sorted(p for p in checkout.glob("requirements*.txt") if p.is_file())
    folder = checkout / REQUIREMENTS_FOLDER
    if folder.is_dir() and not folder.is_symlink():
        found += sorted(p for p in folder.glob("*.txt") if p.is_file())
    return [p for p in found if not p.is_symlink()]


def _group_of_file(path: Path, checkout: Path) -> str | None:
    """The group a requirements file declares: `requirements-NAME.txt` and
    `requirements/NAME.txt` (pip-compile's layout, pallets' itsdangerous 2.2.0) are NAME;
    `requirements.txt` is runtime (None)."""
    if path.parent != checkout:
        return canonicalize_name(path.stem)
    named = _REQUIREMENTS_FILE.match(path.name)
    return canonicalize_name(named.group(1)) if named else None


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


def _resolved_groups(table: dict[str, Any]) -> dict[str, list[str]]:
    """Each `[dependency-groups]` group with its includes resolved (PEP 735)."""
    try:
        resolver = DependencyGroupResolver(table)
        return {canonicalize_name(n): [str(r) for r in resolver.resolve(n)] for n in table}
    except (ExceptionGroup, ValueError, TypeError, LookupError) as exc:
        inner = exc.exceptions[0] if isinstance(exc, ExceptionGroup) else exc
        raise EnvironmentFailed(f"pyproject.toml: [dependency-groups]: {inner}") from None


def _requirement_lines(text: str) -> list[str]:
    lines = (line.split(" #", 1)[0].strip() for line in text.splitlines())
    # Options (-r, -e, --index-url) are not read.
    return [line for line in lines if line and not line.startswith(("#", "-"))]


def _from_pyproject(checkout: Path) -> Declarations:
    try:
        data = tomllib.loads(_read(checkout / "pyproject.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise EnvironmentFailed(f"pyproject.toml: not valid TOML ({exc})") from None
    project = _table(data, "project")
    groups: dict[str, list[str]] = {}
    for extra_name, extra in _table(project, "optional-dependencies").items():
        where = f"[project.optional-dependencies] {extra_name}"
        groups[canonicalize_name(extra_name)] = _strings(extra, where)
    for group, requirements in _resolved_groups(_table(data, "dependency-groups")).items():
        groups[group] = groups.get(group, []) + requirements  # an extra of the same name too
    name = project.get("name")
    return Declarations(
        project=canonicalize_name(name) if isinstance(name, str) else "",
        runtime=_strings(project.get("dependencies", []), "[project] dependencies"),
        groups=groups,
    )


def declarations(checkout: Path) -> Declarations:
    """Everything the checkout declares, each requirement checked to be one by name."""
    files = declaring_files(checkout)
    found = Declarations()
    if checkout / "pyproject.toml" in files:
        found = _from_pyproject(checkout)
    for path in (p for p in files if p.suffix == ".txt"):
        lines = _requirement_lines(_read(path))
        group = _group_of_file(path, checkout)
        if group is None:
            found.runtime += lines
        else:
            found.groups[group] = found.groups.get(group, []) + lines
    found.runtime = [by_name(r) for r in found.runtime]
    found.groups = {g: [by_name(r) for r in reqs] for g, reqs in found.groups.items()}
    return found


def by_name(requirement: str) -> str:
    """`requirement` if it is a PEP 508 requirement by name (from the index); else
    EnvironmentFailed. The worker's pip, outside the jail, installs them: a direct reference
    (`pkg @ https://...`, `file:...`, a path) would have it fetch whatever address or read
    whatever file a branch names, and an option (`-r/etc/passwd`) read a file of the worker's."""
    requirement = requirement.strip()
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


def chosen_groups(found: Declarations, named: Sequence[str] | None) -> list[str]:
    """The groups `named` (each must be declared), or by default those whose name says test
    (where none does, those that say dev)."""
    if named is None:
        tests = [g for g in found.groups if _TEST_GROUP.search(g)]
        return tests or [g for g in found.groups if _DEV_GROUP.search(g)]
    declared = ", ".join(sorted(found.groups)) or "none"
    chosen = []
    for index, name in enumerate(named):
        group = canonicalize_name(name)
        if group not in found.groups:
            raise UnknownGroup(
                f"environment.groups[{index}]: {name!r} is not a dependency group, extra or "
                f"requirements file of this commit (it declares: {declared})"
            )
        chosen.append(group)
    return list(dict.fromkeys(chosen))


def _own_extras(requirements: list[str], found: Declarations) -> list[str]:
    """`requirements` with the project's own extras (`all = ["pkg[test]"]`) expanded: pip
    would fetch the project itself from the index instead."""
    out: list[str] = []
    seen: set[str] = set()
    pending = list(requirements)
    while pending:
        requirement = pending.pop(0)
        parsed = Requirement(requirement)
        if found.project and canonicalize_name(parsed.name) == found.project:
            expanded: list[str] = []
            for extra in sorted(canonicalize_name(e) for e in parsed.extras):
                if extra not in seen and extra in found.groups:
                    seen.add(extra)
                    expanded += found.groups[extra]
            pending = expanded + pending  # in its place
            continue
        out.append(requirement)
    return out


def project_name(requirement: str) -> str:
    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return ""


def added_tools(commands: Sequence[str | None], declared: Sequence[str]) -> list[str]:
    """The pinned tools (TOOL_PINS) that `commands` name and `declared` does not."""
    named = {project_name(r) for r in declared}
    found: list[str] = []
    for command in (c for c in commands if c):
        for word in _TOOL_WORD.findall(command):
            tool = "pytest" if word == "py.test" else word
            if tool not in named and TOOL_PINS[tool] not in found:
                found.append(TOOL_PINS[tool])
    return found


def _pinned(requirement: str) -> str | None:
    """A pinned tool declared with no version, at Arena's pin (its marker and extras kept)."""
    parsed = Requirement(requirement)
    name = canonicalize_name(parsed.name)
    if name not in TOOL_PINS or parsed.specifier:
        return None
    parsed.specifier = SpecifierSet("==" + TOOL_PINS[name].split("==", 1)[1])
    return str(parsed)


def select(
    checkout: Path, commands: Sequence[str | None], options: EnvironmentOptions
) -> Selection:
    """What the environment of `checkout` holds for `commands`, as `options` choose."""
    found = declarations(checkout)
    groups = chosen_groups(found, options.groups)
    declared = _own_extras(found.runtime + [r for g in groups for r in found.groups[g]], found)
    pinned: list[str] = []
    if options.pin_tools:
        for index, requirement in enumerate(declared):
            pin = _pinned(requirement)
            if pin is not None:
                declared[index] = pin
                pinned.append(pin)
    declared = list(dict.fromkeys(declared))
    added = added_tools(commands, declared)
    return Selection(
        requirements=declared + added, groups=groups, added_tools=added, pinned_tools=pinned
    )
