"""A machine where no bubblewrap jail starts, for tests of what runs there: trusted agents in
the worker's own process (ARENA_TRUST_AGENTS=true), untrusted ones refused."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from workers.sandbox import bwrap

NO_BWRAP = {"ARENA_BWRAP": "/nonexistent/bwrap"}  # for the environment of worker processes


@contextmanager
def no_jail_here(monkeypatch: pytest.MonkeyPatch, trust: bool = False) -> Iterator[None]:
    """In this process: bwrap is not found (its probe is cached per process, so cleared)."""
    with monkeypatch.context() as patch:
        patch.setenv("ARENA_BWRAP", NO_BWRAP["ARENA_BWRAP"])
        patch.setenv("ARENA_TRUST_AGENTS", "true" if trust else "false")
        bwrap.bwrap_path.cache_clear()
        bwrap._probe.cache_clear()
        try:
            yield
        finally:
            bwrap.bwrap_path.cache_clear()
            bwrap._probe.cache_clear()
    bwrap.bwrap_path.cache_clear()
    bwrap._probe.cache_clear()
