"""Redis that answers but refuses writes: out of memory under `maxmemory` (OOM), a replica
(READONLY), or a failed snapshot or append-only write with `stop-writes-on-bgsave-error`
(MISCONF). Inside a MULTI even reads are refused then. Not an outage (Redis is up) and not
Arena's bug: one line that says which, never a traceback (docs/reliability.md)."""

from __future__ import annotations

import redis

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


def probe_writes(client: redis.Redis, prefix: str) -> str | None:
    """Whether Redis accepts a write now (one short-lived key): the refusal's line, or None.
    A batch stalled on a refusing Redis reads as running; this says why."""
    try:
        client.set(f"{prefix}probe:writes", "1", px=1000)
    except redis.ResponseError as exc:
        refused = refused_writes(exc)
        if refused is None:
            raise
        return refused
    return None
