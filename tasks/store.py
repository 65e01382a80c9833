"""Everything Arena keeps in Redis (keys in docs/architecture.md), behind one small class."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import redis
from pydantic import BaseModel, ConfigDict

from tasks.workloads.base import LeaderboardEntry, Reduction, UnitResult

BatchStatus = Literal["running", "done", "failed", "cancelled"]
FINISHED: tuple[BatchStatus, ...] = ("done", "failed", "cancelled")


class BatchInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    workload: str
    leaderboard: str
    status: BatchStatus
    total: int
    completed: int = 0
    errors: int = 0
    created_at: float
    finished_at: float | None = None
    reason: str | None = None
    summary: dict[str, Any] | None = None
    spec: dict[str, Any]


class LeaderboardRow(BaseModel):
    agent: str
    score: float
    stats: dict[str, Any]
    batch: str
    updated_at: float


class Store:
    def __init__(self, client: redis.Redis, prefix: str = "arena:") -> None:
        if not client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("Store needs a client with decode_responses=True")
        # redis-py's return types are unions of bytes/str/awaitables; ours are str, so: Any.
        self.r: Any = client
        self.p = prefix

    # -- keys -----------------------------------------------------------------------------
    def k_batch(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}"

    def k_units(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}:units"

    def k_errors(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}:errors"

    def k_deliveries(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}:deliveries"

    def k_lb(self, name: str) -> str:
        return f"{self.p}lb:{name}"

    # -- batches --------------------------------------------------------------------------
    def start_batch(
        self, batch_id: str, spec: dict[str, Any], workload: str, leaderboard: str, total: int
    ) -> None:
        now = time.time()
        with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(
                self.k_batch(batch_id),
                mapping={
                    "id": batch_id,
                    "spec": json.dumps(spec),
                    "workload": workload,
                    "leaderboard": leaderboard,
                    "status": "running",
                    "total": total,
                    "created_at": now,
                },
            )
            pipe.hdel(self.k_batch(batch_id), "finished_at", "reason", "summary")
            pipe.delete(self.k_deliveries(batch_id))
            pipe.zadd(f"{self.p}batches", {batch_id: now})
            pipe.execute()

    def forget_results(self, batch_id: str) -> None:
        self.r.delete(self.k_units(batch_id), self.k_errors(batch_id), self.k_deliveries(batch_id))

    def batch(self, batch_id: str) -> BatchInfo | None:
        raw = self.r.hgetall(self.k_batch(batch_id))
        if not raw:
            return None
        data = dict(raw)
        data["completed"] = self.r.hlen(self.k_units(batch_id))
        data["errors"] = self.r.scard(self.k_errors(batch_id))
        for key in ("spec", "summary"):
            if key in data:
                data[key] = json.loads(data[key])
        return BatchInfo.model_validate(data)

    def progress(self, batch_id: str) -> tuple[int, str | None]:
        with self.r.pipeline() as pipe:
            pipe.hlen(self.k_units(batch_id))
            pipe.hget(self.k_batch(batch_id), "status")
            done, status = pipe.execute()
        return int(done), status

    def batch_ids(self, limit: int = 50) -> list[str]:
        return list(self.r.zrevrange(f"{self.p}batches", 0, limit - 1))

    def status(self, batch_id: str) -> str | None:
        value: str | None = self.r.hget(self.k_batch(batch_id), "status")
        return value

    def set_status(self, batch_id: str, status: BatchStatus, reason: str | None = None) -> None:
        mapping: dict[str, Any] = {"status": status}
        if status in FINISHED:
            mapping["finished_at"] = time.time()
        if reason:
            mapping["reason"] = reason
        self.r.hset(self.k_batch(batch_id), mapping=mapping)

    # -- units ----------------------------------------------------------------------------
    def count_delivery(self, batch_id: str, chunk_id: str) -> int:
        return int(self.r.hincrby(self.k_deliveries(batch_id), chunk_id, 1))

    def stored_unit_ids(self, batch_id: str, unit_ids: Sequence[str] | None = None) -> set[str]:
        if unit_ids is None:
            return set(self.r.hkeys(self.k_units(batch_id)))
        present = self.r.hmget(self.k_units(batch_id), list(unit_ids)) if unit_ids else []
        return {uid for uid, v in zip(unit_ids, present, strict=True) if v is not None}

    def save_unit(self, batch_id: str, result: UnitResult) -> None:
        # Keyed by unit id: a redelivered unit overwrites its own result, never adds one; the
        # set of failed unit ids follows the latest result, so error counts stay exact too.
        with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(self.k_units(batch_id), result.unit_id, result.model_dump_json())
            if result.status == "error":
                pipe.sadd(self.k_errors(batch_id), result.unit_id)
            else:
                pipe.srem(self.k_errors(batch_id), result.unit_id)
            pipe.execute()

    def unit_results(self, batch_id: str) -> dict[str, UnitResult]:
        return {
            k: UnitResult.model_validate_json(v)
            for k, v in self.r.hgetall(self.k_units(batch_id)).items()
        }

    # -- leaderboards ---------------------------------------------------------------------
    def leaderboard_protocol(self, name: str) -> str | None:
        value: str | None = self.r.get(f"{self.k_lb(name)}:protocol")
        return value

    def finish_batch(
        self, batch_id: str, reduction: Reduction, leaderboard: str, protocol: str
    ) -> None:
        """Summary, leaderboard entries, history and the done mark: one MULTI/EXEC."""
        now = time.time()
        lb = self.k_lb(leaderboard)
        with self.r.pipeline(transaction=True) as pipe:
            pipe.set(f"{lb}:protocol", protocol)
            pipe.sadd(f"{self.p}leaderboards", leaderboard)
            for entry in reduction.entries:
                # The agent's latest evaluation under this protocol replaces its entry ...
                pipe.zadd(lb, {entry.agent: entry.score})
                pipe.hset(
                    f"{lb}:entry:{entry.agent}",
                    mapping={
                        "score": entry.score,
                        "stats": json.dumps(entry.stats),
                        "batch": batch_id,
                        "updated_at": now,
                    },
                )
                # ... and history keeps every evaluation.
                point = {"batch": batch_id, "score": entry.score, "at": now}
                pipe.zadd(f"{lb}:history:{entry.agent}", {json.dumps(point): now})
            pipe.hset(
                self.k_batch(batch_id),
                mapping={
                    "summary": json.dumps(reduction.summary),
                    "status": "done",
                    "finished_at": now,
                },
            )
            pipe.execute()

    def leaderboard(self, name: str) -> list[LeaderboardRow]:
        agents: list[str] = self.r.zrevrange(self.k_lb(name), 0, -1)
        with self.r.pipeline() as pipe:
            for agent in agents:
                pipe.hgetall(f"{self.k_lb(name)}:entry:{agent}")
            entries = pipe.execute()
        rows = []
        for agent, raw in zip(agents, entries, strict=True):
            data = dict(raw)
            rows.append(
                LeaderboardRow(
                    agent=agent,
                    score=float(data["score"]),
                    stats=json.loads(data["stats"]),
                    batch=data["batch"],
                    updated_at=float(data["updated_at"]),
                )
            )
        return rows

    def leaderboard_names(self) -> list[str]:
        return sorted(self.r.smembers(f"{self.p}leaderboards"))

    def history(self, name: str, agent: str) -> list[dict[str, Any]]:
        return [json.loads(p) for p in self.r.zrange(f"{self.k_lb(name)}:history:{agent}", 0, -1)]


def as_entries(rows: Iterable[LeaderboardRow]) -> list[LeaderboardEntry]:
    return [LeaderboardEntry(agent=r.agent, score=r.score, stats=r.stats) for r in rows]
