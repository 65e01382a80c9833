"""What bench/fair_share.py submits and how it watches: bandit and Mario batches of a class,
submitted through the scheduler (tasks/fair_share.py) or published all at once the old way
(plain FIFO), and the times at which batches end and their units ended."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tasks.store import Store
    from tasks.workloads.base import ValidatedBatch

POLL_S = 0.02
PULLS = 5000  # a greedy episode of 5,000 pulls: ~15 ms, a chunk of 10 units ~0.15 s
MARIO_AGENT = "jump-right"


@dataclass(frozen=True)
class Work:
    """What one batch of the bench plays: `units` bandit episodes or Mario episodes."""

    workload: str  # "bandit" or "mario"
    max_steps: int = 100  # Mario only: an episode's length bound

    def batch(self, units: int, seed: int, priority: str, label: str) -> ValidatedBatch:
        from tasks.workloads import validate_batch

        spec: dict[str, Any] = {
            "workload": self.workload,
            "leaderboard": f"fair-{label}-{seed}",  # a board per batch: any protocol goes
            "protocol": {"episodes": units, "seed": seed},
            "priority": priority,
        }
        if self.workload == "mario":
            spec |= {"agents": [MARIO_AGENT], "items": ["1-1"]}
            spec["params"] = {"sticky_p": 0.25, "max_steps": self.max_steps}
        else:
            spec |= {"agents": ["greedy"], "items": [{"name": "coin", "arms": [0.4, 0.6]}]}
            spec["params"] = {"pulls": PULLS}
        return validate_batch(spec)


def submit_shared(
    store: Store, batch: ValidatedBatch, team: str | None = None, team_weight: float = 1.0
) -> str:
    """Through the scheduler, as `arena submit` does now."""
    from tasks.submit import submit

    sub = submit(store, batch, fresh=True, team=team, team_weight=team_weight)
    assert sub.state == "enqueued", sub
    return sub.batch_id


def submit_fifo(store: Store, batch: ValidatedBatch) -> str:
    """Plain FIFO, the old `_fan_out` (before issue 32): the batch recorded, then every chunk
    message published at once behind whatever is queued; no waiting list, no pool entry."""
    from tasks.provenance import provenance_of
    from tasks.submit import _publish, check_leaderboards
    from tasks.units import chunk_signature, chunked
    from tasks.workloads import get_workload

    workload = get_workload(batch.spec.workload)
    boards = check_leaderboards(store, batch, claim=True)
    units = workload.expand(batch)
    store.forget_results(batch.batch_id)
    store.start_batch(
        batch.normalised(),
        workload.name,
        boards,
        len(units),
        batch.identity,
        provenance_of(batch, None),
    )
    store.reset_attempts(batch.batch_id, [u.id for u in units])
    messages, plan = [], {}
    for index, chunk in enumerate(chunked(units, workload.chunk_size_for(units))):
        chunk_id = f"chunk-{index}-{chunk[0].id}"
        plan[chunk_id] = [u.id for u in chunk]
        messages.append(chunk_signature(batch.batch_id, chunk_id, chunk))
    store.record_plan(batch.batch_id, plan, replace=True)
    _publish(messages)
    return batch.batch_id


def wait_done(
    store: Store,
    batch_ids: Sequence[str],
    pool: subprocess.Popen[bytes],
    timeout_s: float = 900,
) -> dict[str, float]:
    """perf_counter() when each batch was seen `done` (polled every POLL_S); raises when one
    ends otherwise, or the pool dies, or the timeout passes."""
    from tasks.store import FINISHED

    started, ended = time.perf_counter(), dict[str, float]()
    while len(ended) < len(batch_ids):
        for batch_id in batch_ids:
            if batch_id in ended:
                continue
            status = store.progress(batch_id)[1]
            if status == "done":
                ended[batch_id] = time.perf_counter()
            elif status in FINISHED:
                raise RuntimeError(f"batch {batch_id} ended {status}: {store.batch(batch_id)}")
        if pool.poll() is not None or time.perf_counter() - started > timeout_s:
            raise RuntimeError(f"stuck: {len(ended)} of {len(batch_ids)} batches done")
        time.sleep(POLL_S)
    return ended


def wait_units(store: Store, batch_id: str, units: int, timeout_s: float = 300) -> None:
    """Until `units` of the batch's results are stored (it is running on the pool by then)."""
    started = time.perf_counter()
    while store.progress(batch_id)[0] < units:
        if time.perf_counter() - started > timeout_s:
            raise RuntimeError(f"batch {batch_id}: {units} units not done in {timeout_s:g}s")
        time.sleep(POLL_S)


def unit_ends(store: Store, batch_id: str) -> list[float]:
    """When each of the batch's units ended (unix time, from its result), sorted."""
    from arena.service.batch_view import seconds

    ends = (seconds(r.finished_at) for r in store.unit_results(batch_id).values())
    return sorted(end for end in ends if end is not None)


def unit_seconds(store: Store, batch_id: str) -> float:
    """The mean duration of the batch's units, as their results record it."""
    durations = [r.duration_s for r in store.unit_results(batch_id).values()]
    return sum(durations) / len(durations)


def busy_seconds(store: Store, batch_id: str) -> float:
    """The seconds the batch's units ran, all together, as their results record them."""
    return sum(r.duration_s for r in store.unit_results(batch_id).values())


def units_in(ends: Sequence[float], start: float, stop: float) -> int:
    return sum(1 for end in ends if start <= end <= stop)
