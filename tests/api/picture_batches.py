"""Real batches for the picture tests without a cluster: each spec's units run in this process
(tasks.execute.execute_batch: the real emulator, games and race checks), and their results go
to a real Redis as the workers and the reducer write them (save_unit, Workload.reduce,
finish_batch). What the pictures read is then what a cluster run leaves."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from tasks.execute import execute_batch
from tasks.provenance import finished_provenance, provenance_of
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tests.integration.conftest import ROOT
from tests.race.projects import agent_spec_entries, make_python_repo

MARIO_BOARD = "pictures-mario-1-1"
ALYMPICS_BOARD = "pictures-alympics"
RACE_BRANCHES = ["clean", "adds-tests", "breaks-test"]


def run_into(db: Store, spec: dict[str, Any], run_id: str | None = None) -> str:
    """Run the spec's units here, store them and reduce: the batch id."""
    batch = validate_batch(spec, asker="operator")
    workload = get_workload(batch.spec.workload)
    boards = workload.boards(batch)
    submitted = provenance_of(batch, run_id)
    total = len(workload.expand(batch))
    db.start_batch(batch.normalised(), workload.name, boards, total, batch.identity, submitted)
    if run_id:
        db.label_run(run_id, batch.batch_id)
    logs: dict[str, str] = {}
    results = execute_batch(batch, logs)
    for result in results:
        db.save_unit(batch.batch_id, result, logs.get(result.unit_id, ""))
    reduction = workload.reduce(batch, results)
    info = db.batch(batch.batch_id)
    assert info is not None
    finished, per_agent = finished_provenance(submitted, info.created_at, results)
    db.finish_batch(batch.batch_id, reduction, boards, finished, per_agent)
    return batch.batch_id


def mario_spec(night: int) -> dict[str, Any]:
    """The same protocol each night (a new occasion: a new batch, one more trend point)."""
    return {
        "occasion": f"nightly-mario@night-{night}",
        "workload": "mario",
        "leaderboard": "pictures-mario",
        "agents": ["right", "jump-right"],
        "items": ["1-1"],
        "protocol": {"episodes": 3, "seed": 5},
        "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 60},
    }


def alympics_spec() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "alympics.yaml").read_text())
    return {**spec, "leaderboard": ALYMPICS_BOARD}


def race_spec(folder: Path) -> dict[str, Any]:
    repo = make_python_repo(folder / "repo")
    return {
        "workload": "race",
        "task": "add a feature",
        "repo": str(repo.path),
        "agents": agent_spec_entries(repo, RACE_BRANCHES),
    }


def run_all(db: Store, folder: Path) -> dict[str, str]:
    """A Mario board with two evaluations (two points on each trend), an Alympics board and a
    race: kind -> batch id."""
    ids = {"mario": run_into(db, mario_spec(1), "pictures-mario")}
    time.sleep(0.01)  # two distinct history times
    ids["mario-2"] = run_into(db, mario_spec(2), "pictures-mario-2")
    ids["alympics"] = run_into(db, alympics_spec(), "pictures-alympics")
    ids["race"] = run_into(db, race_spec(folder), "pictures-race")
    return ids
