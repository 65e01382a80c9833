"""A reducer's board write (tasks/store_boards.py, issue 23): the rows are one EVAL per board
inside the MULTI/EXEC, and Redis holds what the command-per-entry write held, value for value:
each row's hash, the board's scores, one history point per evaluation, the batch's record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from arena.embedded import embedded_redis
from tasks import store_boards
from tasks.provenance import Provenance
from tasks.store import Store
from tasks.workloads.base import LeaderboardEntry, Reduction

pytestmark = pytest.mark.integration
NOW = 1795770386.7879295


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setattr(store_boards.time, "time", lambda: NOW)
    with embedded_redis(tmp_path / "redis") as url:
        yield Store(redis.Redis.from_url(url, decode_responses=True))


def provenance() -> Provenance:
    fields = {"arena_version": "0", "arena_commit": None, "engine": "e", "python": "3"}
    fields |= {"submitted_at": "t", "submitted_from": "h", "protocol": {}}
    return Provenance.model_validate(fields | {"protocol_fingerprint": "p1", "agents": {}})


@dataclass
class Written:
    entries: list[LeaderboardEntry]
    per_agent: dict[str, dict[str, Any]]  # the reducer's provenance by agent
    rows: dict[str, dict[str, str]]
    scores: dict[str, float]
    history: dict[str, list[dict[str, Any]]]


def write(db: Store, agents: int, boards: dict[str, str]) -> Written:
    """finish_batch of `agents` entries (a0 without provenance) to the first of `boards`."""
    entries = [
        LeaderboardEntry(agent=f"a{i}", score=0.1 * i + 1e-9, stats={"i": i, "ci": [0.1, 0.2]})
        for i in range(agents)
    ]
    per_agent = {
        f"a{i}": {"run_id": None, "protocol_fingerprint": "p1", "hosts": ["h"]}
        for i in range(1, agents)
    }
    reduction = Reduction(summary={"n": 1}, entries=entries)
    db.finish_batch("b1", reduction, boards, provenance(), per_agent)
    board = next(iter(boards))
    return Written(
        entries,
        per_agent,
        {e.agent: db.r.hgetall(db.keys.board_entry(board, e.agent)) for e in entries},
        dict(db.r.zrange(db.k_lb(board), 0, -1, withscores=True)),
        {e.agent: db.history(board, e.agent) for e in entries},
    )


@pytest.mark.parametrize("per_eval", [10_000, 3])
def test_the_rows_hold_what_a_command_per_entry_wrote(
    db: Store, monkeypatch: pytest.MonkeyPatch, per_eval: int
):
    monkeypatch.setattr(store_boards, "ROWS_PER_EVAL", per_eval)  # 3: seven rows in 3 EVALs
    out = write(db, 7, {"lb": "p1"})
    for entry in out.entries:
        row_provenance = {**out.per_agent.get(entry.agent, {}), "protocol_fingerprint": "p1"}
        assert out.rows[entry.agent] == {
            "score": repr(entry.score),
            "stats": json.dumps(entry.stats),
            "batch": "b1",
            "updated_at": repr(NOW),
            "provenance": json.dumps(row_provenance),
        }
        assert out.scores[entry.agent] == entry.score
        assert out.history[entry.agent] == [{"batch": "b1", "score": entry.score, "at": NOW}]
    # The record's provenance by agent, byte for byte as json.dumps writes it.
    assert db.r.hget(db.k_batch("b1"), "entry_provenance") == json.dumps(out.per_agent)


def test_a_board_of_another_protocol_gets_its_own_in_each_row(db: Store):
    out = write(db, 3, {"other": "p2"})
    for agent, row in out.rows.items():
        provenance = json.loads(row["provenance"])
        assert provenance["protocol_fingerprint"] == "p2"
        keys = ["run_id", "protocol_fingerprint", "hosts"] if agent != "a0" else None
        assert list(provenance) == (keys or ["protocol_fingerprint"])
