"""One tie rule everywhere (docs/reports.md, "Ranks"): standard competition ranking, "1, 2, 2, 4".
Rows the workload cannot tell apart share the best rank, in `arena leaderboard` (the rubric's
table or the generic one), `arena leaderboard --json`, GET /leaderboards/NAME, the board's page
and `arena report`. Before (c3f317a) the Mario rubric's table said 3, 3, 3 for three tied rows
while --json, the API, the page and the report said 3, 4, 5."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from scoring.mario import EpisodeResult, aggregate_scores
from tasks.provenance import finished_provenance, provenance_of
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import LeaderboardEntry, Reduction
from tests.integration.conftest import arena, bandit_spec

pytestmark = pytest.mark.integration

# Two rows ahead, three tied (equal on the score and every tiebreaker), one behind.
AGENTS = {"a": 3000, "b": 2000, "t1": 1000, "t2": 1000, "t3": 1000, "z": 500}
RANKS = {"a": 1, "b": 2, "t1": 3, "t2": 3, "t3": 3, "z": 6}


def publish(db: Store, spec: dict[str, Any], entries: list[LeaderboardEntry]) -> str:
    """A batch of `spec` that wrote `entries`, stored as a reducer stores it: its id."""
    batch = validate_batch(spec)
    workload = get_workload(spec["workload"])
    boards = workload.boards(batch)
    submitted = provenance_of(batch)
    db.start_batch(batch.normalised(), workload.name, boards, 1, batch.identity, submitted)
    finished, per_agent = finished_provenance(submitted, time.time(), [])
    reduction = Reduction(summary={}, entries=entries)
    db.finish_batch(batch.batch_id, reduction, boards, finished, per_agent)
    return batch.batch_id


def mario_entry(agent: str, max_x: int) -> LeaderboardEntry:
    episode = EpisodeResult(
        world=1, stage=1, completed=False, max_x_pos=max_x, steps=500, coins=0, time_remaining=0
    )
    stats = aggregate_scores([episode, episode])
    return LeaderboardEntry(
        agent=agent, score=stats.arena_score, board="mario-1-1", stats=stats.model_dump()
    )


def cli_ranks(text: str) -> dict[str, int]:
    """Agent -> rank, from the lines of a printed board that start with a rank and a name."""
    lines = (re.match(r"\s*(\d+)\s+(\S+)\s", line) for line in text.splitlines())
    return {m[2]: int(m[1]) for m in lines if m and m[2] in AGENTS}


def page_ranks(html: str) -> dict[str, int]:
    found = re.findall(r'data-agent="([^"]+)"><td class="rank">(\d+)</td>', html)
    return {agent: int(rank) for agent, rank in found}


def assert_one_rule(name: str, batch_id: str, client: TestClient, env: dict[str, str]) -> None:
    table = arena("leaderboard", name, env=env)
    assert table.returncode == 0, table.stderr
    assert cli_ranks(table.stdout) == RANKS, table.stdout
    as_json = arena("leaderboard", name, "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    rows = json.loads(as_json.stdout)["entries"]
    assert {r["agent"]: r["rank"] for r in rows} == RANKS
    assert [r["agent"] for r in rows] == list(AGENTS)  # ties listed by name
    api = client.get(f"/leaderboards/{name}").json()["entries"]
    assert {r["agent"]: r["rank"] for r in api} == RANKS
    page = client.get(f"/ui/leaderboards/{name}")
    assert page.status_code == 200, page.text
    assert page_ranks(page.text) == RANKS
    report = arena("report", batch_id, env=env)
    assert report.returncode == 0, report.stderr
    results = json.loads(report.stdout)["results"][name]
    assert {agent: r["rank"] for agent, r in results.items()} == RANKS


def test_a_mario_board_with_ties_ranks_alike_everywhere(
    client: TestClient, db: Store, cluster_env: dict[str, str]
) -> None:
    spec = {
        "workload": "mario",
        "agents": ["right"],
        "items": ["1-1"],
        "protocol": {"episodes": 2, "seed": 0},
    }
    batch_id = publish(db, spec, [mario_entry(a, x) for a, x in AGENTS.items()])
    assert_one_rule("mario-1-1", batch_id, client, cluster_env)


def test_a_generic_board_with_ties_ranks_alike_everywhere(
    client: TestClient, db: Store, cluster_env: dict[str, str]
) -> None:
    stats = {"episodes": 3, "errors": 0}
    entries = [
        LeaderboardEntry(agent=a, score=s / 1000, stats={**stats, "mean_reward": s / 1000})
        for a, s in AGENTS.items()
    ]
    batch_id = publish(db, bandit_spec(leaderboard="ties"), entries)
    assert_one_rule("ties", batch_id, client, cluster_env)
