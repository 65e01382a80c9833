"""The Celery app and its configuration (DESIGN.md, "Reliability rules")."""

from __future__ import annotations

import os
from functools import cache

import redis
from celery import Celery
from kombu.entity import Exchange, Queue
from pydantic import ValidationError
from redis.backoff import ExponentialBackoff

from tasks import refusal
from tasks.broker import QUEUES as QUEUES  # re-exported: arena routes by it
from tasks.redis_url import WaitRule, transport_options
from tasks.redis_url import client as redis_client
from tasks.refusal import SayingRetry
from tasks.settings import ArenaSettings, celery_url, current_settings
from tasks.store import Store

app = Celery("arena", include=["tasks.units"])
refusal.install(app)  # a worker's Redis outage: one line when it starts, one when it ends
# Backoff of a worker's Redis calls during an outage: 50 ms doubling up to 2 s between tries.
RETRY_BASE_S, RETRY_CAP_S = 0.05, 2.0


def configure(settings: ArenaSettings) -> Celery:
    """Point the app at settings.redis_url (broker and result backend) with Arena's rules."""
    if not settings.redis_url:
        raise ValueError("ARENA_REDIS_URL is not set")
    url = celery_url(settings.redis_url)
    # Sentinels: kombu and Celery's result backend ask them for the primary (master_name).
    finding = transport_options(settings.redis_url, settings.redis_master)
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
            **finding,
        },
        result_backend_transport_options={
            "visibility_timeout": settings.visibility_timeout_s,
            **finding,
        },
        result_expires=settings.result_expires_s,
        task_queues=tuple(Queue(q, Exchange(q, type="direct"), routing_key=q) for q in QUEUES),
        task_default_queue="cpu",
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        # A Redis outage or restart: workers reconnect for as long as it takes, and Celery results
        # and unit results are written once Redis is back (retried, not lost).
        broker_connection_max_retries=None,
        result_backend_always_retry=True,
        result_backend_max_retries=max(1, int(settings.redis_retry_s / RETRY_CAP_S)),
        result_backend_max_sleep_between_retries_ms=int(RETRY_CAP_S * 1000),
        worker_hijack_root_logger=False,
        worker_cancel_long_running_tasks_on_connection_loss=False,
    )
    return app


# Waited for like an outage: Redis up but refusing writes (out of memory, a read-only replica,
# MISCONF); a refused command did nothing, so sending it again is safe. Other replies' errors are
# raised at once by SayingRetry (MISCONF has no class of its own: ResponseError is retried only
# when tasks/refusal.py names it a refusal).
RETRIED = (redis.ConnectionError, redis.TimeoutError, redis.ResponseError)


@cache
def _store(pid: int, url: str, master: str, wait: WaitRule, prefix: str, retry_s: float) -> Store:
    retries = int(retry_s / RETRY_CAP_S) + 6 if retry_s > 0 else 0
    client = redis_client(
        url,
        master,
        wait,
        decode_responses=True,
        retry=SayingRetry(ExponentialBackoff(cap=RETRY_CAP_S, base=RETRY_BASE_S), retries),
        retry_on_error=list(RETRIED),
    )
    return Store(client, prefix)


def store(settings: ArenaSettings | None = None, retry_s: float | None = None) -> Store:
    """A Store for this process (one connection pool per process: workers fork). Its calls
    retry through a Redis outage for `retry_s` (default ARENA_REDIS_RETRY_S; the CLI passes 0
    and says what it is waiting for itself)."""
    settings = settings or current_settings()
    if not settings.redis_url:
        raise ValueError("ARENA_REDIS_URL is not set")
    wait = settings.redis_retry_s if retry_s is None else retry_s
    replicas = WaitRule(settings.redis_wait_replicas, int(settings.redis_wait_timeout_s * 1000))
    return _store(
        os.getpid(), settings.redis_url, settings.redis_master, replicas, settings.key_prefix, wait
    )


def _configure_from_environment() -> None:
    """Workers started with `celery -A tasks.app` are configured here. Bad settings are left to
    the caller (`arena` reports them in one line via load_settings; a worker then refuses)."""
    try:
        settings = ArenaSettings()
    except ValidationError:
        return
    if settings.redis_url:
        configure(settings)


_configure_from_environment()
