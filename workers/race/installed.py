"""What a race's environment holds, on record (docs/race.md, "How versions are recorded"): each
installed distribution's name and version, read by the worker from the environment's
`*.dist-info/METADATA` headers, and the versions of the tools the race's commands name.

With a setup command the checkout's own code ran with the environment writable, so what is read
there is a branch's: no link is followed (a METADATA linked to a worker's file), a file is read
to a bound, and only the Name and Version headers are kept, bounded too.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name

MAX_METADATA_BYTES = 64 << 10  # the headers come first; the long description is not needed
MAX_DISTRIBUTIONS = 2_000
_VERSION = re.compile(r"^[A-Za-z0-9.+!_-]{1,64}$")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _headers(metadata: Path) -> tuple[str, str] | None:
    """(name, version) from a METADATA file that is a plain file, not a link."""
    try:
        fd = os.open(metadata, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        text = handle.read(MAX_METADATA_BYTES).decode("utf-8", errors="replace")
    headers = HeaderParser().parsestr(text.split("\n\n", 1)[0])
    name, version = str(headers.get("Name") or ""), str(headers.get("Version") or "")
    if not _WORD.fullmatch(name[:100]) or not _VERSION.match(version):
        return None
    return canonicalize_name(name), version


def installed_distributions(env: Path) -> dict[str, str]:
    """Each distribution installed in the environment `env` (name → version), by name."""
    found: dict[str, str] = {}
    for site in sorted(env.glob("lib/python*/site-packages")):
        if site.is_symlink() or not site.is_dir():
            continue
        for info in sorted(site.glob("*.dist-info"))[:MAX_DISTRIBUTIONS]:
            if info.is_symlink():
                continue
            named = _headers(info / "METADATA")
            if named is not None:
                found.setdefault(*named)
    return dict(sorted(found.items()))


def tool_versions(commands: Sequence[str | None], installed: dict[str, str]) -> dict[str, str]:
    """The installed distributions the commands name as a word (`pytest`, `ruff`, `tox`;
    `py.test` is pytest), each with its version."""
    tools: dict[str, str] = {}
    for command in (c for c in commands if c):
        for word in _WORD.findall(command):
            name = "pytest" if word == "py.test" else canonicalize_name(word)
            if name in installed:
                tools[name] = installed[name]
    return tools


def described(installed: dict[str, str]) -> str:
    """`name version, ...` for a log line or a report."""
    return ", ".join(f"{name} {version}" for name, version in installed.items()) or "nothing"
