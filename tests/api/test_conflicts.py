"""Valid specs the cluster cannot take as they are: 409 naming why, and nothing changed."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tasks.store import Store
from tests.api.conftest import AUTH
from tests.api.test_api import small_spec, snapshot

pytestmark = pytest.mark.integration


def test_fresh_of_a_running_batch_is_409(client: TestClient, db: Store) -> None:
    sub = client.post("/batches", json=small_spec(), headers=AUTH).json()
    assert db.status(sub["batch_id"]) == "running"  # no workers: it stays running
    before = snapshot(db)
    refused = client.post("/batches", params={"fresh": True}, json=small_spec(), headers=AUTH)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"].startswith(f"fresh: batch {sub['batch_id']} is running")
    assert snapshot(db) == before


def test_a_board_holding_another_protocol_is_409(client: TestClient, db: Store) -> None:
    first = client.post("/batches", json=small_spec(), headers=AUTH)
    assert first.status_code == 202, first.text
    before = snapshot(db)
    other = small_spec()
    other["params"] = {"pulls": 150}  # another protocol, the same board
    refused = client.post("/batches", json=other, headers=AUTH)
    assert refused.status_code == 409, refused.text
    assert "api-it" in refused.json()["detail"]
    assert snapshot(db) == before
