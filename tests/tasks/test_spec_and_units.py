"""Batch specs and expansion: same spec, same work; seeds that do not depend on run order."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import time

import pytest

from tasks.execute import _Shutdown, deadline, execute_unit
from tasks.settings import ArenaSettings, celery_url, current_settings
from tasks.spec import derive_seed
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch, workloads
from tasks.workloads.base import Workload
from tests.integration.conftest import bandit_spec
from tests.workers.jails import no_jail_here


def test_same_spec_same_batch_id_and_units():
    first, second = validate_batch(bandit_spec()), validate_batch(copy.deepcopy(bandit_spec()))
    assert first.batch_id == second.batch_id
    workload = get_workload("bandit")
    assert workload.expand(first) == workload.expand(second)
    changed = validate_batch(bandit_spec(protocol={"episodes": 20, "seed": 12}))
    assert changed.batch_id != first.batch_id


def test_unit_ids_follow_the_design_and_are_unique():
    batch = validate_batch(bandit_spec())
    units = get_workload("bandit").expand(batch)
    assert len(units) == 5 * 2 * 20
    assert len({u.id for u in units}) == len(units)
    assert units[0].id == f"{batch.batch_id}:random:easy:0"


def test_seeds_do_not_depend_on_the_order_of_agents_or_items():
    spec = bandit_spec()
    reordered = bandit_spec(agents=list(reversed(spec["agents"])), items=spec["items"][::-1])
    workload = get_workload("bandit")
    seeds = {
        (u.agent, u.item, u.episode): (u.env_seed, u.agent_seed)
        for u in workload.expand(validate_batch(spec))
    }
    seeds_reordered = {
        (u.agent, u.item, u.episode): (u.env_seed, u.agent_seed)
        for u in workload.expand(validate_batch(reordered))
    }
    assert seeds == seeds_reordered


def test_every_agent_faces_the_same_environment_seed():
    units = get_workload("bandit").expand(validate_batch(bandit_spec()))
    by_item_episode: dict[tuple[str, int], set[int]] = {}
    for u in units:
        by_item_episode.setdefault((u.item, u.episode), set()).add(u.env_seed)
    assert all(len(s) == 1 for s in by_item_episode.values())
    assert len({u.agent_seed for u in units}) == len(units)


def test_derive_seed_is_stable_and_spreads():
    assert derive_seed(7, "env", "easy", 0) == derive_seed(7, "env", "easy", 0)
    assert len({derive_seed(7, "env", "easy", e) for e in range(1000)}) == 1000
    assert 0 <= derive_seed(2**62, "x") < 2**63


def test_protocol_fingerprint_ignores_agents_and_board_name():
    base = validate_batch(bandit_spec())
    other_agents = validate_batch(bandit_spec(agents=["ucb1"], leaderboard="x"))
    other_pulls = validate_batch(bandit_spec(params={"pulls": 7}))
    assert base.protocol_fingerprint == other_agents.protocol_fingerprint
    assert base.protocol_fingerprint != other_pulls.protocol_fingerprint


def test_json_and_yaml_specs_are_the_same_spec(tmp_path):
    from tasks.spec import load_spec_file

    (tmp_path / "s.json").write_text(json.dumps(bandit_spec()))
    assert validate_batch(load_spec_file(tmp_path / "s.json")).batch_id == (
        validate_batch(bandit_spec()).batch_id
    )


def test_validation_errors_name_the_field():
    with pytest.raises(InputError, match=r"^protocol\.episodes: "):
        validate_batch(bandit_spec(protocol={"episodes": 0}))
    with pytest.raises(InputError, match=r"^workload: unknown workload 'chess' \(known: "):
        validate_batch(bandit_spec(workload="chess"))
    with pytest.raises(InputError, match=r"^items\[0\]\.arms: "):
        validate_batch(bandit_spec(items=[{"name": "one-arm", "arms": [0.5]}]))


def test_every_workload_module_implements_the_interface():
    assert "bandit" in workloads()
    for name, workload in workloads().items():
        assert isinstance(workload, Workload) and workload.name == name
        assert workload.chunk_size >= 1


def test_settings_read_the_arena_prefix(monkeypatch):
    monkeypatch.setenv("ARENA_REDIS_URL", "redis://127.0.0.1:6390/2")
    monkeypatch.setenv("ARENA_WORKERS", "3")
    settings = ArenaSettings()
    assert (settings.redis_url, settings.workers) == ("redis://127.0.0.1:6390/2", 3)
    assert celery_url("unix:///tmp/r.sock") == "redis+socket:///tmp/r.sock"
    assert celery_url("redis://h:1/0") == "redis://h:1/0"


def test_the_cached_settings_follow_the_environment(monkeypatch):
    """Workers parse their settings once, not per chunk; a changed variable is still seen."""
    monkeypatch.setenv("ARENA_MAX_DELIVERIES", "5")
    first = current_settings()
    assert first.max_deliveries == 5 and current_settings() == first
    first.max_deliveries = 9  # a caller's copy: the cached one is not changed through it
    assert current_settings().max_deliveries == 5
    monkeypatch.setenv("arena_max_deliveries", "7")  # pydantic-settings ignores the case
    monkeypatch.delenv("ARENA_MAX_DELIVERIES")
    assert current_settings().max_deliveries == ArenaSettings().max_deliveries == 7


def test_deadline_interrupts_a_stuck_unit():
    unit = get_workload("bandit").expand(
        validate_batch(
            bandit_spec(
                agents=[{"name": "s", "entry_point": "tests.integration.agents:sleepy"}],
                protocol={"episodes": 1, "unit_time_limit_s": 0.3},
            )
        )
    )[0]
    started = time.monotonic()
    result = execute_unit(get_workload("bandit"), unit).result
    assert time.monotonic() - started < 2
    assert (result.status, result.reason) == ("error", "time limit of 0.3s exceeded")
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None, signal.default_int_handler)


def test_deadline_is_cleared_after_a_fast_unit():
    with deadline(0.2):
        pass
    time.sleep(0.3)  # no stray alarm fires


def test_system_exit_is_an_agent_fault_unless_the_worker_is_stopping(monkeypatch):
    # In the worker's own process (no jail here, agents trusted): a sandboxed agent's SystemExit
    # ends only its own process (tests/workers/test_agent_sandbox.py).
    with no_jail_here(monkeypatch, trust=True):
        _system_exit_in_the_worker()


def _system_exit_in_the_worker() -> None:
    unit = get_workload("bandit").expand(
        validate_batch(
            bandit_spec(
                agents=[{"name": "q", "entry_point": "tests.integration.agents:exiting"}],
                protocol={"episodes": 1},
            )
        )
    )[0]
    result = execute_unit(get_workload("bandit"), unit).result
    assert result.status == "error" and "SystemExit" in (result.reason or "")
    _Shutdown.requested = True
    try:
        with pytest.raises(SystemExit):
            execute_unit(get_workload("bandit"), unit)
    finally:
        _Shutdown.requested = False
    assert os.getpid()  # still here


@pytest.mark.parametrize(
    ("entry_point", "expected"),
    [
        # A bare MemoryError() printed as "MemoryError: " and nothing else (issue 20, item 4).
        ("silent_memory_error", r"^MemoryError: out of memory \(.*memory"),
        ("crashing", r"^RuntimeError: \S"),
    ],
)
def test_an_error_reason_is_never_empty(monkeypatch, entry_point: str, expected: str):
    agents = [{"name": "q", "entry_point": f"tests.integration.agents:{entry_point}"}]
    unit = get_workload("bandit").expand(
        validate_batch(bandit_spec(agents=agents, protocol={"episodes": 1}))
    )[0]
    with no_jail_here(monkeypatch, trust=True):  # in this process: the exception as raised
        result = execute_unit(get_workload("bandit"), unit).result
    assert result.status == "error"
    assert re.search(expected, result.reason or ""), result.reason
