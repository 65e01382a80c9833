"""Fixtures every test package may use: the real Docker engine (tests/docker_support.py), and a
Celery app with no connections left over from another test."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

pytest_plugins = ["tests.docker_support"]


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
