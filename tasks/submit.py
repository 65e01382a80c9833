"""Submitting a batch: validate, resume what is stored, fan out the rest in chunk messages."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import redis
from celery import Signature
from kombu.exceptions import BatchPublishError
from pydantic import BaseModel

from tasks.app import app
from tasks.fair_share import Share, priority_of
from tasks.provenance import provenance_of
from tasks.settings import current_settings
from tasks.spec import Priority
from tasks.store import Store
from tasks.units import chunk_time_limits, chunked, reduce_batch, released_signatures
from tasks.validation import InputError
from tasks.workloads import get_workload
from tasks.workloads.base import Unit, ValidatedBatch
from tasks.workloads.llm_agents import for_replay

__all__ = ["Submission", "cancel", "check_leaderboards", "chunked", "submit"]


class Submission(BaseModel):
    batch_id: str
    leaderboard: str  # the boards the batch writes, comma-separated
    total: int
    reused: int  # unit results already stored (resume)
    enqueued: int  # units sent to workers
    state: Literal["enqueued", "already-done", "already-running", "reducing"]


def check_leaderboards(store: Store, batch: ValidatedBatch, claim: bool = False) -> dict[str, str]:
    """The batch's boards (name -> protocol fingerprint); refused when one holds another
    protocol. With `claim`, an empty board is claimed for this protocol at once (atomically), so
    two specs submitted back to back cannot both pass the check."""
    workload = get_workload(batch.spec.workload)
    boards = workload.boards(batch)
    for name, fingerprint in boards.items():
        if claim:
            existing: str | None = store.claim_leaderboard(name, fingerprint)
        else:
            existing = store.leaderboard_protocol(name)
        if existing is not None and existing != fingerprint:
            raise InputError(
                f"leaderboard: {name!r} holds results of a different protocol (items, protocol "
                f"or params differ); name another leaderboard{workload.protocol_hint}"
            )
    return boards


def submit(
    store: Store,
    batch: ValidatedBatch,
    fresh: bool = False,
    resume_running: bool = False,
    visibility_timeout_s: float | None = None,
    run_id: str | None = None,
    replay_cache: bool = False,
    *,
    team: str | None = None,
    team_weight: float = 1.0,
    default_priority: Priority = "scheduled",
) -> Submission:
    """Enqueue the units of `batch` that have no stored result (all of them with `fresh`).
    `replay_cache`: every unit again (it implies `fresh`), its llm agents answered from the
    replay cache, never their endpoints. The batch shares its pool (tasks/fair_share.py) as
    `team` (None: the operator) with `team_weight`, in the spec's class or `default_priority`.
    A batch still running is left alone unless `resume_running` (the embedded cluster, whose
    previous run was interrupted, knows nothing else is working on it).
    """
    workload = get_workload(batch.spec.workload)
    boards = check_leaderboards(store, batch)
    units = workload.expand(batch)
    if replay_cache:
        units, fresh = for_replay(units), True
    batch_id = batch.batch_id
    _check_chunk_limits(units, workload.chunk_size_for(units), visibility_timeout_s)
    share = _share(batch, len(units), team, team_weight, default_priority)
    info = store.batch(batch_id)
    running = info is not None and info.status == "running" and not resume_running
    if fresh and running:
        raise InputError(
            f"--fresh: batch {batch_id} is running; cancel it first (arena cancel {batch_id}) "
            "or wait for it"
        )
    check_leaderboards(store, batch, claim=True)  # every refusal above comes first
    if run_id:
        store.label_run(run_id, batch_id)
    if resume_running and info is not None and info.status == "running":
        store.forget_chunks(batch_id)  # the interrupted run's workers are gone
        store.leave_pools(batch_id)  # and its chunks are all given out again below
    said = partial(Submission, batch_id=batch_id, leaderboard=", ".join(boards), total=len(units))
    if fresh:
        store.forget_results(batch_id)
    elif running and info is not None:
        return said(reused=info.completed, enqueued=0, state="already-running")
    stored = store.stored_unit_ids(batch_id)
    missing = [u for u in units if u.id not in stored]
    reused = len(units) - len(missing)
    if info is not None and info.status == "done" and not missing and not fresh:
        store.republish(batch_id)
        return said(reused=reused, enqueued=0, state="already-done")
    made = (batch.normalised(), workload.name, boards, len(units), batch.identity)
    store.start_batch(*made, provenance_of(batch, run_id), share)
    if not missing:
        reduce_batch.delay(batch_id)
        return said(reused=reused, enqueued=0, state="reducing")
    store.reset_attempts(batch_id, [u.id for u in missing])
    _fan_out(store, batch_id, missing, workload.chunk_size_for(units), share)
    return said(reused=reused, enqueued=len(missing), state="enqueued")


def _check_chunk_limits(
    units: list[Unit], chunk_size: int, visibility_timeout_s: float | None
) -> None:
    """Refused: a chunk that may run as long as the broker's visibility timeout (the broker
    would hand it to a second worker while the first still runs it)."""
    longest = max(chunk_time_limits(c)[1] for c in chunked(units, chunk_size))
    if visibility_timeout_s is not None and longest >= visibility_timeout_s:
        raise InputError(
            f"protocol.unit_time_limit_s: a chunk may run {longest:g}s, not below the broker's "
            f"visibility timeout ({visibility_timeout_s:g}s, ARENA_VISIBILITY_TIMEOUT_S)"
        )


def _share(
    batch: ValidatedBatch, units: int, team: str | None, team_weight: float, default: Priority
) -> Share:
    """How the batch shares its pool; an interactive batch too big for its class is refused
    here, before anything is stored (tasks/fair_share.py)."""
    limit = current_settings().interactive_max_units
    priority = priority_of(batch.spec.priority, default, units, limit)
    return Share(priority, team, team_weight, batch.spec.weight or 1.0)


def _fan_out(store: Store, batch_id: str, units: list[Unit], chunk_size: int, share: Share) -> None:
    """The batch's chunks wait in its pools' waiting lists; the pools' free slots get theirs
    at once, each chunk that ends releases the next (tasks/fair_share.py). No chord: the chunk
    that stores a batch's last result starts the reducer, a chunk that fails outright starts
    it through its error callback, and the watchdog starts it if both are lost. A chord also
    stored a Celery result and counted every chunk in Redis: a third of a one-unit task's cost
    (docs/performance.md). The plan (chunk id -> unit ids) lets the watchdog find units whose
    message was lost."""
    by_queue: dict[str, list[tuple[str, list[dict[str, Any]]]]] = {}
    plan = {}
    for index, chunk in enumerate(chunked(units, chunk_size)):
        chunk_id = f"chunk-{index}-{chunk[0].id}"
        plan[chunk_id] = [u.id for u in chunk]
        dumped = [u.model_dump(mode="json") for u in chunk]
        by_queue.setdefault(chunk[0].queue, []).append((chunk_id, dumped))
    store.record_plan(batch_id, plan, replace=True)
    store.leave_pools(batch_id)  # what an earlier run of the batch left waiting
    headroom = current_settings().queue_headroom
    for queue, chunks in by_queue.items():
        _publish(released_signatures(store.join_pool(queue, batch_id, share, chunks, headroom)))


PUBLISH_BATCH = 100  # messages per Redis round trip; workers start on the first hundred


def _publish(messages: list[Signature]) -> None:
    """Publish in pipelined batches (one LPUSH round trip each was most of a 10,000-unit
    submit). A batch whose delivery is uncertain (Redis went away mid-flush) is sent again one
    message at a time, with kombu's retries: a chunk delivered twice runs once, the second
    delivery finds its results stored."""
    published = 0
    try:
        with app.producer_or_acquire() as producer, producer.batch(max_size=PUBLISH_BATCH):
            for message in messages:
                message.apply_async(producer=producer)
                published += 1
    except (BatchPublishError, redis.RedisError, OSError):
        with app.producer_or_acquire() as producer:
            for message in messages[max(0, published - PUBLISH_BATCH) :]:
                message.apply_async(producer=producer)


def cancel(store: Store, batch_id: str) -> str:
    status = store.status(batch_id)
    if status is None:
        raise InputError(f"batch: no batch {batch_id!r}")
    if status == "running":
        store.set_status(batch_id, "cancelled", "cancelled by user")
        store.leave_pools(batch_id)  # its waiting chunks are never given out
        return "cancelled"
    return status
