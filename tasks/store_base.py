"""What every part of the Store shares: the Redis client and the keys (tasks/keys.py). The
parts (tasks/store_batches.py, store_results.py, store_boards.py, store_flight.py) are mixins
of tasks.store.Store, each holding one kind of record."""

from __future__ import annotations

from typing import Any

import redis

from tasks.keys import Keys


class StoreBase:
    def __init__(self, client: redis.Redis, prefix: str = "arena:") -> None:
        if not client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("Store needs a client with decode_responses=True")
        # redis-py's return types are unions of bytes/str/awaitables; ours are str, so: Any.
        self.r: Any = client
        self.p = prefix
        self.keys = Keys(prefix)

    # The keys tests and benchmarks read behind the Store's back (tasks/keys.py has them all).
    def k_batch(self, batch_id: str) -> str:
        return self.keys.batch(batch_id)

    def k_units(self, batch_id: str) -> str:
        return self.keys.units(batch_id)

    def k_errors(self, batch_id: str) -> str:
        return self.keys.errors(batch_id)

    def k_attempts(self, batch_id: str) -> str:
        return self.keys.attempts(batch_id)

    def k_logs(self, batch_id: str) -> str:
        return self.keys.logs(batch_id)

    def k_infra(self, batch_id: str) -> str:
        return self.keys.infra(batch_id)

    def k_running(self) -> str:
        return self.keys.running()

    def k_lb(self, name: str) -> str:
        return self.keys.board(name)

    # What Redis says of itself (tasks/redis_health.py reads it: why writes may not be kept).
    def persistence(self) -> dict[str, Any]:
        """INFO persistence (redis.ResponseError where INFO is refused: a managed Redis)."""
        info: dict[str, Any] = self.r.info("persistence")
        return info

    def data_folder(self) -> tuple[str, bool]:
        """Redis's data folder ('' where CONFIG is refused) and whether Redis is on this
        machine (reached over a unix socket)."""
        try:
            folder = str(self.r.config_get("dir").get("dir") or "")
        except redis.ResponseError:
            folder = ""
        return folder, bool(self.r.connection_pool.connection_kwargs.get("path"))
