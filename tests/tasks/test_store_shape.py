"""The core's shape (issue 21): every Redis key is built in tasks/keys.py, only the Store's
modules and tasks/broker.py talk to Redis, and every chunk message is cut by one function."""

from __future__ import annotations

import ast
from pathlib import Path

from tasks import submit, units
from tasks.workloads.base import Unit

TASKS = Path(__file__).resolve().parents[2] / "tasks"
# The modules that talk to Redis: the Store's parts and kombu's fence.
TALKERS = {"store.py", "store_base.py", "store_batches.py", "store_results.py"}
TALKERS |= {"store_boards.py", "store_flight.py", "store_sharing.py", "store_teams.py"}
TALKERS |= {"broker.py"}
TALKERS |= {"llm_services.py"}  # the `limits` library and redis-py locks on the Store's client


def modules() -> list[Path]:
    return sorted(p for p in TASKS.glob("*.py") if p.name != "__init__.py")


def test_only_the_store_and_the_broker_module_call_redis():
    for path in modules():
        if path.name in TALKERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            # `db.r.hget(...)`, `store.r.pipeline()`: a call on a Store's client
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
                assert node.value.attr != "r", f"{path.name}:{node.lineno} calls Redis"


def test_keys_are_built_only_in_the_keys_module():
    for path in modules():
        if path.name == "keys.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FormattedValue):
                # `f"{db.p}..."`, `f"{self.store.p}..."`: a key under the Store's prefix
                named = node.value
                prefix = isinstance(named, ast.Attribute) and named.attr in ("p", "prefix")
                assert not prefix, f"{path.name}:{node.lineno} builds a key under the prefix"


def _unit(index: int, queue: str) -> Unit:
    return Unit(
        id=f"b:a:i:{index}",
        batch_id="b",
        workload="bandit",
        agent="a",
        item="i",
        episode=index,
        env_seed=index,
        agent_seed=index,
        queue=queue,  # type: ignore[arg-type]  # a QueueName
        time_limit_s=1.0,
        payload={},
    )


def test_chunks_never_mix_queues():
    """A chunk's message goes to its first unit's queue: submission and the watchdog's
    requeue cut chunks with the same function, by queue."""
    assert submit.chunked is units.chunked
    mixed = [_unit(i, "gpu" if i % 2 else "cpu") for i in range(7)]
    chunks = units.chunked(mixed, 2)
    assert all(len({u.queue for u in chunk}) == 1 and len(chunk) <= 2 for chunk in chunks)
    assert sorted(u.id for chunk in chunks for u in chunk) == sorted(u.id for u in mixed)
