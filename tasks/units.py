"""Celery tasks: run a chunk of units, reduce a batch."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from contextlib import suppress
from functools import partial
from typing import Any

import redis
from celery import Signature, Task
from celery.signals import (
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)
from celery.utils.log import get_task_logger
from kombu.exceptions import OperationalError
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from tasks import broker, liveness, metrics, reaper, watchdog
from tasks.app import app, store
from tasks.execute import (
    EXIT_OUT_OF_MEMORY,
    UnitRun,
    error_result,
    execute_unit,
    unit_memory,
    unit_memory_mb,
    watch_for_shutdown,
)
from tasks.execute_chunk import Record, run_in_groups
from tasks.provenance import finished_provenance
from tasks.settings import ArenaSettings, current_settings
from tasks.store import BatchInfo, Store
from tasks.store_sharing import Chunk
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import Unit, UnitResult
from tasks.workloads.llm_agents import ClusterRedis, cluster_redis

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


@app.task(name="arena.run_chunk", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_chunk(batch_id: str, chunk_id: str, units: list[dict[str, Any]]) -> int:
    """Run the chunk's units that have no stored result yet, their results stored in groups
    (tasks/execute_chunk.py; retried through a Redis outage: the message is acknowledged only
    after). The last chunk of a batch to finish starts the reducer.

    Redis round trips: one to register the chunk (reading the batch's status and which units
    are stored, counting the first group's attempts), one per group of units (their results
    and the next group's attempts, or with the last, forgetting the chunk): a chunk of tiny
    units pays two (docs/performance.md)."""
    settings = current_settings()
    db = store(settings)
    parsed = [Unit.model_validate(u) for u in units]
    if not parsed:
        return 0
    refusal = _refusal(parsed, settings)
    run = partial(_run_or_refuse, refusal=refusal, max_attempts=settings.max_deliveries)
    # An llm agent's limits, cache and spend are the cluster's (tasks/workloads/llm_agents.py).
    shared = cluster_redis.set(ClusterRedis(db.r, db.p, partial(_cancel_running, db)))
    started = time.monotonic()
    try:
        ended = run_in_groups(db, batch_id, chunk_id, parsed, settings.heartbeat_s, run, _count)
    finally:
        cluster_redis.reset(shared)
    took, ran = time.monotonic() - started, 0 if ended.skipped else ended.todo
    # Its place in the pool goes to the next chunk once this process is on its own next one.
    liveness.later(partial(end_chunk, db, settings, batch_id, chunk_id, parsed[0].queue, took, ran))
    if ended.skipped:
        return 0
    if ended.all_stored or (not ended.todo and db.all_stored(batch_id)):
        reduce_batch.delay(batch_id)
    return len(parsed)


def _cancel_running(db: Store, batch_id: str, reason: str) -> None:
    """An llm agent spent the batch's budget: no unit starts after this (chunks skip)."""
    if db.status(batch_id) == "running":
        db.set_status(batch_id, "cancelled", reason)


def _count(unit: Unit, result: UnitResult) -> None:
    metrics.UNITS.labels(unit.workload, unit.queue, result.status).inc()
    metrics.UNIT_SECONDS.labels(unit.workload).observe(result.duration_s)
    frames = result.result.get("emulator_frames")
    if isinstance(frames, int) and frames > 0:
        metrics.EMULATOR_FRAMES.labels(unit.workload).inc(frames)
    usage = result.result.get("llm")
    llm = unit.payload.get("agent", {}).get("llm")
    if isinstance(usage, dict) and isinstance(llm, dict) and not unit.payload.get("replay_cache"):
        model = str(llm.get("model", ""))
        metrics.LLM_REQUESTS.labels(model).inc(usage.get("requests", 0))
        metrics.LLM_TOKENS.labels(model, "prompt").inc(usage.get("prompt_tokens", 0))
        metrics.LLM_TOKENS.labels(model, "completion").inc(usage.get("completion_tokens", 0))
        metrics.LLM_COST.labels(model).inc(usage.get("cost_usd", 0.0))


def _run_or_refuse(
    unit: Unit, attempts: int, record: Record, refusal: str | None, max_attempts: int
) -> UnitRun:
    if refusal:
        return UnitRun(error_result(unit, refusal, kind="infrastructure"), "")
    if attempts > max_attempts:
        # Its worker died every time it ran this unit: give up on the unit, not on the batch.
        reason = (
            f"worker lost {attempts - 1} times running this unit (an agent that crashes or "
            "exhausts its worker does this too: see arena logs)"
        )
        return UnitRun(error_result(unit, reason, kind="infrastructure"), "")
    workload = get_workload(unit.workload)
    with unit_memory(unit_memory_mb(workload, unit)):
        run = execute_unit(workload, unit, record)
    if run.out_of_memory:  # never reused: stored, replaced, the rest run on redelivery
        record(run)
        os._exit(EXIT_OUT_OF_MEMORY)
    return run


def _refusal(units: list[Unit], settings: ArenaSettings) -> str | None:
    """Why this worker must not run the chunk at all (infrastructure, never the agent's)."""
    hard = chunk_time_limits(units)[1] if units else 0.0
    if hard >= settings.visibility_timeout_s:
        return (
            f"this worker's visibility timeout ({settings.visibility_timeout_s:g}s, "
            f"ARENA_VISIBILITY_TIMEOUT_S) is below the chunk's time limit ({hard:g}s): the broker "
            "would hand the running chunk to another worker"
        )
    return None


@app.task(
    name="arena.reduce_batch", bind=True, acks_late=True, max_retries=None, ignore_result=True
)
def reduce_batch(self: Task, batch_id: str, seen: int = -1, stalled_since: float = 0.0) -> str:
    """Scores from every stored unit result, leaderboard update, done mark — or `incomplete`
    when infrastructure kept units from running. One reducer at a time per batch."""
    db, settings = store(), current_settings()
    if db.status(batch_id) != "running":
        return db.status(batch_id) or "unknown"
    # The claim lapses lost_worker_s after its holder dies (the watchdog then starts another).
    if not db.claim_reducer(batch_id, settings.lost_worker_s):
        return "busy"  # another reducer holds the batch
    renew = partial(db.extend_reducer, batch_id, settings.lost_worker_s)
    try:
        # Read under the claim: a reducer that finished just before we claimed is seen here.
        info = db.batch(batch_id)
        if info is None or info.status != "running":
            return info.status if info else "unknown"
        with liveness.keep_alive(renew, settings.heartbeat_s):
            return _reduce(self, db, info, seen, stalled_since)
    finally:
        db.release_reducer(batch_id)


def _reduce(self: Task, db: Store, info: BatchInfo, seen: int, stalled_since: float) -> str:
    batch = validate_batch(info.spec, identity=info.identity)
    workload = get_workload(batch.spec.workload)
    units = workload.expand(batch)
    results = db.unit_results(info.id)
    missing = [u for u in units if u.id not in results]
    if missing:
        # Early (a duplicate delivery, or a chunk that failed outright): wait while results
        # still arrive, and give up on the rest once they stop for longer than a unit may take.
        # Redis's clock: the retry that judges `stalled_since` may run on another machine.
        now = db.redis_time()
        if len(results) != seen:
            seen, stalled_since = len(results), now
        if now - stalled_since < batch.spec.protocol.unit_time_limit_s + STALL_GRACE_S:
            raise self.retry(
                kwargs={"batch_id": info.id, "seen": seen, "stalled_since": stalled_since},
                countdown=REDUCE_POLL_S,
            )
    for unit in missing:  # lost for good: an infrastructure error, never a stuck batch
        results[unit.id] = error_result(
            unit, "unit lost: no result was stored", kind="infrastructure"
        )
        db.save_unit(info.id, results[unit.id])
    ordered = [results[u.id] for u in units]
    infra = [r for r in ordered if r.error_kind == "infrastructure"]
    if infra:
        return _incomplete(db, info, infra)
    try:
        reduction = workload.reduce(batch, ordered)
        provenance, per_agent = finished_provenance(info.provenance, info.created_at, ordered)
        db.finish_batch(info.id, reduction, info.boards, provenance, per_agent)
    except Exception as exc:
        log.exception("reducing batch %s failed", info.id)
        db.set_status(info.id, "failed", f"reducer: {type(exc).__name__}: {exc}")
        metrics.BATCHES.labels(info.workload, "failed").inc()
        return "failed"
    metrics.BATCHES.labels(info.workload, "done").inc()
    metrics.BATCH_SECONDS.labels(info.workload).observe(time.time() - info.created_at)
    return "done"


def _incomplete(db: Store, info: BatchInfo, infra: list[UnitResult]) -> str:
    """Never `done` with wrong numbers: no score is written; a resubmission retries these."""
    first = infra[0].reason or "infrastructure error"
    db.set_status(
        info.id,
        "incomplete",
        f"{len(infra)} units could not be run (not the agents' doing; submit the spec again to "
        f"retry them): {first}",
    )
    metrics.BATCHES.labels(info.workload, "incomplete").inc()
    return "incomplete"


@app.task(name="arena.chunk_failed", ignore_result=True)
def chunk_failed(
    task_id: str | None = None,
    *,
    batch_id: str,
    chunk_id: str | None = None,
    queue: str | None = None,
) -> None:
    """A chunk task failed outright (e.g. Celery's hard time limit): reduce what gets stored
    (the reducer waits for the other chunks' results, then records the missing as lost). Its
    place in the pool goes to the next chunk (its seconds unknown: no pass is set right)."""
    log.warning("batch %s: chunk task %s failed; reducing with error results", batch_id, task_id)
    if chunk_id is not None and queue is not None:
        settings = current_settings()
        end_chunk(store(settings), settings, batch_id, chunk_id, queue, -1.0, 0)
    reduce_batch.delay(batch_id)


def end_chunk(
    db: Store,
    settings: ArenaSettings,
    batch_id: str,
    chunk_id: str,
    queue: str,
    took_s: float,
    ran: int,
) -> None:
    """The chunk leaves its pool's window and releases the next chunks (tasks/fair_share.py);
    the units it ran count for its batch's team (the same round trip)."""
    _, released = db.end_chunk(queue, batch_id, chunk_id, took_s, ran, settings.queue_headroom)
    publish_released(released, settings.redis_retry_s)


def released_signatures(released: list[Chunk]) -> list[Signature]:
    """The messages of chunks a pool released (each unit dict names its batch)."""
    signatures = []
    for chunk_id, dumped in released:
        units = [Unit.model_validate(u) for u in dumped]
        signatures.append(chunk_signature(units[0].batch_id, chunk_id, units))
    return signatures


def publish_released(released: list[Chunk], retry_s: float = 0.0) -> None:
    """Publish what a pool released. Through a Redis outage or a Redis refusing writes this
    keeps trying for `retry_s` (ARENA_REDIS_RETRY_S), as unit results do: the chunks are
    already out of their waiting list, and dropped here they would wait for the watchdog's
    lost-unit scan. A message published twice runs once (its results are stored)."""
    if not released:
        return
    signatures = released_signatures(released)
    retrying = Retrying(
        retry=retry_if_exception_type((redis.RedisError, OSError, OperationalError)),
        wait=wait_exponential(multiplier=0.2, max=5.0),
        stop=stop_after_delay(retry_s),
        reraise=True,
    )
    for attempt in retrying:
        with attempt, app.producer_or_acquire() as producer:
            while signatures:
                signatures[0].apply_async(producer=producer)
                signatures.pop(0)


def chunk_signature(batch_id: str, chunk_id: str, units: list[Unit]) -> Signature:
    """A chunk's message. No Celery result is stored for it (the unit results are Arena's
    own), and its repr in the message is given: Celery's saferepr of the units' payload was a
    fifth of the submitting process's time (docs/performance.md)."""
    soft, hard = chunk_time_limits(units)
    return run_chunk.signature(
        (batch_id, chunk_id, [u.model_dump() for u in units]),
        queue=units[0].queue,
        soft_time_limit=soft,
        time_limit=hard,
        link_error=chunk_failed.s(batch_id=batch_id, chunk_id=chunk_id, queue=units[0].queue),
        argsrepr=f"({batch_id!r}, {chunk_id!r}, <{len(units)} units>)",
        kwargsrepr="{}",
    )


def chunked(units: list[Unit], size: int) -> list[list[Unit]]:
    """The units in chunks of at most `size`, each of one queue (a chunk's message goes to its
    first unit's queue): every chunk message Arena sends is cut here."""
    by_queue: dict[str, list[Unit]] = defaultdict(list)
    for unit in units:
        by_queue[unit.queue].append(unit)
    return [q[i : i + size] for q in by_queue.values() for i in range(0, len(q), size)]


def requeue_units(batch_id: str, unit_ids: list[str]) -> None:
    """Units whose message was lost (a worker killed between taking it from the queue and
    recording it as unacknowledged: kombu's Redis transport has that window): new messages."""
    db = store()
    info = db.batch(batch_id)
    if info is None:
        return
    batch = validate_batch(info.spec, identity=info.identity)
    workload = get_workload(batch.spec.workload)
    wanted = set(unit_ids)
    units = [u for u in workload.expand(batch) if u.id in wanted]
    log.warning(
        "batch %s: %d units found in no queue and on no worker: requeued", batch_id, len(units)
    )
    stamp = int(time.time())
    plan, by_queue = {}, defaultdict(list)
    for index, chunk in enumerate(chunked(units, workload.chunk_size_for(units))):
        chunk_id = f"requeued-{stamp}-{index}-{chunk[0].id}"
        plan[chunk_id] = [u.id for u in chunk]
        by_queue[chunk[0].queue].append((chunk_id, [u.model_dump(mode="json") for u in chunk]))
    db.record_plan(batch_id, plan)
    # At the front of the batch's waiting list: the next chunks its pool releases. Nothing
    # waits on their results: no subscription (this runs in a worker's main process, whose
    # result subscriptions do not survive a Redis restart).
    share, headroom = db.share_of(batch_id), current_settings().queue_headroom
    for queue, chunks in by_queue.items():
        if share is not None:
            publish_released(db.join_pool(queue, batch_id, share, chunks, headroom, front=True))


def start_reducer(batch_id: str) -> None:
    reduce_batch.apply_async((batch_id,), ignore_result=True)


def restore_delivery(tag: str) -> None:
    """Put an orphaned chunk message (its worker died) back at the front of its queue, the way
    kombu does after the visibility timeout."""
    log.warning("a chunk's worker was lost: its message %s goes back to the queue", tag)
    with app.connection_for_write() as connection:
        broker.restore(connection, tag)


@worker_ready.connect
def _start_watchdog(sender: Any = None, **_: Any) -> None:
    reaper.keep_reaping_if_engine()
    settings = current_settings()
    if sender is not None:  # the consumer: this node's name, processes and queues
        queues = list(sender.app.amqp.queues.consume_from)
        _node.update(name=sender.hostname, processes=sender.controller.concurrency, queues=queues)
    register_slots()
    watchdog.start_watchdog(
        store(settings),
        settings.lost_worker_s,
        watchdog.Actions(restore_delivery, requeue_units, start_reducer, register_slots),
    )


_node: dict[str, Any] = {}  # this worker node as its pools know it (set when it is ready)


def register_slots(leaving: bool = False) -> None:
    """This node's processes count in the capacity of each pool it consumes, until it leaves
    or its registration lapses (2 x ARENA_LOST_WORKER_S on Redis's clock, renewed by every
    watchdog sweep); each pool is topped up (a release whose publisher died, more capacity)."""
    if not _node:
        return
    settings = current_settings()
    processes = 0 if leaving else int(_node["processes"])
    for queue in _node["queues"]:
        released = store(settings).register_slots(
            queue, _node["name"], processes, 2 * settings.lost_worker_s, settings.queue_headroom
        )
        publish_released(released)


@worker_shutdown.connect
def _leave_pools(**_: Any) -> None:
    with suppress(Exception):  # Redis gone: the registration lapses on its own
        register_slots(leaving=True)
