"""The agent's module compiled once by the jail's fork server, for every unit child after
(workers/agent_child.py). A unit child imports the agent afresh, and with no bytecode written in a
jail (`python -B`; the agent's folder is bound read-only anyway) each import compiled its source
again: ~1 ms a unit for a 100-line module. Compiling runs none of the agent's code, so the zygote
may do it: the modules are found without being imported (importlib's PathFinder, package by
package), compiled, and a source loader that is SourceFileLoader but for the compile step serves
the code object to any unit child whose file still has the same bytes. Standard library only: it
runs in the jail before any agent code."""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import stat
import sys
from types import CodeType

# Source path -> (the bytes it was compiled from, the code). A unit child that changes it changes
# its own copy (fork): the next child gets the zygote's.
COMPILED: dict[str, tuple[bytes, CodeType]] = {}
MAX_SOURCE_BYTES = 1 << 20  # a bigger module is compiled in its unit, as before


class PrecompiledLoader(importlib.machinery.SourceFileLoader):
    """SourceFileLoader, with the zygote's code for a source it compiled from the same bytes."""

    def source_to_code(self, data, path, *, _optimize=-1):  # type: ignore[no-untyped-def, override]
        found = COMPILED.get(path)
        if found is not None and found[0] == data and _optimize == -1:
            return found[1]
        return super().source_to_code(data, path, _optimize=_optimize)


def install() -> None:
    """The loader for every `.py` file found on sys.path from now on (the zygote's, then its
    children's): a path hook before the standard one, and the finders cached so far forgotten."""
    details = [
        (PrecompiledLoader, importlib.machinery.SOURCE_SUFFIXES),
        (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
        (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
    ]
    sys.path_hooks.insert(0, importlib.machinery.FileFinder.path_hook(*details))
    sys.path_importer_cache.clear()


def precompile(module: str) -> int:
    """Compile `module` and the packages above it without running any of them: how many
    source files were compiled (0 where one is not found as a plain source file)."""
    compiled, path = 0, None
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        with contextlib.suppress(Exception):  # not found here: the unit's import says why
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None:
                return compiled
            compiled += _compile(spec.origin)
            path = spec.submodule_search_locations
            if path is None:
                return compiled
            continue
        return compiled
    return compiled


def _compile(origin: str | None) -> int:
    if not origin or not origin.endswith(".py") or origin in COMPILED:
        return 0
    # Never blocked by a FIFO or a device under the agent's name: a regular file, read bounded.
    with open(os.open(origin, os.O_RDONLY | os.O_NONBLOCK), "rb") as source:
        if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
            return 0
        data = source.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        return 0
    # As importlib compiles a source (SourceLoader.source_to_code).
    COMPILED[origin] = (data, compile(data, origin, "exec", dont_inherit=True, optimize=-1))
    return 1
