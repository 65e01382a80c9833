"""Episodes as CSV, one row per episode (issue 35, item 4; docs/reports.md, "Episodes as CSV"):
`arena leaderboard NAME --csv`, `arena mario series BOARD RUN --csv` and `arena report ID --csv`
after a real Mario batch on the embedded default, read back with the csv module: the rows are
the stored episodes (the report's per-unit results), numbers equal.

On c3f317a none of the three took --csv (click: "No such option: --csv", exit 2): the episodes
were only in the report's JSON."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import arena
from tests.integration.test_embedded import embedded_env, no_leftovers

pytestmark = pytest.mark.integration
pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")

SPEC = {
    "workload": "mario",
    "agents": [
        {"name": "walk@1k", "builtin": "right"},
        {"name": "walk@2k", "builtin": "jump-right"},
        "random",
    ],
    "items": ["1-1"],
    "protocol": {"episodes": 3, "seed": 0},
    "params": {"max_steps": 60},
}


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def same_episode(row: dict[str, str], unit: dict[str, Any]) -> None:
    """A CSV row says what the stored unit says: its identity and every number it stored."""
    for key in ("agent", "item", "status"):
        assert row[key] == unit[key], (key, row, unit)
    assert int(row["episode"]) == unit["episode"]
    for key, value in unit["result"].items():
        if isinstance(value, bool):
            assert row[key] == str(value), key
        elif isinstance(value, int | float):
            assert float(row[key]) == value, key
    assert "actions" not in row  # the action log stays in the report


def test_episodes_as_csv_are_the_stored_episodes(tmp_path: Path) -> None:
    env = embedded_env(tmp_path / "data")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    ran = arena("run", str(spec), "--json", env=env)
    assert ran.returncode == 0, ran.stderr
    batch = json.loads(ran.stdout)["batch_id"]
    report = arena("report", batch, env=env)
    assert report.returncode == 0, report.stderr
    units = {(u["agent"], u["episode"]): u for u in json.loads(report.stdout)["units"]}
    assert len(units) == 9

    board = arena("leaderboard", "mario-1-1", "--csv", env=env)
    assert board.returncode == 0, board.stderr
    rows = rows_of(board.stdout)
    assert sorted((r["agent"], int(r["episode"])) for r in rows) == sorted(units)
    ranked = json.loads(arena("leaderboard", "mario-1-1", "--json", env=env).stdout)["entries"]
    ranks = {e["agent"]: e["rank"] for e in ranked}
    for row in rows:
        same_episode(row, units[(row["agent"], int(row["episode"]))])
        assert row["board"] == "mario-1-1" and row["batch"] == batch
        assert int(row["rank"]) == ranks[row["agent"]]
    assert [r["agent"] for r in rows] == [a for e in ranked for a in [e["agent"]] * 3]

    series = arena("mario", "series", "mario-1-1", "walk", "--csv", env=env)
    assert series.returncode == 0, series.stderr
    points = rows_of(series.stdout)
    assert [(r["agent"], int(r["training_steps"])) for r in points] == [("walk@1k", 1000)] * 3 + [
        ("walk@2k", 2000)
    ] * 3
    for row in points:
        same_episode(row, units[(row["agent"], int(row["episode"]))])

    whole = arena("report", batch, "--csv", env=env)
    assert whole.returncode == 0, whole.stderr
    every = rows_of(whole.stdout)
    assert len(every) == 9
    for row in every:
        same_episode(row, units[(row["agent"], int(row["episode"]))])
    no_leftovers(tmp_path / "data")
