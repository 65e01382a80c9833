"""A worker's Redis outage in two lines of Arena's own: one when Celery's consumer loses the
broker, one when it is connected again. Celery alone prints an ERROR line every few seconds
for as long as it lasts, and a deprecation block about a setting Arena already sets
(docs/reliability.md, "Faults speak"). tasks/refusal.py installs these with its own.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

from celery import bootsteps
from celery.exceptions import CPendingDeprecationWarning

log = logging.getLogger("arena.worker")
# Celery's consumer logs these, each time it loses the broker and each time a reconnect fails.
RECONNECT_MESSAGES = ("consumer: Connection to broker lost", "consumer: Cannot connect to")


class Outage:
    """Something this worker waits out, said in one line when it starts (with its reason)
    and one when it ends (with how long it lasted); repeats in between say nothing."""

    def __init__(self, started: str, ended: str) -> None:
        self.started, self.ended = started, ended  # %-formats: the reason; the seconds
        self.since: float | None = None

    def lost(self, reason: str) -> None:
        if self.since is None:
            self.since = time.monotonic()
            log.warning(self.started, reason)

    def back(self) -> None:
        if self.since is not None:
            log.warning(self.ended, time.monotonic() - self.since)
            self.since = None


OUTAGE = Outage(
    "lost Redis (%s); reconnecting for as long as it takes: running units go on and store "
    "their results once it is back",
    "Redis is back after %.0fs; taking units again",
)


def _reason(record: logging.LogRecord) -> str:
    args = record.args if isinstance(record.args, tuple) else ()
    error = next((a for a in args if isinstance(a, BaseException)), None)
    text = " ".join(str(error).split()) if error is not None else ""
    return f"{type(error).__name__}: {text}" if error is not None else "connection lost"


class QuietReconnects(logging.Filter):
    """Celery's reconnect lines become the outage's one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith(RECONNECT_MESSAGES):
            OUTAGE.lost(_reason(record))
            return False
        return True


class NoticeReconnect(bootsteps.StartStopStep):  # type: ignore[misc]  # celery is untyped
    """Started with the consumer: at the worker's start, and again after each reconnect."""

    requires = ("celery.worker.consumer.connection:Connection",)

    def start(self, parent: Any) -> None:
        OUTAGE.back()


def ignore_cancel_notice(**_: Any) -> None:
    # Celery warns on every connection loss that worker_cancel_long_running_tasks_on_connection
    # _loss will default to True in 6.0; Arena sets it (False) explicitly (tasks/app.py). Added
    # once the worker is ready: Celery's logging setup puts an 'always' filter in front before.
    warnings.filterwarnings(
        "ignore",
        message=r"(?s).*worker_cancel_long_running_tasks_on_connection_loss",
        category=CPendingDeprecationWarning,
    )
