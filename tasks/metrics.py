"""Prometheus metrics of units and batches, served by `arena worker --metrics-port`.

Celery's prefork pool runs units in child processes, so the metrics use prometheus_client's
multiprocess mode: PROMETHEUS_MULTIPROC_DIR must be set before this module is imported (the
worker command does it) and the exporter aggregates every process's values at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

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


def serve_metrics(port: int, host: str, depths: Callable[[], dict[str, int]]) -> None:
    """Serve /metrics on host:port from this (the worker's main) process, in a thread."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(QueueDepth(depths))
    start_http_server(port, addr=host, registry=registry)


def mark_process_dead(pid: int) -> None:
    multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
