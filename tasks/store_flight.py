"""The Store's records of chunks in flight, which the watchdog reads (tasks/liveness.py,
tasks/watchdog.py): which units each chunk message carries, which worker runs each chunk and
its last heartbeat, and the watchdog's own marks (tasks/keys.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

from tasks import broker
from tasks.store_base import StoreBase

DAY_S = 86_400.0


@cache
def lua(name: str) -> str:
    """The text of tasks/lua/{name}.lua (sent with EVAL: a Redis that restarted or failed
    over has no script cache to miss)."""
    return (resources.files("tasks") / "lua" / f"{name}.lua").read_text()


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
            pipe.eval(lua("beat"), 1, self.keys.beats(batch_id), chunk_id)
            if read is not None:
                read(pipe)
            replies: list[Any] = pipe.execute()[2:]
        return replies

    def beat_chunk(self, batch_id: str, chunk_id: str) -> None:
        """A heartbeat stamped with Redis's clock (tasks/lua/beat.lua), not this worker's."""
        self.r.eval(lua("beat"), 1, self.keys.beats(batch_id), chunk_id)

    def forget_chunk_in(self, pipe: Any, batch_id: str, chunk_id: str) -> None:
        """Queue on `pipe` the commands that forget a chunk that ended."""
        pipe.hdel(self.keys.chunks(batch_id), chunk_id)
        pipe.hdel(self.keys.beats(batch_id), chunk_id)

    def forget_chunk(self, batch_id: str, chunk_id: str) -> None:
        with self.r.pipeline(transaction=False) as pipe:
            self.forget_chunk_in(pipe, batch_id, chunk_id)
            pipe.execute()

    def chunk_beat(self, batch_id: str, chunk_id: str) -> float | None:
        """The chunk's last heartbeat (unix s, Redis's clock), None when it has none."""
        beat = self.r.hget(self.keys.beats(batch_id), chunk_id)
        return None if beat is None else float(beat)

    def chunk_beats(self, batch_id: str) -> dict[str, float]:
        """Chunk id -> last heartbeat (unix s, Redis's clock) of the batch's running chunks."""
        return {c: float(b) for c, b in self.r.hgetall(self.keys.beats(batch_id)).items()}

    def forget_chunks(self, batch_id: str) -> dict[str, Any]:
        """Drop a batch's in-flight records; returns the running chunks it had."""
        keys = self.keys
        removed = self.r.hgetall(keys.chunks(batch_id))
        self.r.delete(keys.chunks(batch_id), keys.beats(batch_id), keys.plan(batch_id))
        return dict(removed)

    def deliveries(self, note: bool) -> tuple[float, dict[str, float | None]]:
        """(Redis's clock now, each unacknowledged message's delivery tag -> when a watchdog
        first saw it, Redis's clock; None: none has yet). `note`: a watchdog's sweep records
        the tags it sees for the first time (tasks/lua/deliveries.lua); otherwise a read-only
        look (`arena status` must work while Redis refuses writes)."""
        seen_key = self.keys.delivered()
        if note:
            reply = self.r.eval(lua("deliveries"), 2, broker.UNACKED_INDEX, seen_key)
            pairs = reply[1:]
            noted: dict[str, float | None] = {
                str(t): float(at) for t, at in zip(pairs[::2], pairs[1::2], strict=True)
            }
            return float(reply[0]), noted
        with self.r.pipeline(transaction=False) as pipe:
            pipe.time()
            pipe.zrange(broker.UNACKED_INDEX, 0, -1)
            pipe.hgetall(seen_key)
            (seconds, micros), tags, seen = pipe.execute()
        ages = {str(t): float(seen[t]) if t in seen else None for t in tags}
        return float(seconds) + float(micros) / 1e6, ages

    # -- worker clocks (tasks/clock.py): shown, never judged ------------------------------------
    def note_clock(self, host: str, skew_s: float, redis_now: float) -> None:
        """Worker `host`'s clock is `skew_s` off Redis's (+ ahead), as read at `redis_now`;
        workers silent for a day (stopped, or restarted under a new pid) are dropped."""
        key = self.keys.clocks()
        self.r.hset(key, host, json.dumps([round(skew_s, 3), redis_now]))
        stale = [h for h, v in self.r.hgetall(key).items() if redis_now - json.loads(v)[1] > DAY_S]
        if stale:
            self.r.hdel(key, *stale)

    def worker_clocks(self, fresh_s: float) -> dict[str, float]:
        """Host -> skew (s) of each worker host that checked within `fresh_s` (Redis's clock)."""
        with self.r.pipeline(transaction=False) as pipe:
            pipe.time()
            pipe.hgetall(self.keys.clocks())
            (seconds, micros), raw = pipe.execute()
        now = float(seconds) + float(micros) / 1e6
        read = {host: json.loads(value) for host, value in raw.items()}
        return {host: float(skew) for host, (skew, at) in read.items() if now - at <= fresh_s}

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
        number just changed (it is noted now, as of `now`: Redis's clock, as every watchdog
        that reads it judges it)."""
        key = self.keys.stall(batch_id)
        stored = int(self.r.hlen(self.keys.units(batch_id)))
        seen = self.r.get(key)
        if seen is None or int(seen.split(":")[0]) != stored:
            self.r.set(key, f"{stored}:{now}")
            return None
        return float(seen.split(":")[1])

    def clear_stall(self, batch_id: str) -> None:
        self.r.delete(self.keys.stall(batch_id))
