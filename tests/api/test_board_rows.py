"""GET /leaderboards/NAME answers the rows `arena leaderboard NAME --json` prints: both read the
board with the one reader of the service layer (boards.read_board), ranking included; its page
shows the columns the board's workload declares."""

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


def publish(db: Store, board: str, entries: list[LeaderboardEntry]) -> None:
    """A bandit batch that wrote `entries` to `board`, as a reducer stores it."""
    batch = validate_batch(bandit_spec(leaderboard=board))
    boards = get_workload("bandit").boards(batch)
    submitted = provenance_of(batch)
    db.start_batch(batch.normalised(), "bandit", boards, 1, batch.identity, submitted)
    finished, per_agent = finished_provenance(submitted, time.time(), [])
    db.finish_batch(
        batch.batch_id, Reduction(summary={}, entries=entries), boards, finished, per_agent
    )


def test_board_rows_are_the_clis_json_rows(client: TestClient, db: Store) -> None:
    # Tied scores: Redis returns ties in reverse name order, the workload ranks them by name.
    scores = {"ucb1": 0.5, "greedy": 0.5, "random": 0.25, "thompson": 0.75}
    entries = [
        LeaderboardEntry(agent=a, score=s, stats={"episodes": 3, "errors": 0, "mean_reward": s})
        for a, s in scores.items()
    ]
    publish(db, "rows", entries)

    response = client.get("/leaderboards/rows")
    assert response.status_code == 200, response.text
    expected = read_board(db, "rows").payload()
    assert response.json() == {"name": "rows", "entries": expected}
    assert [r["agent"] for r in expected] == ["thompson", "greedy", "ucb1", "random"]


def test_a_boards_page_shows_the_columns_its_workload_declares(
    client: TestClient, db: Store
) -> None:
    """page.py names no workload: the bandit board (no page columns of its own) gets its
    interval and table columns, each value in a data-value attribute as the JSON has it."""
    stats = {"episodes": 3, "errors": 0, "mean_regret": 1234.4, "best_arm_rate": 0.25}
    stats |= {"mean_reward": 0.5, "iqm_reward": 0.5, "iqm_ci95": [0.25, 0.75]}
    publish(db, "declared", [LeaderboardEntry(agent="ucb1", score=0.5, stats=stats)])

    page = client.get("/ui/leaderboards/declared")
    assert page.status_code == 200, page.text
    html = page.text
    assert 'data-kind="bandit"' in html
    for column in get_workload("bandit").board_page_columns():
        assert f"<th>{column.header}</th>" in html
    assert '<td class="iqm_reward" data-value="{&quot;point&quot;: 0.5' in html
    assert ">0.500 [0.250, 0.750]</td>" in html
    assert '<td class="mean_regret" data-value="1234.4">1,234</td>' in html
    assert '<td class="best_arm_rate" data-value="0.25">25.0%</td>' in html
    assert "replay" not in html  # bandit declares no replays
