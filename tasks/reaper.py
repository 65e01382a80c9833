"""The reaper of containers a killed worker left behind (docs/sandbox.md): before a worker takes
units, and every minute while it runs (tasks/units.py starts it once the worker is ready)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from celery.signals import worker_init
from celery.utils.log import get_task_logger

from tasks.settings import current_settings
from workers.sandbox.containers import EngineUnavailable, docker_client, reap_orphans

log = get_task_logger(__name__)

REAP_EVERY_S = 60.0  # how often a live worker looks for containers nobody will remove


def _reap_orphan_containers(**_: Any) -> None:
    """Sandbox and agent containers that a killed worker left behind go before this one takes
    units, and every minute while it runs (docs/sandbox.md). No engine: nothing to do."""
    wanted = current_settings().sandbox == "docker" or os.environ.get("DOCKER_HOST")
    if not wanted and not os.path.exists("/var/run/docker.sock"):
        return
    if reap_containers():
        _engine_answered.set()  # worker_ready starts the periodic passes (after the fork)


worker_init.connect(_reap_orphan_containers)
_engine_answered = threading.Event()


def keep_reaping() -> None:
    while True:
        time.sleep(REAP_EVERY_S)
        reap_containers()


def reap_containers() -> bool:
    """One pass of the reaper; False when no engine answers (no later passes then)."""
    try:
        client = docker_client(timeout_s=10)
        reaped = reap_orphans(client)
        client.close()
    except EngineUnavailable:
        return False
    except Exception as exc:  # the engine answered oddly: the worker goes on all the same
        log.warning("could not look for orphaned sandbox containers: %s", exc)
        return True
    if reaped:
        log.warning("removed %d container(s) a dead worker left: %s", len(reaped), reaped)
    return True


def keep_reaping_if_engine() -> None:
    """Periodic passes, in a thread of the worker's main process (after the pool forked)."""
    if _engine_answered.is_set():
        threading.Thread(target=keep_reaping, name="arena-reaper", daemon=True).start()
