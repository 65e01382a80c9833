"""A throwaway embedded cluster for benchmark scripts: Redis, a Store, real worker processes."""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import redis
from rich.console import Console

from arena.embedded import embedded_redis, start_workers, stop
from tasks.settings import ArenaSettings
from tasks.store import FINISHED, Store
from tasks.workloads.base import ValidatedBatch

POLL_S = 0.02


@contextmanager
def bench_cluster(
    workers: int, console: Console
) -> Iterator[tuple[Store, subprocess.Popen[bytes]]]:
    """Yields (store, worker pool); on failure prints the worker log's tail before re-raising."""
    from tasks.app import configure  # Celery only when a cluster is wanted

    with (
        tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp,
        embedded_redis(Path(tmp)) as url,
    ):
        settings = ArenaSettings(redis_url=url)
        configure(settings)
        store = Store(redis.Redis.from_url(url, decode_responses=True), settings.key_prefix)
        pool = start_workers(url, workers, Path(tmp))
        try:
            yield store, pool
        except Exception:
            log = Path(tmp) / "worker.log"  # gone with the temporary folder: show its tail
            console.print("[red]failed; the worker log ends:[/]")
            console.print(log.read_text()[-3000:] if log.exists() else "(none)", markup=False)
            raise
        finally:
            stop(pool, timeout=15)


def timed_batch(
    store: Store, batch: ValidatedBatch, pool: subprocess.Popen[bytes], timeout_s: float = 600
) -> tuple[float, str]:
    """(wall s from submit() until the batch is `done`, its id): a fresh batch every call.
    Raises when it ends otherwise, or is stuck (the pool died, or the timeout passed)."""
    from tasks.submit import submit

    started = time.perf_counter()
    sub = submit(store, batch, fresh=True)
    assert sub.state == "enqueued", sub
    while True:
        done, status = store.progress(sub.batch_id)
        if status in FINISHED:
            break
        if pool.poll() is not None or time.perf_counter() - started > timeout_s:
            raise RuntimeError(f"batch {sub.batch_id} stuck at {done}/{sub.total} ({status})")
        time.sleep(POLL_S)
    wall = time.perf_counter() - started
    if status != "done":
        raise RuntimeError(f"batch {sub.batch_id} ended {status}: {store.batch(sub.batch_id)}")
    return wall, sub.batch_id


Measured = TypeVar("Measured")
Timed = Callable[[Store, ValidatedBatch, subprocess.Popen[bytes]], Measured]


def warm_then_repeat(
    workers: int,
    console: Console,
    warm_up: ValidatedBatch,
    batch: ValidatedBatch,
    repeat: int,
    timed: Timed[Measured],
) -> list[Measured]:
    """On a fresh cluster of `workers` processes: `warm_up` once, not kept (every worker child
    imports the workload's code), then `timed(store, batch, pool)` `repeat` times."""
    with bench_cluster(workers, console) as (store, pool):
        timed(store, warm_up, pool)
        return [timed(store, batch, pool) for _ in range(repeat)]
