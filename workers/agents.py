"""The agent contract and loading agents given as Python entry points (`package.module:factory`).

Every workload speaks one contract (docs/agents.md): a factory called with no arguments returns
an object with `reset(*, seed, **context)` and `act(observation) -> action`. Entry points are
imported by one rule, in one process or on a worker: the working directory first, then
PYTHONPATH, then installed packages (`workers.fingerprint.agent_search_path`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
from typing import Any, Protocol

from workers.fingerprint import (
    AgentFingerprint,
    FingerprintError,
    agent_search_path,
    source_fingerprint,
)

ENTRY_POINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class Agent(Protocol):
    """What a factory returns. `reset` is called with keywords before every episode."""

    def reset(self, *, seed: int, **context: Any) -> None: ...
    def act(self, observation: Any) -> Any: ...


class AgentChanged(RuntimeError):
    """The agent's files on this worker are not the ones the batch was submitted with."""


# The source fingerprint of each top-level package this process imported agents from: when the
# files change, the package is imported afresh instead of running the code from memory.
_imported: dict[str, str] = {}


def load_entry_point(spec: str, expected: AgentFingerprint | None = None) -> Any:
    """Import `package.module:factory` (freshly if its files changed) and call the factory.

    With `expected` (the fingerprint taken at submission) a source agent whose files differ here
    raises AgentChanged: results of other code are never stored under the batch's identity."""
    return entry_point_factory(spec, expected)()


def entry_point_factory(spec: str, expected: AgentFingerprint | None = None) -> Any:
    """The factory of `package.module:factory`, imported as load_entry_point does (checked
    against `expected` once), for an agent made more than once (an instance per episode slot:
    workers/games/lockstep.py)."""
    module_name, attribute = spec.split(":")
    digest = source_digest(spec, expected)
    if digest is not None:
        _refresh(module_name.split(".")[0], digest)
    return getattr(importlib.import_module(module_name), attribute)


def source_digest(spec: str, expected: AgentFingerprint | None = None) -> str | None:
    """The fingerprint digest of the entry point's files on this machine, checked against
    `expected`: AgentChanged when a source agent's files are not the ones submitted. None for an
    installed distribution, or a declared agent whose files cannot be found (taken on trust).
    Checked in the worker, before the agent runs anywhere (in this process or in its sandbox)."""
    if not ENTRY_POINT.match(spec):
        raise ValueError(f"entry point {spec!r} is not of the form package.module:factory")
    agent_search_path()
    top = spec.split(":")[0].split(".")[0]
    if expected is None or expected.kind == "source":
        current = source_fingerprint(spec)
        if expected is not None and current.digest != expected.digest:
            raise AgentChanged(
                f"the files of {top!r} changed since the batch was submitted "
                f"({current.detail}); resubmit to evaluate the new code"
            )
        return current.digest
    if expected.kind == "declared":
        # Taken on trust, but a worker still never runs a stale copy from memory.
        with contextlib.suppress(FingerprintError):
            return source_fingerprint(spec).digest
    return None


def _refresh(top: str, digest: str) -> None:
    """Forget a package imported from files that have changed since (a long-lived worker)."""
    previous = _imported.get(top)
    _imported[top] = digest
    if previous is None or previous == digest:
        return
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        cached = getattr(sys.modules.pop(name), "__cached__", None)
        # Byte code is checked by the source's mtime in whole seconds and size: an edit within
        # the same second could run the old byte code, so it is removed.
        if isinstance(cached, str):
            with contextlib.suppress(OSError):
                os.unlink(cached)
    importlib.invalidate_caches()
