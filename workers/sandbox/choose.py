"""Choosing a sandbox backend by name: the one module that knows every backend (base.py, the
interface, knows none; each backend imports the interface)."""

from __future__ import annotations

from typing import Any

from workers.sandbox.base import Sandbox
from workers.sandbox.docker import DockerSandbox
from workers.sandbox.local import LocalSandbox


def get_sandbox(kind: str = "local", **options: Any) -> Sandbox:
    """The sandbox a setting names, made with `options` (its constructor's keyword arguments):
    "local" (a bubblewrap jail per command; `jail=False`: unjailed processes of the worker's
    user, for trusted code) or "docker" (a sibling container per session)."""
    if kind == "local":
        return LocalSandbox(**options)
    if kind == "docker":
        return DockerSandbox(**options)
    raise ValueError(f"unknown sandbox kind {kind!r}: known kinds are 'local' and 'docker'")
