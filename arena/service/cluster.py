"""Where batches run: the cluster's Redis (ARENA_REDIS_URL) or the embedded default, the data
folder's host, attached to (started if none runs) for the length of a command; `run_batch`
submits a batch there and waits for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from arena.embedded.attach import attached, resume_orphan
from arena.service.boards import Board, boards_made
from arena.service.reports import Report, report_from_store, write_logs
from arena.service.waiting import Outage, SaidOnStderr, Watcher, wait
from tasks.redact import redact_raw
from tasks.settings import ArenaSettings, load_settings
from tasks.store import BatchInfo, Store
from tasks.validation import InputError
from tasks.workloads.base import UnitResult, ValidatedBatch

if TYPE_CHECKING:
    from tasks.submit import Submission

# What runs beside a batch on the Redis it runs on (`arena run --serve`: the API and its page).
Beside = Callable[[ArenaSettings], AbstractContextManager[object]]
# Who follows a submitted batch while it runs (the CLI: its progress bar).
Follow = Callable[["Submission"], AbstractContextManager[Watcher]]


def connect(settings: ArenaSettings, watcher: Watcher | None = None) -> Store:
    """The store on settings.redis_url once Redis answers. One that does not is waited for,
    as a connected wait does, up to ARENA_REDIS_RETRY_S (`watcher`, stderr by default, is told
    in one line, and in one when it answers), then ClusterUnreachable; credentials Redis
    refuses are a bad setting (InputError), never waited for."""
    from tasks.app import configure, store  # Celery (0.3 s) only when a command talks to Redis

    configure(settings)
    db = store(settings, retry_s=0)
    where = redact_raw(settings.redis_url or "")
    outage = Outage(settings.redis_retry_s, None, watcher or SaidOnStderr())
    while True:
        try:
            db.ping()
        except (redis.AuthenticationError, redis.exceptions.AuthorizationError) as exc:
            raise InputError(
                f"ARENA_REDIS_URL: Redis at {where} refused its credentials: {exc}"
            ) from None
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            outage.lost(f"cannot reach Redis at {where} ({' '.join(str(exc).split())})")
            continue
        outage.back()
        return db


@contextmanager
def on_embedded(
    settings: ArenaSettings,
    workers: int | None = None,
    run_batches: bool = False,
    start: bool = True,
) -> Iterator[ArenaSettings]:
    """The settings of the data folder's embedded cluster, attached to for the block (started
    with `workers` processes if none runs, unless not `start`); `run_batches`: its worker pool
    now, not at the first queued unit."""
    with attached(
        settings.data_dir, workers or settings.workers, run_batches=run_batches, start=start
    ) as host:
        yield settings.model_copy(update={"redis_url": host.url})


@contextmanager
def open_store(settings: ArenaSettings, start: bool = True) -> Iterator[Store]:
    """The cluster's Redis, or (no ARENA_REDIS_URL) the embedded one, attached to for the block
    (started if none runs, unless not `start`)."""
    if settings.redis_url:
        yield connect(settings)
        return
    with on_embedded(settings, start=start) as local:
        yield connect(local)


def cluster_settings(command: str) -> ArenaSettings:
    """The settings of a command that talks to a cluster (ARENA_REDIS_URL required)."""
    settings = load_settings()
    if not settings.redis_url:
        raise InputError(
            f"ARENA_REDIS_URL is not set: `arena {command}` talks to a cluster "
            "(`arena run` uses the embedded default)"
        )
    return settings


def log_folder(settings: ArenaSettings, batch_id: str) -> Path:
    return settings.data_dir.resolve() / "logs" / batch_id


@dataclass
class Finished:
    """A batch that ended, read back before the (maybe embedded) Redis goes away."""

    info: BatchInfo
    results: list[UnitResult]  # in unit order
    report: Report
    submission: Submission  # what the submission found stored and what it enqueued
    boards: list[Board]  # the batch's leaderboards once it is done


def run_batch(
    batch: ValidatedBatch,
    fresh: bool,
    workers: int | None,
    follow: Follow,
    run_id: str | None = None,
    beside: Beside | None = None,
    replay_cache: bool = False,
) -> Finished:
    """`arena run`: on the cluster when ARENA_REDIS_URL is set, else on the embedded default.
    `beside`: what runs on the batch's Redis meanwhile (the API for `--serve`);
    `replay_cache`: rerun it with llm agents answered from the replay cache."""
    wait_for = partial(submit_and_wait, replay_cache=replay_cache)
    settings = load_settings()
    around = beside or (lambda _: nullcontext())
    if settings.redis_url:
        with around(settings):
            return wait_for(connect(settings), batch, fresh, settings, follow, run_id)
    with on_embedded(settings, workers, run_batches=True) as local, around(local):
        db = connect(local)
        # Left running by an earlier host of the folder: resumed here; by a live one: waited for.
        resume = resume_orphan(db, batch.batch_id)
        return wait_for(db, batch, fresh, local, follow, run_id, resume_running=resume)


def submit_and_wait(
    db: Store,
    batch: ValidatedBatch,
    fresh: bool,
    settings: ArenaSettings,
    follow: Follow,
    run_id: str | None = None,
    resume_running: bool = False,
    replay_cache: bool = False,
) -> Finished:
    from tasks.submit import submit  # Celery (0.3 s) only when a command submits

    sub = submit(
        db,
        batch,
        fresh,
        resume_running,
        visibility_timeout_s=settings.visibility_timeout_s,
        run_id=run_id,
        replay_cache=replay_cache,
        default_priority="interactive",  # `arena run`: a person waits for it
    )
    with follow(sub) as watcher:
        info = wait(db, sub.batch_id, settings, watcher)
    # The report reads the results back once, in unit order; the logs are written beside it.
    report = report_from_store(db, sub.batch_id)
    log_dir = write_logs(log_folder(settings, sub.batch_id), db.logs(sub.batch_id), report.units)
    if log_dir is not None:
        report = report.model_copy(update={"log_dir": str(log_dir)})
    boards = boards_made(db, info.boards) if info.status == "done" else []
    return Finished(info, report.units, report, sub, boards)
