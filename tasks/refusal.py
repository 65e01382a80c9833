"""Redis that answers but refuses writes: out of memory under `maxmemory` (OOM), a replica
(READONLY), or a failed snapshot or append-only write with `stop-writes-on-bgsave-error`
(MISCONF). Inside a MULTI even reads are refused then. Not an outage (Redis is up) and not
Arena's bug: one line that says which, never a traceback (docs/reliability.md)."""

from __future__ import annotations

import logging
from typing import Any

import redis
from celery import Celery, signals
from kombu.message import Message
from redis.retry import Retry

from tasks.outage import NoticeReconnect, Outage, QuietReconnects, ignore_cancel_notice
from tasks.store import Store

ADVICE = {
    "OOM": "Redis is out of memory (maxmemory): free memory or raise maxmemory",
    "READONLY": "ARENA_REDIS_URL points at a read-only replica: point it at the primary",
    "MISCONF": "Redis cannot write its data to disk (a full disk?): see its log",
}


def refused_writes(exc: BaseException) -> str | None:
    """One line naming why Redis refuses, or None when `exc` is something else."""
    text = " ".join(str(exc).split())
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        kind = "OOM"
    elif isinstance(exc, redis.exceptions.ReadOnlyError):
        kind = "READONLY"
    elif isinstance(exc, redis.ResponseError) and "MISCONF " in text:
        kind = "MISCONF"  # no class of its own in redis-py
    else:
        return None
    return f"Redis refuses writes ({text}): {ADVICE[kind]}"


def probe_writes(db: Store | redis.Redis, prefix: str = "arena:") -> str | None:
    """Whether Redis accepts a write now (one short-lived key): the refusal's line, or None.
    A batch stalled on a refusing Redis reads as running; this says why. `db`: a Store, or
    a client (decode_responses) and the key prefix."""
    store = db if isinstance(db, Store) else Store(db, prefix)
    try:
        store.write_probe()
    except redis.ResponseError as exc:
        refused = refused_writes(exc)
        if refused is None:
            raise
        return refused
    return None


# Per process: every client of a worker process shares the story.
REFUSAL = Outage(
    "%s; unit results wait and are stored once it accepts them",
    "Redis accepts writes again after %.0fs",
)


class SayingRetry(Retry):
    """redis-py's retry, saying in one line when Redis starts refusing writes and in one when
    a refused command goes through again (a worker's results wait meanwhile)."""

    def call_with_retry(self, do: Any, fail: Any, *args: Any, **kwargs: Any) -> Any:
        if self.get_retries() == 0:  # a client that says what it waits for itself (the CLI)
            return super().call_with_retry(do, fail, *args, **kwargs)
        refused = False

        def failed(error: Exception, *more: Any) -> Any:
            nonlocal refused
            if isinstance(error, redis.ResponseError):
                why = refused_writes(error)
                if why is None:
                    raise error  # a command's own error (WRONGTYPE, NOSCRIPT...): never retried
                refused = True
                REFUSAL.lost(why)
            return fail(error, *more)

        result = super().call_with_retry(do, failed, *args, **kwargs)
        if refused:  # only a refused command that went through says it is over (reads pass)
            REFUSAL.back()
        return result


class QuietRefusals(logging.Filter):
    """kombu's "maybe_refresh_binding_expiry: Redis error, will retry" with a traceback, every
    second of a refusal: the worker's own line says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or refused_writes(error) is None


def install(app: Celery) -> None:
    """A worker's faults in Arena's own lines: a Redis outage (tasks/outage.py) and a Redis
    that refuses writes, instead of Celery's and kombu's repeated ones."""
    logging.getLogger("celery.worker.consumer.consumer").addFilter(QuietReconnects())
    logging.getLogger("kombu.transport.redis").addFilter(QuietRefusals())
    app.steps["consumer"].add(NoticeReconnect)
    signals.worker_ready.connect(ignore_cancel_notice, weak=False)
    refused_acks_let_go()


def refused_acks_let_go() -> None:
    """Celery acknowledges a message catching connection errors only, so a write refused on the
    ack itself (kombu's pipeline on `unacked`, during MISCONF or OOM) ended the consumer:
    "Unrecoverable error", the worker restarted, its refusal never said ended. The ack is let
    go instead, in one line: the message stays in `unacked`, the watchdog hands it out again
    as held by a lost worker, and its units find their results stored (the first stands:
    tasks/lua/store_results.lua)."""
    original = Message.ack_log_error
    if getattr(original, "lets_refusals_go", False):
        return

    def ack_log_error(self: Message, logger: Any, errors: Any, multiple: bool = False) -> None:
        try:
            original(self, logger, errors, multiple=multiple)  # type: ignore[no-untyped-call]
        except redis.ResponseError as exc:
            why = refused_writes(exc)
            if why is None:
                raise
            logging.getLogger("arena.worker").warning(
                "a finished chunk's acknowledgement was refused (%s); it is handed out again "
                "and finds its units stored",
                " ".join(str(exc).split())[:200],
            )

    ack_log_error.lets_refusals_go = True  # type: ignore[attr-defined]
    Message.ack_log_error = ack_log_error  # type: ignore[method-assign]
