"""The Celery app and its configuration (DESIGN.md, "Reliability rules")."""

from __future__ import annotations

import os
from functools import cache

import redis
from celery import Celery
from kombu.entity import Exchange, Queue

from tasks.settings import ArenaSettings, celery_url
from tasks.store import Store

app = Celery("arena", include=["tasks.units"])
QUEUES = ("cpu", "gpu")


def configure(settings: ArenaSettings) -> Celery:
    """Point the app at settings.redis_url (broker and result backend) with Arena's rules."""
    if not settings.redis_url:
        raise ValueError("ARENA_REDIS_URL is not set")
    url = celery_url(settings.redis_url)
    app.conf.update(
        broker_url=url,
        result_backend=url,
        # A unit is acknowledged only once it has run; a worker that dies mid-unit gives it back.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout_s,
            # Sweep for messages a dead worker left unacknowledged every N seconds (kombu's
            # default throttle would make it every 10 x N).
            "unacked_restore_interval": settings.restore_interval_s,
            "unacked_restore_throttle": 1,
        },
        result_backend_transport_options={"visibility_timeout": settings.visibility_timeout_s},
        result_expires=settings.result_expires_s,
        task_queues=tuple(Queue(q, Exchange(q, type="direct"), routing_key=q) for q in QUEUES),
        task_default_queue="cpu",
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_cancel_long_running_tasks_on_connection_loss=False,
    )
    return app


@cache
def _store(pid: int, url: str, prefix: str) -> Store:
    return Store(redis.Redis.from_url(url, decode_responses=True), prefix)


def store(settings: ArenaSettings | None = None) -> Store:
    """A Store for this process (one connection pool per process: workers fork)."""
    settings = settings or ArenaSettings()
    if not settings.redis_url:
        raise ValueError("ARENA_REDIS_URL is not set")
    return _store(os.getpid(), settings.redis_url, settings.key_prefix)


if ArenaSettings().redis_url:  # workers started with `celery -A tasks.app` configure here
    configure(ArenaSettings())
