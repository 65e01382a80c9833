"""The Store's small reads that the API and the CLI use instead of raw Redis."""

from __future__ import annotations

import pytest
import redis

from tasks.refusal import probe_writes
from tasks.store import Store


def test_ping_workload_and_queue_lengths(db: Store):
    db.ping()
    db.r.hset(db.keys.batch("b1"), mapping={"workload": "bandit", "status": "running"})
    assert db.workload_of("b1") == "bandit"
    assert db.workload_of("missing") is None
    db.r.rpush("cpu", "m1", "m2")
    assert db.queue_lengths(["cpu", "gpu"]) == {"cpu": 2, "gpu": 0}


def test_ping_raises_when_redis_is_gone():
    gone = Store(redis.Redis(unix_socket_path="/nonexistent/redis.sock", decode_responses=True))
    with pytest.raises(redis.ConnectionError):
        gone.ping()


def test_the_write_probe_says_why_writes_are_refused(db: Store):
    assert probe_writes(db) is None and probe_writes(db.r, db.p) is None
    db.r.config_set("maxmemory", 1)
    try:
        assert "Redis refuses writes" in (probe_writes(db) or "")
    finally:
        db.r.config_set("maxmemory", 0)
