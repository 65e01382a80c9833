"""Prometheus metrics of units and batches, served by `arena worker --metrics-port`.

Celery's prefork pool runs units in child processes, so the metrics use prometheus_client's
multiprocess mode: PROMETHEUS_MULTIPROC_DIR must be set before this module is imported (the
worker command does it) and the exporter aggregates every process's values at scrape time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from tasks.store import Store

UNITS = Counter(
    "arena_units", "Units run, by workload, queue and outcome.", ["workload", "queue", "status"]
)
UNIT_SECONDS = Histogram(
    "arena_unit_duration_seconds",
    "Wall time of one unit inside the worker.",
    ["workload"],
    buckets=(0.001, 0.01, 0.1, 1, 10, 60, 300, 900, 3600),
)
# Emulator frames that units ran (Mario): its rate is the cluster's frames per second.
EMULATOR_FRAMES = Counter(
    "arena_emulator_frames", "Emulator frames run by units, by workload.", ["workload"]
)
# What llm agents asked of their endpoints (docs/alympics.md): requests answered, tokens by kind
# (prompt, completion) and US dollars, by model; their rates are a cluster's spend per second.
LLM_REQUESTS = Counter("arena_llm_requests", "Requests llm agents had answered.", ["model"])
LLM_TOKENS = Counter("arena_llm_tokens", "Tokens of llm agents' requests.", ["model", "kind"])
LLM_COST = Counter("arena_llm_cost_usd", "US dollars llm agents spent (their prices).", ["model"])
BATCHES = Counter(
    "arena_batches", "Batches reduced, by workload and outcome.", ["workload", "status"]
)
BATCH_SECONDS = Histogram(
    "arena_batch_latency_seconds",
    "From submission to the leaderboard update.",
    ["workload"],
    buckets=(1, 10, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600),
)


class QueueDepth(Collector):
    """Messages waiting in each queue, read from the broker at scrape time."""

    def __init__(self, depths: Callable[[], dict[str, int]]) -> None:
        self.depths = depths

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "arena_queue_depth", "Unit chunks waiting in the queue.", labels=["queue"]
        )
        for queue, depth in sorted(self.depths().items()):
            gauge.add_metric([queue], depth)
        yield gauge


BATCH_STATUSES = ("running", "done", "incomplete", "failed", "cancelled")
RECENT_BATCHES = 20  # batches whose unit counts the API's /metrics shows
STATUS_EVERY_S = 30.0  # batches by status are counted at most this often
STATUS_PAGE = 1000  # batch statuses read per round trip while counting


class ClusterGauges(Collector):
    """The API's view of the cluster, read from Redis at scrape time in bounded work: the unit
    counts of the latest batches (one round trip), and the batches kept by status, counted
    over every batch at most every STATUS_EVERY_S (a scrape in between, however many readers
    ask, reuses the count)."""

    def __init__(self, db: Store, every_s: float = STATUS_EVERY_S) -> None:
        self.db, self.every_s = db, every_s
        self._counted: tuple[float, dict[str, int]] | None = None
        self._guard = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_status = GaugeMetricFamily(
            "arena_batches_stored", "Batches kept in Redis, by status.", labels=["status"]
        )
        counts = self.status_counts()
        for status in BATCH_STATUSES:
            by_status.add_metric([status], counts.get(status, 0))
        yield by_status
        yield self.recent_units()

    def status_counts(self) -> dict[str, int]:
        with self._guard:
            now = time.monotonic()
            if self._counted is None or now - self._counted[0] >= self.every_s:
                self._counted = (now, self._count_statuses())
            return self._counted[1]

    def _count_statuses(self) -> dict[str, int]:
        return self.db.count_statuses(STATUS_PAGE)

    def recent_units(self) -> GaugeMetricFamily:
        units = GaugeMetricFamily(
            "arena_batch_units",
            f"Units of the {RECENT_BATCHES} latest batches: total, completed, errors.",
            labels=["batch", "workload", "batch_status", "count"],
        )
        ids = self.db.batch_ids(RECENT_BATCHES)
        for batch_id, counts in zip(ids, self.db.unit_counts(ids), strict=True):
            if counts.status is None:
                continue  # deleted since the first read
            labels = [batch_id, counts.workload or "", counts.status]
            values = (("total", counts.total), ("completed", counts.completed))
            for name, value in (*values, ("errors", counts.errors)):
                units.add_metric([*labels, name], value)
        return units


TEAM_STATES = ("run", "submitted", "refused")


class TeamUnits(Collector):
    """Each team's units, read from Redis at scrape time (tasks/store_teams.py): run (counted
    by workers as chunks end), submitted and refused (counted by the API), and waiting (its
    running batches' units without a result, computed now). `teams`: the team names of the
    teams file now; "-" (no team: the CLI's operator, an ARENA_API_TOKENS admin) has counts but
    no waiting."""

    def __init__(self, db: Store, teams: Callable[[], list[str]]) -> None:
        self.db, self.teams = db, teams

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        units = CounterMetricFamily(
            "arena_team_units",
            "Units per team: run (a result stored), submitted (enqueued), refused (a quota).",
            labels=["team", "state"],
        )
        waiting = GaugeMetricFamily(
            "arena_team_units_waiting",
            "Units of a team's running batches without a result yet.",
            labels=["team"],
        )
        names = self.teams()
        for team in ["-", *names]:
            counts = self.db.team_counts(team)
            for state in TEAM_STATES:
                units.add_metric([team, state], counts.get(state, 0))
        for team in names:
            waiting.add_metric([team], self.db.team_units_in_flight(team))
        yield units
        yield waiting


def serve_metrics(port: int, host: str, depths: Callable[[], dict[str, int]]) -> None:
    """Serve /metrics on host:port from this (the worker's main) process, in a thread."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(QueueDepth(depths))
    start_http_server(port, addr=host, registry=registry)


def mark_process_dead(pid: int) -> None:
    multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
