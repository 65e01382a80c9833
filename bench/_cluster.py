"""A throwaway embedded cluster for benchmark scripts: Redis, a Store, real worker processes."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from rich.console import Console

from arena.embedded import embedded_redis, start_workers, stop
from tasks.settings import ArenaSettings
from tasks.store import Store


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
