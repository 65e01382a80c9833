"""Nightly schedules: two real `arena beat` schedulers on one Redis fire each due entry exactly
once; real workers run the batch; a second firing of the same scheduled time resumes it; the
next night is a new batch and a new history point."""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from arena.embedded import stop
from tasks.app import configure
from tasks.schedules import ScheduleEntry, Schedules, parse_entry, run_id, spec_for_slot
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.validation import InputError
from tasks.workloads import validate_batch
from tests.integration.conftest import ARENA, ROOT, WorkerPools, arena

pytestmark = pytest.mark.integration

SPEC = {
    "workload": "bandit",
    "leaderboard": "nightly-bandit",
    "agents": ["greedy", "ucb1"],
    "items": [{"name": "easy", "arms": [0.2, 0.8]}],
    "protocol": {"episodes": 3, "seed": 7},
    "params": {"pulls": 200},
}


def _wait_done(db: Store, batch_id: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while db.status(batch_id) not in ("done", "failed"):
        assert time.monotonic() < deadline, f"batch {batch_id} not done"
        time.sleep(0.2)


def test_entries_are_checked_when_added():
    with pytest.raises(InputError, match="cron"):
        parse_entry({"name": "n", "cron": "every night", "spec": SPEC})
    with pytest.raises(InputError, match=r"spec: .*workload"):
        parse_entry({"name": "n", "cron": "0 3 * * *", "spec": {**SPEC, "workload": "chess"}})
    entry = parse_entry({"name": "n", "cron": "0 3 * * *", "spec": SPEC})
    night = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
    assert entry.last_slot(night + timedelta(hours=5)) == night
    assert entry.next_slot(night) == night + timedelta(days=1)
    # Each night its own batch under one protocol (one board), the same night always the same.
    nights = [validate_batch(spec_for_slot(entry, night + timedelta(days=d))) for d in range(3)]
    assert len({b.batch_id for b in nights}) == 3
    assert len({b.protocol_fingerprint for b in nights}) == 1
    assert validate_batch(spec_for_slot(entry, night)).batch_id == nights[0].batch_id


def test_two_schedulers_fire_each_due_entry_once(
    cluster_env: dict[str, str], db: Store, workers: WorkerPools, tmp_path: Path
):
    (tmp_path / "bandit.yaml").write_text(yaml.safe_dump(SPEC))
    (tmp_path / "schedule.yaml").write_text(
        yaml.safe_dump(
            {
                "entries": [
                    {"name": "every-minute", "cron": "* * * * *", "spec": "bandit.yaml"},
                    {"name": "hourly", "cron": "0 * * * *", "spec": "bandit.yaml"},
                    {"name": "off", "cron": "* * * * *", "spec": "bandit.yaml", "enabled": False},
                ]
            }
        )
    )
    workers.start(cluster_env, concurrency=2)
    command = [
        ARENA,
        "beat",
        "--schedule-file",
        str(tmp_path / "schedule.yaml"),
        "--tick",
        "0.2",
        "--ticks",
        "15",
    ]
    beats = [
        subprocess.Popen(
            command,
            env=cluster_env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        logs = [beat.communicate(timeout=120)[0] for beat in beats]
    finally:
        for beat in beats:
            stop(beat)  # type: ignore[arg-type]
    assert [beat.returncode for beat in beats] == [0, 0], logs
    fired = [m.group(1) for log in logs for m in re.finditer(r" fired (\S+): batch", log)]
    # Each due scheduled time exactly once across both schedulers (a tick across a minute's
    # turn may make two of `every-minute`); the disabled entry never.
    assert fired and len(fired) == len(set(fired)), logs
    assert {run.split("@")[0] for run in fired} == {"every-minute", "hourly"}
    runs = db.r.hgetall(f"{db.p}runs")
    assert set(runs) == set(fired)

    configure(ArenaSettings(redis_url=cluster_env["ARENA_REDIS_URL"]))  # this process submits too
    schedules = Schedules(db)
    entry = next(e for e in schedules.entries() if e.name == "hourly")
    batch_id = runs[f"hourly@{entry.last_slot(datetime.now(UTC)):%Y-%m-%dT%H:%MZ}"]
    _wait_done(db, batch_id)
    history = db.history("nightly-bandit", "ucb1")
    points = len(history)
    assert points >= 1

    # A second firing of the same scheduled time resumes the same batch: no new work, no point.
    slot = entry.last_slot(datetime.now(UTC))
    again = schedules.fire(entry, slot)
    assert again.batch_id == batch_id and again.state == "already-done" and again.enqueued == 0
    shown = arena("schedule", "fire", "hourly", env=cluster_env)
    assert shown.returncode == 0 and batch_id in shown.stdout, shown.stderr
    assert len(db.history("nightly-bandit", "ucb1")) == points

    # The next night is a new batch, and a new point in every agent's history.
    tomorrow = schedules.fire(entry, slot + timedelta(days=1))
    assert tomorrow.batch_id != batch_id
    _wait_done(db, tomorrow.batch_id)
    assert len(db.history("nightly-bandit", "ucb1")) == points + 1
    assert run_id(entry, slot + timedelta(days=1)) in db.r.hgetall(f"{db.p}runs")


def test_schedule_commands(cluster_env: dict[str, str], tmp_path: Path):
    (tmp_path / "bandit.yaml").write_text(yaml.safe_dump(SPEC))
    added = arena(
        "schedule",
        "add",
        "nightly",
        str(tmp_path / "bandit.yaml"),
        "--cron",
        "0 3 * * *",
        env=cluster_env,
    )
    assert added.returncode == 0 and "next at" in added.stdout and "03:00 UTC" in added.stdout
    listed = arena("schedule", "list", env=cluster_env)
    assert "nightly" in listed.stdout and "0 3 * * *" in listed.stdout and "bandit" in listed.stdout
    bad = arena(
        "schedule",
        "add",
        "x",
        str(tmp_path / "bandit.yaml"),
        "--cron",
        "61 * * * *",
        env=cluster_env,
    )
    assert bad.returncode == 2 and "cron" in bad.stderr and "Traceback" not in bad.stderr
    assert arena("schedule", "remove", "nightly", env=cluster_env).returncode == 0
    gone = arena("schedule", "remove", "nightly", env=cluster_env)
    assert gone.returncode == 2 and "no entry 'nightly'" in gone.stderr
    assert json.dumps(ScheduleEntry.model_json_schema())  # the entry's shape is published
