"""Prometheus metrics from a real `arena worker` with a prefork pool, scraped over loopback."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from arena.embedded import stop
from tests.integration.conftest import ARENA, ROOT, arena, bandit_spec, wait_finished

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def metrics_worker(
    cluster_env: dict[str, str], tmp_path: Path, concurrency: int
) -> tuple[int, subprocess.Popen[bytes]]:
    """A real `arena worker` serving /metrics on a free port (its own process group)."""
    port = free_port()
    env = {**cluster_env, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    worker = subprocess.Popen(
        [
            ARENA,
            "worker",
            "--queues",
            "cpu",
            "--concurrency",
            str(concurrency),
            "--loglevel",
            "WARNING",
            "--metrics-port",
            str(port),
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return port, worker


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_worker_exports_unit_batch_and_queue_metrics(cluster_env, db, write_spec, tmp_path):
    port, worker = metrics_worker(cluster_env, tmp_path, concurrency=2)
    try:
        spec = bandit_spec(protocol={"episodes": 4, "seed": 2})  # 40 units in 4 chunks
        submitted = arena("submit", str(write_spec(spec)), env=cluster_env)
        batch_id = submitted.stdout.strip()
        assert wait_finished(db, batch_id) == "done"
        deadline = time.monotonic() + 20
        while True:  # the reducer's counters land just after the done mark
            try:
                samples = scrape(port)
            except httpx.HTTPError:
                samples = {}
            if samples.get(("arena_batches_total", (("status", "done"), ("workload", "bandit")))):
                break
            assert time.monotonic() < deadline, "no batch metrics"
            time.sleep(0.2)
    finally:
        stop(worker)
    ok = (("queue", "cpu"), ("status", "ok"), ("workload", "bandit"))
    assert samples[("arena_units_total", ok)] == 40  # from both pool processes, summed
    assert samples[("arena_unit_duration_seconds_count", (("workload", "bandit"),))] == 40
    assert samples[("arena_batch_latency_seconds_count", (("workload", "bandit"),))] == 1
    assert samples[("arena_queue_depth", (("queue", "cpu"),))] == 0
    assert samples[("arena_queue_depth", (("queue", "gpu"),))] == 0


def test_worker_exports_the_emulators_frames(cluster_env, db, write_spec, tmp_path):
    """Mario units count their emulator frames: the dashboard's frames per second."""
    port, worker = metrics_worker(cluster_env, tmp_path, concurrency=1)
    spec = {
        "workload": "mario",
        "agents": ["right"],
        "items": ["1-1"],
        "protocol": {"episodes": 2, "seed": 0},
        "params": {"max_steps": 60},
    }
    key = ("arena_emulator_frames_total", (("workload", "mario"),))
    try:
        batch_id = arena("submit", str(write_spec(spec)), env=cluster_env).stdout.strip()
        assert wait_finished(db, batch_id) == "done"
        deadline = time.monotonic() + 20
        while key not in (samples := scrape(port)):
            assert time.monotonic() < deadline, "no emulator frames exported"
            time.sleep(0.2)
    finally:
        stop(worker)
    frames = sum(r.result["emulator_frames"] for r in db.unit_results(batch_id).values())
    assert frames > 0 and samples[key] == frames
