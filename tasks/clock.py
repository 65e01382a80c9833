"""This machine's clock against Redis's. Liveness never reads a worker's clock (heartbeats,
deliveries, stalls and leases are on Redis's: docs/reliability.md, "One clock"), but what a
worker stamps for people to read (a batch's start and end, a board's history) and kombu's own
visibility timeout still use it: a worker whose clock is off by more than
ARENA_CLOCK_SKEW_WARN_S says so once in its log, and `arena queue` lists it."""

from __future__ import annotations

import logging
import time

from tasks.provenance import host_name
from tasks.store import Store

log = logging.getLogger(__name__)


def skew_s(db: Store) -> tuple[float, float]:
    """(this clock minus Redis's, in seconds; Redis's clock now). The round trip's midpoint
    stands for the moment Redis read its clock."""
    before = time.time()
    redis_now = db.redis_time()
    after = time.time()
    return (before + after) / 2 - redis_now, redis_now


class ClockWatch:
    """Checked at every watchdog sweep: the skew is recorded for `arena queue`; the first time
    it is over the bound, one warning; once back within it, one line more."""

    def __init__(self, warn_s: float, host: str | None = None) -> None:
        self.warn_s, self.host, self.warned = warn_s, host or host_name(), False

    def check(self, db: Store) -> float:
        skew, redis_now = skew_s(db)
        db.note_clock(self.host, skew, redis_now)
        if abs(skew) > self.warn_s and not self.warned:
            self.warned = True
            log.warning(
                "this machine's clock (%s) is %.1fs %s Redis's (over ARENA_CLOCK_SKEW_WARN_S "
                "of %gs): liveness uses Redis's clock, but the times this worker stamps are "
                "off by as much; set the clock right (NTP)",
                self.host,
                abs(skew),
                "ahead of" if skew > 0 else "behind",
                self.warn_s,
            )
        elif abs(skew) <= self.warn_s and self.warned:
            self.warned = False
            log.warning("this machine's clock is within %.1fs of Redis's again", abs(skew))
        return skew


def skewed_clocks(db: Store, warn_s: float, fresh_s: float) -> dict[str, float]:
    """Host -> its skew (s, + ahead) of each worker host that checked within `fresh_s`
    (Redis's clock) and is off by more than `warn_s`."""
    return {h: s for h, s in db.worker_clocks(fresh_s).items() if abs(s) > warn_s}
