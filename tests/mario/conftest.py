"""The Mario tests need the `mario` extra (the emulator). On a developer's machine without it
they skip with a message; under CI (which installs it) a missing emulator fails the run."""

from __future__ import annotations

import importlib.util
import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("gym_super_mario_bros") is None and os.environ.get("CI"):
        raise pytest.UsageError("CI: the mario extra is not installed (scripts/test installs it)")
