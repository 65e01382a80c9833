"""The Grafana dashboard and the Prometheus alert rules under deploy/: every query is valid
PromQL over metrics Arena really exports, and the alerts fire (and stay quiet) as their
promtool unit tests say. promtool comes from Debian's `prometheus` package (scripts/test
installs it); without it these tests skip, except under CI=true where they fail."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import REGISTRY

import tasks.metrics  # noqa: F401  (registers the workers' metrics)
from tasks.metrics import QueueDepth
from tests.needs import unavailable

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "arena-dashboard.json"
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def promtool(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess[str]:
    if shutil.which("promtool") is None:
        unavailable("promtool not found (Debian's prometheus package; scripts/test installs it)")
    return subprocess.run(
        ["promtool", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
    )


def exported() -> set[str]:
    """Names of the metric families workers export (the API's own are not used here)."""
    names = {family.name for family in REGISTRY.collect() if family.name.startswith("arena_")}
    names |= {family.name for family in QueueDepth(lambda: {"cpu": 0}).collect()}
    return names


def metric_names(expr: str) -> set[str]:
    found = set(re.findall(r"\barena_[a-z_]+", expr))
    return {next((n[: -len(s)] for s in SUFFIXES if n.endswith(s)), n) for n in found}


def dashboard_exprs() -> list[tuple[str, str]]:
    panels: list[dict[str, Any]] = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels for t in p["targets"]]


def test_the_alert_rules_are_valid_and_fire_as_their_unit_tests_say():
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "alerts.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())["groups"][0]["rules"]
    assert {r["alert"] for r in rules} == {"ArenaQueueStuck", "ArenaErrorRateRising"}
    for rule in rules:
        assert metric_names(rule["expr"]) <= exported(), rule["alert"]
        assert rule["labels"]["severity"] and rule["annotations"]["summary"]


def test_the_prometheus_config_loads_its_rules(tmp_path: Path):
    shutil.copy(PROMETHEUS / "alerts.yml", tmp_path / "alerts.yml")
    config = (PROMETHEUS / "prometheus.yml").read_text()
    (tmp_path / "prometheus.yml").write_text(
        config.replace("/etc/prometheus/alerts.yml", str(tmp_path / "alerts.yml"))
    )
    checked = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 rule files found" in checked.stdout


def test_every_dashboard_query_is_promql_over_exported_metrics(tmp_path: Path):
    exprs = dashboard_exprs()
    # promtool parses each query as a recording rule's expression: a syntax error fails.
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"arena_dashboard:query{i}", "expr": expr}
                    for i, (_, expr) in enumerate(exprs)
                ],
            }
        ]
    }
    (tmp_path / "queries.yml").write_text(yaml.safe_dump(rules))
    checked = promtool("check", "rules", str(tmp_path / "queries.yml"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for title, expr in exprs:
        assert metric_names(expr) and metric_names(expr) <= exported(), (title, expr)


def test_the_dashboard_shows_what_operators_watch():
    dashboard = json.loads(DASHBOARD.read_text())
    used = set().union(*(metric_names(expr) for _, expr in dashboard_exprs()))
    # Units by status, durations, queue depth, batch latency, emulator frames per second.
    assert {
        "arena_units",
        "arena_unit_duration_seconds",
        "arena_queue_depth",
        "arena_batch_latency_seconds",
        "arena_emulator_frames",
    } <= used
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dashboard["panels"])
    assert dashboard["templating"]["list"][0]["type"] == "datasource"
