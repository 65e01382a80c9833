"""What a test needs from the machine (a Docker engine, a browser, kubectl, promtool): missing,
it skips with the reason on a developer's machine, and fails under CI (CI=true), where the
project's scripts install and start all of them and a skip would hide a broken setup."""

from __future__ import annotations

import os

import pytest


def unavailable(reason: str) -> None:
    """Skip with `reason` (say how to get the thing), or fail under CI."""
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"{reason}: required under CI")
    pytest.skip(reason)


def require_bwrap() -> None:
    """A bubblewrap jail starts here (the sandbox of untrusted code), or skip / fail under CI."""
    from workers.sandbox import bwrap

    why = bwrap.probe()
    if why is not None:
        unavailable(f"no bubblewrap jail starts here: {why}")
