"""The Store's batch records: a batch's hash, the list of batches, the running set and the run
labels (tasks/keys.py)."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

from tasks.fair_share import Share
from tasks.identity import BatchIdentity
from tasks.provenance import Provenance
from tasks.records import FINISHED, BatchInfo, BatchStatus
from tasks.store_base import StoreBase
from tasks.validation import InputError

# What may name a batch: its id or a prefix (hex), a --run-id label, or a scheduled run's
# `NAME@2026-11-26T03:00Z` (tasks/schedules.py). Never a ':' inside: keys beside a batch's own
# (`batch:{id}:plan`, `:units`, ...) are no batch.
BATCH_REF = re.compile(r"[A-Za-z0-9._-]{1,100}(?:@[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z)?")
# Fields of a batch's hash that a new run of it starts without.
RUN_FIELDS = ("finished_at", "reason", "summary", "entries", "entry_provenance", "run_id")


class UnitCounts(NamedTuple):
    """A batch's unit counts as /metrics shows them (status None: the batch is gone)."""

    workload: str | None
    status: str | None
    total: int
    completed: int
    errors: int


class BatchRecords(StoreBase):
    def start_batch(
        self,
        spec: dict[str, Any],
        workload: str,
        boards: dict[str, str],
        total: int,
        identity: BatchIdentity,
        provenance: Provenance,
        share: Share | None = None,
    ) -> None:
        """`share`: its class, team and weights (tasks/fair_share.py; None: the defaults)."""
        now = time.time()
        batch_id, key = identity.batch_id, self.keys.batch(identity.batch_id)
        share = share or Share("scheduled", None, 1.0, 1.0)
        with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(
                key,
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
                    "priority": share.priority,
                    "weight": share.weight,
                    "team_weight": share.team_weight,
                },
            )
            pipe.hdel(key, *RUN_FIELDS, "team")
            if share.team is not None:
                pipe.hset(key, "team", share.team)
            if provenance.run_id:
                pipe.hset(key, "run_id", provenance.run_id)
            pipe.delete(self.keys.attempts(batch_id), self.keys.reducer(batch_id))
            pipe.zadd(self.keys.batches(), {batch_id: now})
            pipe.sadd(self.keys.running(), batch_id)
            pipe.execute()

    def forget_results(self, batch_id: str) -> None:
        keys = self.keys
        self.r.delete(
            keys.units(batch_id),
            keys.errors(batch_id),
            keys.attempts(batch_id),
            keys.in_process(batch_id),
            keys.logs(batch_id),
            keys.infra(batch_id),
            keys.plan(batch_id),
            keys.llm_spent(batch_id),  # a rerun's budget starts from nothing spent
        )

    def label_run(self, run_id: str, batch_id: str) -> None:
        """`--run-id NAME`: a label that finds the batch again (the latest batch run under it)."""
        self.r.hset(self.keys.runs(), run_id, batch_id)

    def run_labels(self) -> dict[str, str]:
        """Run label -> the batch it finds."""
        return dict(self.r.hgetall(self.keys.runs()))

    def resolve(self, ref: str) -> str:
        """A batch id, a unique prefix of one, or a run id (--run-id) -> the batch id. Anything
        else is no batch: `<id>:plan` names a key beside the batch's, never a batch."""
        if not BATCH_REF.fullmatch(ref):
            raise InputError(f"batch: no batch or run {ref!r}")
        if self.r.exists(self.keys.batch(ref)):
            return ref
        labelled: str | None = self.r.hget(self.keys.runs(), ref)
        if labelled:
            return labelled
        matches = [b for b in self.r.zrange(self.keys.batches(), 0, -1) if b.startswith(ref)]
        if len(matches) == 1:
            return str(matches[0])
        if not matches:
            raise InputError(f"batch: no batch or run {ref!r}")
        shown = ", ".join(sorted(matches)[:5])
        raise InputError(f"batch: {ref!r} matches {len(matches)} batches ({shown}); give more")

    def batch(self, batch_id: str) -> BatchInfo | None:
        raw = self.r.hgetall(self.keys.batch(batch_id))
        if not raw:
            return None
        data = dict(raw)
        data["completed"] = self.r.hlen(self.keys.units(batch_id))
        data["errors"] = self.r.scard(self.keys.errors(batch_id))
        data["infrastructure_errors"] = self.r.scard(self.keys.infra(batch_id))
        for key in ("spec", "summary", "identity", "provenance", "entries", "boards"):
            if key in data:
                data[key] = json.loads(data[key])
        return BatchInfo.model_validate(data)

    def progress(self, batch_id: str) -> tuple[int, str | None]:
        with self.r.pipeline() as pipe:
            pipe.hlen(self.keys.units(batch_id))
            pipe.hget(self.keys.batch(batch_id), "status")
            done, status = pipe.execute()
        return int(done), status

    def batch_ids(self, limit: int = 50) -> list[str]:
        return list(self.r.zrevrange(self.keys.batches(), 0, limit - 1))

    def status(self, batch_id: str) -> str | None:
        value: str | None = self.r.hget(self.keys.batch(batch_id), "status")
        return value

    def workload_of(self, batch_id: str) -> str | None:
        """The batch's workload (None: no such batch), in one HGET."""
        value: str | None = self.r.hget(self.keys.batch(batch_id), "workload")
        return value

    def set_status(self, batch_id: str, status: BatchStatus, reason: str | None = None) -> None:
        mapping: dict[str, Any] = {"status": status}
        if status in FINISHED:
            mapping["finished_at"] = time.time()
        if reason:
            mapping["reason"] = reason
        self.r.hset(self.keys.batch(batch_id), mapping=mapping)

    def running_batch_ids(self) -> set[str]:
        """The `running` set (a batch leaves it when it finishes, or when the watchdog finds
        it no longer running)."""
        return set(self.r.smembers(self.keys.running()))

    def drop_running(self, batch_id: str) -> None:
        self.r.srem(self.keys.running(), batch_id)

    def count_statuses(self, page: int) -> dict[str, int]:
        """Batches kept, by status: every batch's status, read `page` per round trip."""
        tally = Counter[str]()
        for start in range(0, int(self.r.zcard(self.keys.batches())), page):
            ids = self.r.zrange(self.keys.batches(), start, start + page - 1)
            with self.r.pipeline(transaction=False) as pipe:
                for batch_id in ids:
                    pipe.hget(self.keys.batch(batch_id), "status")
                tally.update(s for s in pipe.execute() if s is not None)
        return dict(tally)

    def unit_counts(self, batch_ids: Sequence[str]) -> list[UnitCounts]:
        """Each batch's unit counts, in one round trip."""
        with self.r.pipeline(transaction=False) as pipe:
            for batch_id in batch_ids:
                pipe.hmget(self.keys.batch(batch_id), "workload", "status", "total")
                pipe.hlen(self.keys.units(batch_id))
                pipe.scard(self.keys.errors(batch_id))
            replies = pipe.execute()
        counts = []
        for index in range(len(batch_ids)):
            (workload, status, total), completed, errors = replies[3 * index : 3 * index + 3]
            counts.append(
                UnitCounts(workload, status, int(total or 0), int(completed or 0), int(errors or 0))
            )
        return counts
