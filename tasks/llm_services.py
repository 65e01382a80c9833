"""An llm agent's services shared by the whole cluster through its Redis (workers/llm/services.py
has the interfaces and the in-process versions): the endpoint's limits (RedisGate), the replay
cache (RedisReplayCache) and the batch's spend (RedisSpend).

These talk to Redis on the Store's client (the `limits` library and redis-py's locks need a
client of their own making, not Store methods); their keys are tasks/keys.py's (`llm:...`).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import redis
from limits.storage import RedisStorage
from redis.exceptions import LockNotOwnedError
from redis.lock import Lock

from tasks.keys import Keys
from workers.llm.config import LlmLimits
from workers.llm.services import Gate, LlmServices, WindowGate
from workers.llm.services import local_services as local_services  # the in-process run's

CACHE_TTL_S = 90 * 24 * 3600  # a replay cache entry lives 90 days from its last use
SLOT_POLL_S = 0.1  # a worker waiting for a concurrency slot tries again within this
# With a connection pool, RedisStorage only reads its uri's scheme (`valkey` would pick the
# valkey client): the pool's connections (the Store's, any URL) are what it talks to.
LIMITS_URI = "redis://"


def endpoint_id(endpoint: str) -> str:
    """An endpoint's name as a key part: a readable part (no user or password of a URL; only
    letters, digits, `.` and `-`) and a hash of the whole name."""
    readable = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@]*@", "", endpoint)
    readable = re.sub(r"[^A-Za-z0-9.-]+", "_", readable).strip("_")[:48]
    digest = hashlib.sha256(endpoint.encode()).hexdigest()[:16]
    return f"{readable}-{digest}" if readable else digest


def limit_storage(client: redis.Redis, prefix: str) -> RedisStorage:
    """The `limits` library's storage on the client's connection pool (its retries included)."""
    return RedisStorage(
        LIMITS_URI, connection_pool=client.connection_pool, key_prefix=Keys(prefix).llm_limits()
    )


class RedisGate(WindowGate):
    """The endpoint's requests and tokens per minute in moving windows in Redis (the `limits`
    library), shared by every worker; its concurrency by `limits.concurrent` redis-py locks
    that expire `lease_s` after the request went out, so a killed worker's slot frees itself.
    """

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        endpoint: str,
        limits: LlmLimits,
        lease_s: float,
        storage: RedisStorage | None = None,
    ) -> None:
        super().__init__(storage or limit_storage(client, prefix), endpoint_id(endpoint), limits)
        self.client, self.lease_s = client, lease_s
        keys, named = Keys(prefix), endpoint_id(endpoint)
        self.slot_keys = [keys.llm_slot(named, i) for i in range(limits.concurrent or 0)]

    @contextmanager
    def concurrent_slot(self) -> Iterator[Callable[[], None]]:
        """A free lock slot, held until the request is answered; what it yields renews its
        lease (the wait for the windows may be longer than the lease: the slot is then taken
        again)."""
        if not self.slot_keys:
            yield lambda: None
            return
        held = [self._acquire()]

        def renew() -> None:
            try:
                held[0].reacquire()
            except LockNotOwnedError:
                held[0] = self._acquire()

        try:
            yield renew
        finally:
            with suppress(LockNotOwnedError):  # its lease ran out: nothing of ours to release
                held[0].release()

    def _acquire(self) -> Lock:
        """Any free slot (from a random one on, so waiters spread), waiting until one is."""
        count = len(self.slot_keys)
        while True:
            first = random.randrange(count)
            for i in range(count):
                name = self.slot_keys[(first + i) % count]
                lock: Lock = self.client.lock(name, timeout=self.lease_s, blocking=False)
                if lock.acquire():
                    return lock
            time.sleep(random.uniform(SLOT_POLL_S / 2, SLOT_POLL_S))


class RedisReplayCache:
    """Replay cache entries as JSON strings, each kept CACHE_TTL_S from its last get or put."""

    def __init__(self, client: redis.Redis, prefix: str, ttl_s: int = CACHE_TTL_S) -> None:
        self.client, self.keys, self.ttl_s = client, Keys(prefix), ttl_s

    def get(self, key: str) -> dict[str, Any] | None:
        name = self.keys.llm_cache(key)
        pipe = self.client.pipeline(transaction=False)
        pipe.get(name)
        pipe.expire(name, self.ttl_s)
        raw, _ = pipe.execute()
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
        except ValueError:
            return None
        return entry if isinstance(entry, dict) else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        self.client.set(self.keys.llm_cache(key), json.dumps(entry, sort_keys=True), ex=self.ttl_s)


class RedisSpend:
    """The batch's spend in US dollars, added to by every worker (no expiry: a batch's keys
    have none)."""

    def __init__(self, client: redis.Redis, prefix: str, batch_id: str) -> None:
        self.client, self.key = client, Keys(prefix).llm_spent(batch_id)

    def add(self, usd: float) -> float:
        total: Any = self.client.incrbyfloat(self.key, usd)
        return float(total)

    def spent(self) -> float:
        raw: Any = self.client.get(self.key)
        return float(raw or 0.0)


def cluster_services(client: redis.Redis, prefix: str, batch_id: str) -> LlmServices:
    """A worker's services for one batch, on its Store's Redis client and key prefix."""
    storage = limit_storage(client, prefix)

    def gate(endpoint: str, limits: LlmLimits, lease_s: float) -> Gate:
        return RedisGate(client, prefix, endpoint, limits, lease_s, storage)

    return LlmServices(
        gate=gate,
        cache=RedisReplayCache(client, prefix),
        spend=RedisSpend(client, prefix, batch_id),
    )
