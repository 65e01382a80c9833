"""GET /leaderboards/NAME answers the rows `arena leaderboard NAME --json` prints: both read the
board with the one reader of the service layer (boards.read_board), ranking included."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from arena.service.boards import read_board
from tasks.provenance import finished_provenance, provenance_of
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import LeaderboardEntry, Reduction
from tests.integration.conftest import bandit_spec

pytestmark = pytest.mark.integration


def test_board_rows_are_the_clis_json_rows(client: TestClient, db: Store) -> None:
    batch = validate_batch(bandit_spec(leaderboard="rows"))
    workload = get_workload("bandit")
    boards = workload.boards(batch)
    submitted = provenance_of(batch)
    db.start_batch(batch.normalised(), "bandit", boards, 1, batch.identity, submitted)
    finished, per_agent = finished_provenance(submitted, time.time(), [])
    # Tied scores: Redis returns ties in reverse name order, the workload ranks them by name.
    scores = {"ucb1": 0.5, "greedy": 0.5, "random": 0.25, "thompson": 0.75}
    entries = [
        LeaderboardEntry(agent=a, score=s, stats={"episodes": 3, "errors": 0, "mean_reward": s})
        for a, s in scores.items()
    ]
    db.finish_batch(
        batch.batch_id, Reduction(summary={}, entries=entries), boards, finished, per_agent
    )

    response = client.get("/leaderboards/rows")
    assert response.status_code == 200, response.text
    expected = read_board(db, "rows").payload()
    assert response.json() == {"name": "rows", "entries": expected}
    assert [r["agent"] for r in expected] == ["thompson", "greedy", "ucb1", "random"]
