"""The Store's records of chunks in flight, which the watchdog reads (tasks/liveness.py,
tasks/watchdog.py): which units each chunk message carries, which worker runs each chunk and
its last heartbeat, and the watchdog's own marks (tasks/keys.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tasks.store_base import StoreBase


class InFlight(StoreBase):
    # -- chunks: registered by the worker that runs them ----------------------------------------
    def register_chunk(
        self,
        batch_id: str,
        chunk_id: str,
        info: dict[str, Any],
        read: Callable[[Any], None] | None = None,
    ) -> list[Any]:
        """Record the chunk as running (`info`) with a first heartbeat. `read(pipeline)` adds
        commands to the same round trip: their replies are returned."""
        with self.r.pipeline(transaction=False) as pipe:
            pipe.hset(self.keys.chunks(batch_id), chunk_id, json.dumps(info))
            pipe.hset(self.keys.beats(batch_id), chunk_id, time.time())
            if read is not None:
                read(pipe)
            replies: list[Any] = pipe.execute()[2:]
        return replies

    def beat_chunk(self, batch_id: str, chunk_id: str) -> None:
        self.r.hset(self.keys.beats(batch_id), chunk_id, time.time())

    def forget_chunk_in(self, pipe: Any, batch_id: str, chunk_id: str) -> None:
        """Queue on `pipe` the commands that forget a chunk that ended."""
        pipe.hdel(self.keys.chunks(batch_id), chunk_id)
        pipe.hdel(self.keys.beats(batch_id), chunk_id)

    def forget_chunk(self, batch_id: str, chunk_id: str) -> None:
        with self.r.pipeline(transaction=False) as pipe:
            self.forget_chunk_in(pipe, batch_id, chunk_id)
            pipe.execute()

    def chunk_beat(self, batch_id: str, chunk_id: str) -> float | None:
        """The chunk's last heartbeat (unix s), None when it has none."""
        beat = self.r.hget(self.keys.beats(batch_id), chunk_id)
        return None if beat is None else float(beat)

    def chunk_beats(self, batch_id: str) -> dict[str, float]:
        """Chunk id -> last heartbeat (unix s) of the batch's running chunks."""
        return {c: float(b) for c, b in self.r.hgetall(self.keys.beats(batch_id)).items()}

    def forget_chunks(self, batch_id: str) -> dict[str, Any]:
        """Drop a batch's in-flight records; returns the running chunks it had."""
        keys = self.keys
        removed = self.r.hgetall(keys.chunks(batch_id))
        self.r.delete(keys.chunks(batch_id), keys.beats(batch_id), keys.plan(batch_id))
        return dict(removed)

    # -- the plan: which units each chunk message carries ---------------------------------------
    def record_plan(self, batch_id: str, plan: dict[str, list[str]], replace: bool = False) -> None:
        """Add chunk id -> unit ids to the batch's plan (`replace`: instead of what it held)."""
        with self.r.pipeline(transaction=True) as pipe:
            if replace:
                pipe.delete(self.keys.plan(batch_id))
            if plan:
                mapping = {c: json.dumps(u) for c, u in plan.items()}
                pipe.hset(self.keys.plan(batch_id), mapping=mapping)
            pipe.execute()

    def plan(self, batch_id: str) -> dict[str, list[str]]:
        return {c: json.loads(v) for c, v in self.r.hgetall(self.keys.plan(batch_id)).items()}

    # -- the watchdog's marks (shared by every worker's watchdog) ---------------------------------
    def claim_restore(self, tag: str, ttl_s: float) -> bool:
        """True for the one watchdog that restores the message `tag` (for `ttl_s`)."""
        key = self.keys.restoring(tag)
        return bool(self.r.set(key, "1", nx=True, px=int(ttl_s * 1000)))

    def claim_lost_scan(self, batch_id: str, ttl_s: float) -> bool:
        """True for the one watchdog that looks for the batch's lost units (for `ttl_s`)."""
        key = self.keys.lostscan(batch_id)
        return bool(self.r.set(key, "1", nx=True, px=int(ttl_s * 1000)))

    def stall_since(self, batch_id: str, now: float) -> float | None:
        """Since when the batch has had the number of results it has now; None when that
        number just changed (it is noted now, as of `now`)."""
        key = self.keys.stall(batch_id)
        stored = int(self.r.hlen(self.keys.units(batch_id)))
        seen = self.r.get(key)
        if seen is None or int(seen.split(":")[0]) != stored:
            self.r.set(key, f"{stored}:{now}")
            return None
        return float(seen.split(":")[1])

    def clear_stall(self, batch_id: str) -> None:
        self.r.delete(self.keys.stall(batch_id))
