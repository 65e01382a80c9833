"""A throwaway embedded cluster for benchmark scripts: Redis, a Store, real worker processes;
and a bare Celery app (no Arena code) that runs beside it on the same Redis as a ceiling.

Arena's modules are imported inside the functions that need them: a bare Celery worker imports
this module (`celery -A _cluster:bare`) and must load none of Arena's code."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from celery import Celery, group

if TYPE_CHECKING:
    import redis
    from rich.console import Console

    from tasks.store import Store
    from tasks.workloads.base import ValidatedBatch

POLL_S = 0.02


@contextmanager
def bench_cluster(
    workers: int, console: Console
) -> Iterator[tuple[Store, subprocess.Popen[bytes]]]:
    """Yields (store, worker pool); on failure prints the worker log's tail before re-raising."""
    with bench_redis() as (url, tmp):
        store, pool = arena_workers(url, workers, tmp)
        try:
            yield store, pool
        except Exception:
            show_log_tail(console, tmp / "worker.log")
            raise
        finally:
            stop_pool(pool)


@contextmanager
def bench_redis() -> Iterator[tuple[str, Path]]:
    """An embedded Redis as `arena run` starts it (unix socket, append-only file fsynced on
    every write) in a temporary folder: yields (its unix:// URL, the folder)."""
    from arena.embedded import embedded_redis

    with (
        tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp,
        embedded_redis(Path(tmp)) as url,
    ):
        yield url, Path(tmp)


def arena_workers(url: str, workers: int, folder: Path) -> tuple[Store, subprocess.Popen[bytes]]:
    """Arena's Celery app pointed at `url`, a Store on it and `workers` worker processes."""
    import redis

    from arena.embedded import start_workers
    from tasks.app import configure  # Celery's Arena app only when a cluster is wanted
    from tasks.settings import ArenaSettings
    from tasks.store import Store

    settings = ArenaSettings(redis_url=url)
    configure(settings)
    store = Store(redis.Redis.from_url(url, decode_responses=True), settings.key_prefix)
    return store, start_workers(url, workers, folder)


def stop_pool(pool: subprocess.Popen[bytes]) -> None:
    from arena.embedded import stop

    stop(pool, timeout=15)


def show_log_tail(console: Console, log: Path) -> None:
    """The worker log is gone with the temporary folder: show its tail."""
    console.print("[red]failed; the worker log ends:[/]")
    console.print(log.read_text()[-3000:] if log.exists() else "(none)", markup=False)


def timed_batch(
    store: Store, batch: ValidatedBatch, pool: subprocess.Popen[bytes], timeout_s: float = 600
) -> tuple[float, str]:
    """(wall s from submit() until the batch is `done`, its id): a fresh batch every call.
    Raises when it ends otherwise, or is stuck (the pool died, or the timeout passed)."""
    from tasks.store import FINISHED
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
BarePool = subprocess.Popen[bytes]
Timed = Callable[["Store", "ValidatedBatch", subprocess.Popen[bytes]], Measured]


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


# -- the ceiling: a bare Celery app, no Arena code ----------------------------------------------
# Its workers find their broker here (a kombu URL: redis+socket://PATH?virtual_host=1, a
# database of its own on Arena's Redis, so Arena's watchdog never sees its messages).
BARE_URL = "ARENA_BENCH_BARE_URL"
BARE_QUEUE = "bare"
bare = Celery("bare", set_as_current=False)


@bare.task(name="bare.double", acks_late=True, reject_on_worker_lost=True)
def double(x: int) -> int:
    """The trivial unit: all that a bare task costs is Celery's (message, pool, result)."""
    return 2 * x


def configure_bare(url: str, results: bool) -> None:
    """Arena's reliability settings (acks late, one message prefetched, JSON), a queue of its
    own. `results`: the workers store one result per task in Redis (Celery's result backend);
    the submitting process has none, so it subscribes to nothing (it polls the result keys)."""
    bare.conf.update(
        broker_url=url,
        result_backend=url if results else None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=BARE_QUEUE,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": 7200},
        worker_hijack_root_logger=False,
    )


if os.environ.get(BARE_URL):  # in a bare worker process
    configure_bare(os.environ[BARE_URL], results=True)


def bare_url(redis_url: str) -> str:
    """unix://PATH (redis-py) -> kombu's spelling with the bare app's own database."""
    return "redis+socket://" + redis_url.removeprefix("unix://") + "?virtual_host=1"


def start_bare_workers(redis_url: str, workers: int, log: Path) -> subprocess.Popen[bytes]:
    """`workers` prefork processes of the bare app, started as Arena starts its own (same
    flags), in a process group of their own."""
    env = {**os.environ, BARE_URL: bare_url(redis_url)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.getcwd()]))
    argv = [sys.executable, "-m", "celery", "-A", "_cluster:bare", "worker", "--queues"]
    argv += [BARE_QUEUE, "--concurrency", str(workers), "--pool", "prefork"]
    argv += ["--loglevel", "WARNING", "--without-gossip", "--without-mingle"]
    argv += ["--without-heartbeat", "--hostname", f"bare-{os.getpid()}@%h"]
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


@contextmanager
def bare_cluster(store: Store, workers: int) -> Iterator[tuple[redis.Redis, BarePool]]:
    """The bare app's `workers` processes on the Redis `store` talks to (its own database):
    yields (a client on that database, the worker pool), warmed up."""
    import redis

    socket = store.r.connection_pool.connection_kwargs["path"]
    url = f"unix://{socket}"
    configure_bare(bare_url(url), results=False)
    folder = Path(socket).parent
    pool = start_bare_workers(url, workers, folder / "bare-worker.log")
    client = redis.Redis(unix_socket_path=socket, db=1)
    try:
        bare_run(client, 20 * workers, 1, pool)  # waits for the workers to consume
        yield client, pool
    finally:
        stop_pool(pool)
        client.close()


def bare_run(client: redis.Redis, units: int, chunk: int, pool: subprocess.Popen[bytes]) -> float:
    """Wall s from the first message published until every task's result is stored: `units`
    calls of the trivial task, in Celery's own chunks of `chunk` (`Task.chunks`: one
    `celery.starmap` task, and one stored result, per chunk), or one task per unit for 1.
    `client`: redis-py on the bare app's database."""
    args = [(i,) for i in range(units)]
    jobs = double.chunks(args, chunk).group() if chunk > 1 else group(double.s(*a) for a in args)
    started = time.perf_counter()
    result = jobs.apply_async()
    keys = [f"celery-task-meta-{r.id}" for r in result.results]
    # Tasks are taken in publishing order: wait for the last one's result, then for them all.
    while keys:
        if client.exists(keys[-1]):
            with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.exists(key)
                keys = [k for k, there in zip(keys, pipe.execute(), strict=True) if not there]
        if keys and (pool.poll() is not None or time.perf_counter() - started > 600):
            raise RuntimeError(f"bare Celery: {len(keys)} results missing")
        if keys:
            time.sleep(POLL_S)
    return time.perf_counter() - started
