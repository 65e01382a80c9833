"""The Store's records of how a pool is shared between batches and teams (tasks/fair_share.py,
docs/architecture.md "Sharing"): the chunks of each batch not yet given to the broker, the
chunks given out and not finished, the pools' running batches and their passes, and the worker
slots each pool has. What changes them is a Lua script of tasks/lua/ (atomic); reads are plain.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any, NamedTuple

from tasks.broker import QUEUES
from tasks.fair_share import (
    DEFAULT_UNIT_S,
    PoolEntry,
    Share,
    as_priority,
    class_rank,
    entry_from,
)
from tasks.store_base import StoreBase

Chunk = tuple[str, list[dict[str, Any]]]  # (chunk id, its units as dicts)


class OutChunk(NamedTuple):
    """A chunk given to the broker and not finished."""

    queue: str
    chunk_id: str
    released_at: float  # Redis's clock


def lua_source(name: str) -> str:
    """tasks/lua/pool.lua (the scheduler) followed by the script `name`."""
    folder = resources.files("tasks") / "lua"
    return (folder / "pool.lua").read_text() + "\n" + (folder / f"{name}.lua").read_text()


def parse_chunks(popped: Iterable[str]) -> list[Chunk]:
    return [(str(chunk_id), units) for chunk_id, units in map(json.loads, popped)]


class Sharing(StoreBase):
    def _run(self, name: str, queue: str, headroom: int, *args: object) -> Any:
        """Run tasks/lua/{name}.lua on the pool of `queue` (EVALSHA; loaded on first use)."""
        scripts: dict[str, Any] = self.__dict__.setdefault("_pool_scripts", {})
        if name not in scripts:
            scripts[name] = self.r.register_script(lua_source(name))
        roots = (self.keys.pool(queue), self.keys.batch(""), headroom)
        return scripts[name](keys=[], args=[*roots, *args])

    # -- what changes the pool (each one script, then the pool topped up) -----------------------
    def join_pool(
        self,
        queue: str,
        batch_id: str,
        share: Share,
        chunks: Sequence[Chunk],
        headroom: int,
        front: bool = False,
    ) -> list[Chunk]:
        """Add the batch's `chunks` to its waiting list (`front`: ahead of those waiting) and
        the batch to the pool (kept as it is when it is there); returns the chunks released,
        for the caller to publish."""
        key = self.keys.pool_waiting(queue, batch_id)
        encoded = [json.dumps([c, units]) for c, units in chunks]
        for start in range(0, len(encoded), 500):
            part = encoded[start : start + 500]
            if front:
                self.r.lpush(key, *reversed(part))
            else:
                self.r.rpush(key, *part)
        size = max((len(units) for _, units in chunks), default=1)
        units = sum(len(u) for _, u in chunks)
        weights = (share.team_weight, share.weight, DEFAULT_UNIT_S, size, units)
        args = (batch_id, share.priority, share.team or "", *weights)
        return parse_chunks(self._run("join", queue, headroom, *args))

    def release_pool(self, queue: str, headroom: int) -> list[Chunk]:
        """Give the broker what the pool's capacity allows; returns the chunks released."""
        return parse_chunks(self._run("release", queue, headroom))

    def end_chunk(
        self, queue: str, batch_id: str, chunk_id: str, took_s: float, ran: int, headroom: int
    ) -> tuple[str | None, list[Chunk]]:
        """A chunk ended after `took_s` seconds (< 0: not known) running `ran` units: it leaves
        the pool's out, its batch's passes are set right and the units count as run for the
        batch's team (TeamRecords.count_team_units, in the same round trip). Returns the
        batch's team and the chunks released in its place."""
        counts = self.keys.team_counts("\0").split("\0")
        args = (batch_id, chunk_id, took_s, ran, *counts)
        team, popped = self._run("chunk_end", queue, headroom, *args)
        return (team or None), parse_chunks(popped)

    def register_slots(
        self, queue: str, node: str, processes: int, ttl_s: float, headroom: int
    ) -> list[Chunk]:
        """Worker `node` has `processes` consuming `queue` for the next `ttl_s` seconds (Redis's
        clock); 0: it leaves. Returns the chunks released (its capacity may have grown)."""
        popped = self._run("register", queue, headroom, node, processes, ttl_s)
        return parse_chunks(popped)

    def leave_pools(self, batch_id: str) -> None:
        """The batch leaves every pool: its waiting chunks, out and pass are dropped."""
        with self.r.pipeline(transaction=True) as pipe:
            for queue in QUEUES:
                pipe.delete(
                    self.keys.pool_waiting(queue, batch_id), self.keys.pool_out(queue, batch_id)
                )
                pipe.hdel(self.keys.pool_batches(queue), batch_id)
            pipe.execute()

    def forget_pools(self) -> None:
        """Drop every pool's sharing state: batches, waiting lists, out, passes, worker slots
        (an interrupted embedded cluster's, before its batches are resubmitted)."""
        keys = list(self.r.scan_iter(self.keys.pools(), count=1000))
        for start in range(0, len(keys), 500):
            self.r.delete(*keys[start : start + 500])

    def drop_out(self, queue: str, batch_id: str, chunk_ids: Sequence[str]) -> None:
        """Chunks no message carries and no worker runs: out no more (the watchdog)."""
        if chunk_ids:
            self.r.hdel(self.keys.pool_out(queue, batch_id), *chunk_ids)

    # -- reads --------------------------------------------------------------------------------
    def pool_batches(self, queue: str) -> list[PoolEntry]:
        """The pool's running batches with chunks waiting or out, in the order the next free
        slot would go (class, team pass, batch pass)."""
        stored = {
            b: json.loads(v) for b, v in self.r.hgetall(self.keys.pool_batches(queue)).items()
        }
        with self.r.pipeline(transaction=False) as pipe:
            for batch_id, entry in stored.items():
                pipe.llen(self.keys.pool_waiting(queue, batch_id))
                pipe.hlen(self.keys.pool_out(queue, batch_id))
                pipe.hget(self.keys.pool_teams(queue, entry["p"]), entry["t"])
            replies = pipe.execute()
        entries = []
        for index, (batch_id, entry) in enumerate(stored.items()):
            waiting, out, team_pass = replies[3 * index : 3 * index + 3]
            entry["tp"] = float(team_pass or 0.0)
            entries.append(entry_from(batch_id, entry, (int(waiting), int(entry["wu"]), int(out))))
        entries.sort(key=lambda e: (class_rank(e.priority), e.team_pass, e.batch_pass))
        return [e for e in entries if e.waiting_chunks or e.out_chunks]

    def pool_slots(self, queue: str) -> int:
        """Worker processes consuming `queue` whose registration has not lapsed."""
        now = self.redis_time()
        live = self.r.zrangebyscore(self.keys.pool_slots(queue), f"({now}", "+inf")
        if not live:
            return 0
        counts = self.r.hmget(self.keys.pool_slot_counts(queue), live)
        return sum(int(c or 0) for c in counts)

    def pool_of(self, batch_id: str) -> str | None:
        """The pool (queue) that holds the batch's chunks; None: none (it ended, or has nothing
        waiting or out). A batch of both queues: the first of QUEUES."""
        with self.r.pipeline(transaction=False) as pipe:
            for queue in QUEUES:
                pipe.hexists(self.keys.pool_batches(queue), batch_id)
            found = pipe.execute()
        return next((q for q, there in zip(QUEUES, found, strict=True) if there), None)

    def waiting_chunk_ids(self, batch_id: str) -> set[str]:
        """The batch's chunks waiting in Redis for the broker: carried, not lost."""
        with self.r.pipeline(transaction=False) as pipe:
            for queue in QUEUES:
                pipe.lrange(self.keys.pool_waiting(queue, batch_id), 0, -1)
            lists = pipe.execute()
        return {chunk_id for raw in lists for chunk_id, _ in parse_chunks(raw)}

    def out_chunks(self, batch_id: str) -> list[OutChunk]:
        with self.r.pipeline(transaction=False) as pipe:
            for queue in QUEUES:
                pipe.hgetall(self.keys.pool_out(queue, batch_id))
            found = pipe.execute()
        return [
            OutChunk(queue, chunk_id, float(json.loads(value)[1]))
            for queue, out in zip(QUEUES, found, strict=True)
            for chunk_id, value in out.items()
        ]

    def share_of(self, batch_id: str) -> Share | None:
        """The share the batch was submitted with (its hash; None: no such batch)."""
        fields = ("status", "priority", "team", "team_weight", "weight")
        status, priority, team, team_weight, weight = self.r.hmget(
            self.keys.batch(batch_id), fields
        )
        if status is None:
            return None
        return Share(as_priority(priority), team, float(team_weight or 1.0), float(weight or 1.0))

    def redis_time(self) -> float:
        """Redis's clock (unix s): what liveness is judged on."""
        seconds, micros = self.r.time()
        return float(seconds) + float(micros) / 1e6
