"""Everything Arena keeps in Redis (keys in docs/architecture.md), behind one small class."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import redis

from tasks.identity import BatchIdentity
from tasks.provenance import Provenance
from tasks.records import (
    FINISHED,
    BatchInfo,
    BatchStatus,
    LeaderboardRow,
    as_entries,
    by_board,
)
from tasks.validation import InputError
from tasks.workloads.base import LeaderboardEntry, Reduction, UnitResult

# KEYS: the batch's units, its attempts; ARGV: a unit id. A stored unit's attempts stay as they
# were (a redelivered chunk counted one for its first unit every time: 25 against a limit of 3).
COUNT_ATTEMPT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
return redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
"""

__all__ = [
    "FINISHED",
    "BatchInfo",
    "BatchStatus",
    "LeaderboardRow",
    "SaveReply",
    "Store",
    "as_entries",
    "by_board",
]


# What may name a batch: its id or a prefix (hex), a --run-id label, or a scheduled run's
# `NAME@2026-11-26T03:00Z` (tasks/schedules.py). Never a ':' inside: keys beside a batch's own
# (`batch:{id}:plan`, `:units`, ...) are no batch.
BATCH_REF = re.compile(r"[A-Za-z0-9._-]{1,100}(?:@[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z)?")


class SaveReply(NamedTuple):
    """What Store.save_unit read back in its round trip."""

    status: str | None  # the batch's status (a worker stops a cancelled batch's chunk)
    all_stored: bool  # every unit of the batch has a result: the reducer can start
    next_attempts: int  # attempts at the next unit, counting the one now starting


class Store:
    def __init__(self, client: redis.Redis, prefix: str = "arena:") -> None:
        if not client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("Store needs a client with decode_responses=True")
        # redis-py's return types are unions of bytes/str/awaitables; ours are str, so: Any.
        self.r: Any = client
        self.p = prefix
        # Board name -> (its version, its rows): a board changes only when a batch publishes
        # to it, which moves its version (_publish), so a read that finds the version it cached
        # costs one GET (`arena api` reads the same boards over and over).
        self._boards: dict[str, tuple[str, list[LeaderboardRow]]] = {}

    # -- keys -----------------------------------------------------------------------------
    def k_batch(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}"

    def k_units(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}:units"

    def k_errors(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}:errors"

    def k_attempts(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}:attempts"

    def count_attempt(self, pipe: Any, batch_id: str, unit_id: str) -> None:
        """Queue on `pipe`: one more attempt at `unit_id`, unless it already has a result (a
        chunk delivered again skips it: nothing runs, nothing is counted). Its reply is the
        count, 0 for a stored unit. EVAL, not EVALSHA: no extra round trip to load it."""
        pipe.eval(COUNT_ATTEMPT, 2, self.k_units(batch_id), self.k_attempts(batch_id), unit_id)

    def k_logs(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}:logs"

    def k_infra(self, batch_id: str) -> str:
        return f"{self.p}batch:{batch_id}:infra"

    def k_running(self) -> str:
        return f"{self.p}running"

    def k_lb(self, name: str) -> str:
        return f"{self.p}lb:{name}"

    # -- batches --------------------------------------------------------------------------
    def start_batch(
        self,
        spec: dict[str, Any],
        workload: str,
        boards: dict[str, str],
        total: int,
        identity: BatchIdentity,
        provenance: Provenance,
    ) -> None:
        now = time.time()
        batch_id = identity.batch_id
        with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(
                self.k_batch(batch_id),
                mapping={
                    "id": batch_id,
                    "spec": json.dumps(spec),
                    "workload": workload,
                    "leaderboard": ", ".join(boards),
                    "boards": json.dumps(boards),
                    "status": "running",
                    "total": total,
                    "created_at": now,
                    "identity": identity.model_dump_json(),
                    "provenance": provenance.model_dump_json(),
                },
            )
            pipe.hdel(
                self.k_batch(batch_id), "finished_at", "reason", "summary", "entries",
                "entry_provenance", "run_id",
            )  # fmt: skip
            if provenance.run_id:
                pipe.hset(self.k_batch(batch_id), "run_id", provenance.run_id)
            pipe.delete(self.k_attempts(batch_id), f"{self.k_batch(batch_id)}:reducer")
            pipe.zadd(f"{self.p}batches", {batch_id: now})
            pipe.sadd(self.k_running(), batch_id)
            pipe.execute()

    def forget_results(self, batch_id: str) -> None:
        self.r.delete(
            self.k_units(batch_id), self.k_errors(batch_id), self.k_attempts(batch_id),
            self.k_logs(batch_id), self.k_infra(batch_id), f"{self.k_batch(batch_id)}:plan",
        )  # fmt: skip

    def label_run(self, run_id: str, batch_id: str) -> None:
        """`--run-id NAME`: a label that finds the batch again (the latest batch run under it)."""
        self.r.hset(f"{self.p}runs", run_id, batch_id)

    def resolve(self, ref: str) -> str:
        """A batch id, a unique prefix of one, or a run id (--run-id) -> the batch id. Anything
        else is no batch: `<id>:plan` names a key beside the batch's, never a batch."""
        if not BATCH_REF.fullmatch(ref):
            raise InputError(f"batch: no batch or run {ref!r}")
        if self.r.exists(self.k_batch(ref)):
            return ref
        labelled: str | None = self.r.hget(f"{self.p}runs", ref)
        if labelled:
            return labelled
        matches = [b for b in self.r.zrange(f"{self.p}batches", 0, -1) if b.startswith(ref)]
        if len(matches) == 1:
            return str(matches[0])
        if not matches:
            raise InputError(f"batch: no batch or run {ref!r}")
        shown = ", ".join(sorted(matches)[:5])
        raise InputError(f"batch: {ref!r} matches {len(matches)} batches ({shown}); give more")

    def batch(self, batch_id: str) -> BatchInfo | None:
        raw = self.r.hgetall(self.k_batch(batch_id))
        if not raw:
            return None
        data = dict(raw)
        data["completed"] = self.r.hlen(self.k_units(batch_id))
        data["errors"] = self.r.scard(self.k_errors(batch_id))
        data["infrastructure_errors"] = self.r.scard(self.k_infra(batch_id))
        for key in ("spec", "summary", "identity", "provenance", "entries", "boards"):
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
    def reset_attempts(self, batch_id: str, unit_ids: Sequence[str]) -> None:
        """A resubmission gives retried units a fresh count of attempts."""
        if unit_ids:
            self.r.hdel(self.k_attempts(batch_id), *unit_ids)

    def stored_unit_ids(self, batch_id: str) -> set[str]:
        """Units with a result that stands: an infrastructure error does not (a resubmission
        retries it). A worker's chunk reads its own units' results instead (tasks/units.py)."""
        with self.r.pipeline() as pipe:
            pipe.hkeys(self.k_units(batch_id))
            pipe.smembers(self.k_infra(batch_id))
            stored, infra = pipe.execute()
        return set(stored) - set(infra)

    def save_unit(
        self, batch_id: str, result: UnitResult, log: str = "", next_unit: str | None = None,
        also: Callable[[Any], None] | None = None,
    ) -> SaveReply:  # fmt: skip
        """Store a unit's result; in the same round trip, read the batch's status and progress
        and count an attempt of `next_unit` (the one the worker starts next), so a chunk costs
        one Redis round trip per unit (docs/performance.md). `also(pipeline)` adds commands
        that run after these (a chunk forgets itself with its last result)."""
        # Keyed by unit id: a redelivered unit overwrites its own result, never adds one; the
        # set of failed unit ids follows the latest result, so error counts stay exact too.
        with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(self.k_units(batch_id), result.unit_id, result.model_dump_json())
            if log:
                pipe.hset(self.k_logs(batch_id), result.unit_id, log)
            else:
                pipe.hdel(self.k_logs(batch_id), result.unit_id)
            if result.status == "error":
                pipe.sadd(self.k_errors(batch_id), result.unit_id)
            else:
                pipe.srem(self.k_errors(batch_id), result.unit_id)
            if result.error_kind == "infrastructure":
                pipe.sadd(self.k_infra(batch_id), result.unit_id)
            else:
                pipe.srem(self.k_infra(batch_id), result.unit_id)
            pipe.hget(self.k_batch(batch_id), "status")
            pipe.hlen(self.k_units(batch_id))
            pipe.hget(self.k_batch(batch_id), "total")
            if next_unit is not None:
                self.count_attempt(pipe, batch_id, next_unit)
            if also is not None:
                also(pipe)
            replies = pipe.execute()
        status, stored, total = replies[4:7]
        attempts = int(replies[7]) if next_unit is not None else 0
        done = total is not None and int(stored) >= int(total)
        return SaveReply(status=status, all_stored=done, next_attempts=attempts)

    def begin_unit(self, batch_id: str, unit_id: str) -> tuple[str | None, int]:
        """(the batch's status, attempts at `unit_id` counting this one): before a chunk's
        first unit; save_unit(next_unit=...) does the same for each later one."""
        with self.r.pipeline(transaction=False) as pipe:
            pipe.hget(self.k_batch(batch_id), "status")
            self.count_attempt(pipe, batch_id, unit_id)
            status, attempts = pipe.execute()
        return status, int(attempts)

    def unit_results(self, batch_id: str) -> dict[str, UnitResult]:
        return {
            k: UnitResult.model_validate_json(v)
            for k, v in self.r.hgetall(self.k_units(batch_id)).items()
        }

    def logs(self, batch_id: str) -> dict[str, str]:
        """Unit id -> everything the unit printed (units that printed nothing are absent)."""
        return dict(self.r.hgetall(self.k_logs(batch_id)))

    def unit_log(self, batch_id: str, unit_id: str) -> str | None:
        """What one unit printed (None: nothing), without reading the other units' logs."""
        text: str | None = self.r.hget(self.k_logs(batch_id), unit_id)
        return text

    # -- leaderboards ---------------------------------------------------------------------
    def leaderboard_protocol(self, name: str) -> str | None:
        value: str | None = self.r.get(f"{self.k_lb(name)}:protocol")
        return value

    def claim_leaderboard(self, name: str, protocol: str) -> str:
        """The board's protocol, set to `protocol` if the board has none yet — atomically, so two
        specs submitted back to back cannot both claim an empty board."""
        key = f"{self.k_lb(name)}:protocol"
        self.r.set(key, protocol, nx=True)
        return str(self.r.get(key))

    def claim_reducer(self, batch_id: str, ttl_s: float) -> bool:
        """One reducer at a time per batch (the last chunk, a failed chunk's callback and the
        watchdog may each start one)."""
        return bool(self.r.set(f"{self.k_batch(batch_id)}:reducer", "1", nx=True,
                               px=int(ttl_s * 1000)))  # fmt: skip

    def extend_reducer(self, batch_id: str, ttl_s: float) -> None:
        self.r.pexpire(f"{self.k_batch(batch_id)}:reducer", int(ttl_s * 1000))

    def release_reducer(self, batch_id: str) -> None:
        self.r.delete(f"{self.k_batch(batch_id)}:reducer")

    def all_stored(self, batch_id: str) -> bool:
        with self.r.pipeline() as pipe:
            pipe.hlen(self.k_units(batch_id))
            pipe.hget(self.k_batch(batch_id), "total")
            stored, total = pipe.execute()
        return total is not None and int(stored) >= int(total)

    def finish_batch(
        self,
        batch_id: str,
        reduction: Reduction,
        boards: dict[str, str],
        provenance: Provenance,
        entry_provenance: dict[str, dict[str, Any]],
    ) -> None:
        """Summary, leaderboard entries with their provenance, history and the done mark: one
        MULTI/EXEC. Each entry goes to its own board (LeaderboardEntry.board; the first board
        by default)."""
        now = time.time()
        with self.r.pipeline(transaction=True) as pipe:
            for board, entries in by_board(reduction.entries, boards).items():
                self._publish(pipe, batch_id, board, boards[board], entries, entry_provenance, now)
                for entry in entries:  # history keeps every evaluation
                    point = {"batch": batch_id, "score": entry.score, "at": now}
                    key = f"{self.k_lb(board)}:history:{entry.agent}"
                    pipe.zadd(key, {json.dumps(point): now})
            pipe.hset(
                self.k_batch(batch_id),
                mapping={
                    "summary": json.dumps(reduction.summary),
                    "entries": json.dumps([e.model_dump(mode="json") for e in reduction.entries]),
                    "entry_provenance": json.dumps(entry_provenance),
                    "status": "done",
                    "finished_at": now,
                    "provenance": provenance.model_dump_json(),
                },
            )
            pipe.srem(self.k_running(), batch_id)
            pipe.execute()

    def republish(self, batch_id: str) -> None:
        """A finished batch submitted again (same spec, same agents: nothing to run) is again
        the agents' latest evaluation: its entries go back on its boards, with no new history
        point (nothing was evaluated anew)."""
        info = self.batch(batch_id)
        if info is None or info.status != "done" or not info.boards:
            return
        raw = self.r.hget(self.k_batch(batch_id), "entry_provenance")
        provenance = json.loads(raw) if raw else {}
        now = time.time()
        with self.r.pipeline(transaction=True) as pipe:
            for board, entries in by_board(info.entries, info.boards).items():
                self._publish(pipe, batch_id, board, info.boards[board], entries, provenance, now)
            pipe.execute()

    def _publish(
        self, pipe: Any, batch_id: str, board: str, protocol: str,
        entries: Sequence[LeaderboardEntry], entry_provenance: dict[str, dict[str, Any]],
        now: float,
    ) -> None:  # fmt: skip
        """The agent's latest evaluation under the board's protocol replaces its entry."""
        lb = self.k_lb(board)
        pipe.set(f"{lb}:protocol", protocol)
        pipe.sadd(f"{self.p}leaderboards", board)
        # A new version in the same MULTI/EXEC: rows a Store kept of the board are stale. A
        # random token, never a counter: a board deleted and filled again cannot repeat one.
        pipe.set(f"{lb}:version", uuid.uuid4().hex)
        for entry in entries:
            row_provenance = {
                **entry_provenance.get(entry.agent, {}),
                "protocol_fingerprint": protocol,
            }
            pipe.zadd(lb, {entry.agent: entry.score})
            pipe.hset(
                f"{lb}:entry:{entry.agent}",
                mapping={
                    "score": entry.score,
                    "stats": json.dumps(entry.stats),
                    "batch": batch_id,
                    "updated_at": now,
                    "provenance": json.dumps(row_provenance),
                },
            )

    def leaderboard(self, name: str, limit: int | None = None) -> list[LeaderboardRow]:
        """The board's rows, best score first (the first `limit` of them). Rows are kept per
        Store until the board's version moves (a batch published to it): a repeated read costs
        one GET (docs/performance.md); their stats and provenance must not be modified."""
        lb = self.k_lb(name)
        version: str | None = self.r.get(f"{lb}:version")
        cached = self._boards.get(name)
        if version is not None and cached is not None and cached[0] == version:
            return cached[1][:limit]
        agents: list[str] = self.r.zrevrange(lb, 0, -1 if limit is None else limit - 1)
        with self.r.pipeline() as pipe:  # MULTI/EXEC: the rows and the version they belong to
            pipe.get(f"{lb}:version")
            for agent in agents:
                pipe.hgetall(f"{lb}:entry:{agent}")
            read_version, *entries = pipe.execute()
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
                    provenance=json.loads(data.get("provenance", "{}")),
                )
            )
        # Unchanged since the first GET: no batch published in between, so `agents` and the
        # rows are that version's.
        if version is not None and read_version == version and limit is None:
            self._boards[name] = (version, rows)
        return rows[:limit]

    def leaderboard_names(self) -> list[str]:
        return sorted(self.r.smembers(f"{self.p}leaderboards"))

    def history(self, name: str, agent: str) -> list[dict[str, Any]]:
        return [json.loads(p) for p in self.r.zrange(f"{self.k_lb(name)}:history:{agent}", 0, -1)]
