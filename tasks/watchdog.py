"""The watchdog every worker runs in its main process (tasks/liveness.py has the records it
reads). Each sweep, for every running batch:

- a chunk message delivered to a worker that stopped beating goes back to the front of its
  queue (a dead worker's chunks come back in seconds, not after the visibility timeout);
- a batch whose stored results have not grown for `lost_after_s` and has units that no message
  carries any more gets new messages for them (a message lost in kombu's delivery window);
- a batch whose units are all stored but which nobody is reducing gets its reducer;
- a chunk its pool gave out (tasks/fair_share.py) that no message carries and no worker runs
  for `lost_after_s` leaves the pool's window (else the pool's capacity shrinks for good), and
  a batch that ended leaves its pools;
- this worker's slots are registered again and each pool it consumes is topped up (a worker
  came or went, or a release's publisher died before publishing).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

import redis

from tasks.clock import ClockWatch
from tasks.liveness import lost_out, lost_units, orphans
from tasks.provenance import host_name
from tasks.settings import current_settings
from tasks.store import Store

log = logging.getLogger(__name__)


@dataclass
class Actions:
    restore: Callable[[str], None]  # a delivery tag -> back at the front of its queue
    requeue: Callable[[str, list[str]], None]  # (batch, unit ids) -> new chunk messages
    reduce: Callable[[str], None]  # batch -> start its reducer
    top_up: Callable[[], None] = lambda: None  # this node's slots renewed, its pools topped up


def watch_once(db: Store, lost_after_s: float, actions: Actions) -> int:
    """One sweep; returns how many chunks or lost units were given out again."""
    given = 0
    for orphan in orphans(db, lost_after_s, note=True):
        if db.status(orphan.batch_id) != "running":
            continue
        # One watchdog restores it, however many workers sweep at once.
        if db.claim_restore(orphan.tag, lost_after_s):
            actions.restore(orphan.tag)
            given += 1
    for batch_id in db.running_batch_ids():
        if db.status(batch_id) != "running":
            db.drop_running(batch_id)
            db.leave_pools(batch_id)
            continue
        for queue, chunk_ids in lost_out(db, batch_id, lost_after_s).items():
            log.warning("batch %s: chunks %s left the pool's window (lost)", batch_id, chunk_ids)
            db.drop_out(queue, batch_id, chunk_ids)
        if db.all_stored(batch_id):
            if not db.reducer_held(batch_id):
                actions.reduce(batch_id)
        elif _stalled(db, batch_id, lost_after_s):
            given += _requeue_lost(db, batch_id, lost_after_s, actions)
    actions.top_up()
    return given


def _stalled(db: Store, batch_id: str, lost_after_s: float) -> bool:
    """No new unit result for `lost_after_s` (tracked in Redis, on Redis's clock: every
    watchdog shares it, whatever its own clock says)."""
    now = db.redis_time()
    since = db.stall_since(batch_id, now)
    return since is not None and now - since >= lost_after_s


def _requeue_lost(db: Store, batch_id: str, lost_after_s: float, actions: Actions) -> int:
    if not db.claim_lost_scan(batch_id, lost_after_s):
        return 0
    lost = lost_units(db, batch_id, lost_after_s)
    if lost:
        actions.requeue(batch_id, lost)
        db.clear_stall(batch_id)
    return len(lost)


def start_watchdog(db: Store, lost_after_s: float, actions: Actions) -> threading.Thread:
    """A daemon thread in the worker's main process, sweeping every lost_after_s / 3; each
    sweep also compares this machine's clock with Redis's (tasks/clock.py)."""
    clock = ClockWatch(current_settings().clock_skew_warn_s, f"{host_name()}:{os.getpid()}")

    def loop() -> None:
        with suppress(redis.RedisError):
            clock.check(db)  # a clock that is off is said at start, not a sweep later
        while True:
            time.sleep(max(0.5, lost_after_s / 3))
            try:
                watch_once(db, lost_after_s, actions)
                clock.check(db)
            except redis.RedisError:
                pass  # an outage: the next sweep tries again
            except Exception:  # the watchdog must outlive anything one sweep meets
                log.exception("watchdog sweep failed; trying again")

    thread = threading.Thread(target=loop, name="arena-watchdog", daemon=True)
    thread.start()
    return thread
