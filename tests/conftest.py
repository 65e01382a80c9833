"""Fixtures every test package may use: the real Docker engine (tests/docker_support.py), and a
Celery app with no connections left over from another test."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["tests.docker_support"]

# Every race runs in an environment of its own (docs/race.md, "The race's environment"), whose
# requirements pip installs: in the tests, from the wheels scripts/install-test-tools fetched,
# never from an index. Set before any worker process starts, so that every one inherits it.
RACE_WHEELS = Path(__file__).resolve().parents[1] / ".test-tools" / "race-wheels"
os.environ["PIP_NO_INDEX"] = "1"
os.environ["PIP_FIND_LINKS"] = str(RACE_WHEELS)


def forget_celery_connections() -> None:
    """The Celery app (one per process) caches its broker pools and result backends. Each test
    has its own Redis, so a test that configures it would send the next test in the same xdist
    worker to a Redis that no longer exists (ci on 26a8279). `arena api` configures it once per
    process; only the tests need this."""
    module = sys.modules.get("tasks.app")
    if module is None:  # nothing imported it yet: nothing cached
        return
    celery = module.app
    celery._pool = None
    celery.amqp._producer_pool = None
    celery._backend_cache = None
    celery._local = threading.local()  # the per-thread result backends


@pytest.fixture(autouse=True)
def fresh_celery_connections() -> Iterator[None]:
    forget_celery_connections()
    yield
    forget_celery_connections()
