"""Celery tasks: run a chunk of units, reduce a batch."""

from __future__ import annotations

import os
import time
from typing import Any

from celery import Task
from celery.signals import worker_process_init, worker_process_shutdown
from celery.utils.log import get_task_logger

from tasks import metrics
from tasks.app import app, store
from tasks.execute import error_result, execute_unit, watch_for_shutdown
from tasks.provenance import finished_provenance
from tasks.settings import ArenaSettings
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import Unit

log = get_task_logger(__name__)
# The reducer waits for missing unit results while they keep arriving; once none has arrived for
# this long past a unit's time limit, the missing ones are recorded as lost (error results).
STALL_GRACE_S, REDUCE_POLL_S = 60.0, 2.0


def chunk_time_limits(units: list[Unit]) -> tuple[float, float]:
    """Celery's soft and hard limits for a chunk: backstops behind the per-unit deadline."""
    soft = sum(u.time_limit_s for u in units) + 30
    return soft, soft + 30


@worker_process_init.connect
def _on_worker_process_init(**_: Any) -> None:
    watch_for_shutdown()


@worker_process_shutdown.connect
def _on_worker_process_shutdown(pid: int | None = None, **_: Any) -> None:
    if pid is not None and os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics.mark_process_dead(pid)  # its gauges leave the aggregate; counters stay


@app.task(name="arena.run_chunk", acks_late=True, reject_on_worker_lost=True)
def run_chunk(batch_id: str, chunk_id: str, units: list[dict[str, Any]]) -> int:
    """Run the chunk's units that have no stored result yet; each result is stored as it lands."""
    settings = ArenaSettings()
    db = store(settings)
    if db.status(batch_id) == "cancelled":
        return 0
    deliveries = db.count_delivery(batch_id, chunk_id)
    parsed = [Unit.model_validate(u) for u in units]
    done = db.stored_unit_ids(batch_id, [u.id for u in parsed])
    workload = get_workload(parsed[0].workload) if parsed else None
    for unit in parsed:
        if unit.id in done or workload is None:
            continue
        if db.status(batch_id) == "cancelled":
            break
        if deliveries > settings.max_deliveries:
            # The worker died every time it ran this chunk: give up on it, not on the batch.
            result = error_result(unit, f"worker lost {deliveries - 1} times running this unit")
            log = ""
        else:
            run = execute_unit(workload, unit)
            result, log = run.result, run.log
        db.save_unit(batch_id, result, log)
        metrics.UNITS.labels(unit.workload, unit.queue, result.status).inc()
        metrics.UNIT_SECONDS.labels(unit.workload).observe(result.duration_s)
    return len(parsed)


@app.task(name="arena.reduce_batch", bind=True, acks_late=True, max_retries=None)
def reduce_batch(self: Task, batch_id: str, seen: int = -1, stalled_since: float = 0.0) -> str:
    """Chord callback: scores from every stored unit result, leaderboard update, done mark."""
    db = store()
    info = db.batch(batch_id)
    if info is None or info.status in ("done", "cancelled"):
        return info.status if info else "unknown"
    batch = validate_batch(info.spec, identity=info.identity)
    workload = get_workload(batch.spec.workload)
    units = workload.expand(batch)
    results = db.unit_results(batch_id)
    missing = [u for u in units if u.id not in results]
    if missing:
        # Early (a duplicate delivery, or a chunk that failed outright): wait while results
        # still arrive, and give up on the rest once they stop for longer than a unit may take.
        now = time.time()
        if len(results) != seen:
            seen, stalled_since = len(results), now
        if now - stalled_since < batch.spec.protocol.unit_time_limit_s + STALL_GRACE_S:
            raise self.retry(
                kwargs={"batch_id": batch_id, "seen": seen, "stalled_since": stalled_since},
                countdown=REDUCE_POLL_S,
            )
    try:
        for unit in missing:  # lost for good: an error result, never a stuck batch
            results[unit.id] = error_result(unit, "unit lost: no result was stored")
            db.save_unit(batch_id, results[unit.id])
        ordered = [results[u.id] for u in units]
        reduction = workload.reduce(batch, ordered)
        provenance, per_agent = finished_provenance(info.provenance, info.created_at, ordered)
        db.finish_batch(batch_id, reduction, info.leaderboard, provenance, per_agent)
    except Exception as exc:
        log.exception("reducing batch %s failed", batch_id)
        db.set_status(batch_id, "failed", f"reducer: {type(exc).__name__}: {exc}")
        metrics.BATCHES.labels(info.workload, "failed").inc()
        return "failed"
    metrics.BATCHES.labels(info.workload, "done").inc()
    metrics.BATCH_SECONDS.labels(info.workload).observe(time.time() - info.created_at)
    return "done"


@app.task(name="arena.chord_error")
def chord_error(task_id: str | None = None, *, batch_id: str) -> None:
    """A chunk task failed outright (e.g. Celery's hard time limit): reduce what gets stored."""
    log.warning("batch %s: chunk task %s failed; reducing with error results", batch_id, task_id)
    reduce_batch.delay(batch_id)
