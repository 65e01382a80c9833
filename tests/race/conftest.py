"""The race sample repositories (tests/race/projects.py), built once per test session.

Tests marked `cargo` need cargo and clippy: they skip without them, except under CI=true, where
they fail instead (a CI image without cargo must not pass by skipping).
"""

from __future__ import annotations

import functools

import pytest

from tests.needs import unavailable
from tests.race.projects import RaceRepo, cargo_available, make_cargo_repo, make_python_repo


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cargo: needs cargo and clippy (skipped without them, fails under CI=true)"
    )


@functools.cache
def _cargo_available() -> bool:
    return cargo_available()


def require_cargo() -> None:
    if _cargo_available():
        return
    unavailable("cargo with clippy not found (PATH, /root/.cargo/bin)")


@pytest.fixture(autouse=True)
def _cargo_marker(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("cargo") is not None:
        require_cargo()


@pytest.fixture(scope="session")
def python_race_repo(tmp_path_factory: pytest.TempPathFactory) -> RaceRepo:
    return make_python_repo(tmp_path_factory.mktemp("race-python") / "repo")


@pytest.fixture(scope="session")
def cargo_race_repo(tmp_path_factory: pytest.TempPathFactory) -> RaceRepo:
    """The cargo sample; building it needs only git (running its checks needs cargo)."""
    return make_cargo_repo(tmp_path_factory.mktemp("race-cargo") / "repo")
