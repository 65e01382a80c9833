"""A slow but legal checkpoint on the shared inference host (issue 33, finding 2): one host per
checkpoint answers every worker process's lockstep batches one at a time, so a group's request
waits behind the others'. Queueing is the host's time, not the agent's: the host starts the
child's per-step timeout when it starts a request and tells a waiting client every second that
it lives (workers/sandbox/host_wire.py); a client gives up only on a host silent for its step
timeout + ARENA_INFERENCE_SILENCE_S.

Attacked: a real SB3 checkpoint whose `predict` sleeps 1.6 s under its 2 s step timeout, three
of its lockstep groups asking one host at once (each request waits ~3.2 s behind the other two,
4.8 s in all), the silence bound at 2 s: its client waits past timeout + silence (4 s). On
c3f317a a client waited step timeout + 30 s from sending, whatever was ahead of it (the
issue's run: 9 s sleeps, 5 groups queued), and took its own queueing for a host that "stopped
answering: timed out": HostBroken, an infrastructure error, the batch `incomplete`, no board.
Measured: c3f317a's client with its margin set to 2 s, three groups as in the second test
below: two passes answered in 1.9 s and 3.5 s, then all three groups ended `HostBroken: ...
stopped answering: timed out`. Now every unit is scored, the batch `done`, the board written.

A checkpoint that sleeps past its step timeout ends its units as the agent's fault, naming the
per-step timeout: the request that timed out is AgentTimedOut, those queued behind it (the child
is ended) AgentProcessDied. Before, such a queued request made the host encode its batch into
the ended child's closed shared memory, and the host hung up on it: HostBroken ("the other side
closed the connection"), the batch `incomplete`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.needs import require_bwrap
from tests.security.cluster import SecureCluster, give_to_workers, secure_cluster

pytestmark = pytest.mark.integration

STEP_TIMEOUT_S = 2
SILENCE_S = 2  # ARENA_INFERENCE_SILENCE_S: the least it may be
LEGAL_SLEEP_S = 1.6  # under the step timeout
LATE_SLEEP_S = 3.0  # past it
WORKERS = 3  # worker processes, each playing one lockstep group at a time


def needs_sb3() -> None:
    pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")
    if not os.environ.get("CI"):
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")


def slow_checkpoint(path: Path, sleep_s: float) -> Path:
    """A real SB3 checkpoint whose every forward pass sleeps `sleep_s` first (code in its
    pickles, as any checkpoint may carry)."""
    from tests.mario.sb3_models import build_checkpoint, with_pickle_payload

    code = f"""
import time
from workers.mario import sb3

_act_batch = sb3.CheckpointAgent.act_batch

def act_batch(self, batch):
    time.sleep({sleep_s})
    return _act_batch(self, batch)

sb3.CheckpointAgent.act_batch = act_batch
"""
    checkpoint = build_checkpoint(path)
    return with_pickle_payload(checkpoint, checkpoint, code)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SecureCluster]:
    needs_sb3()
    env = {
        "ARENA_SHARED_INFERENCE": "always",
        "ARENA_INFERENCE_IDLE_S": "3",
        "ARENA_INFERENCE_SILENCE_S": str(SILENCE_S),
    }
    with secure_cluster(tmp_path, env, concurrency=WORKERS) as running:
        yield running


def spec(name: str, checkpoint: Path, groups: int, max_steps: int) -> dict[str, Any]:
    return {
        "workload": "mario",
        "leaderboard": name,
        "agents": [{"name": name, "sb3": str(checkpoint), "timeout_s": STEP_TIMEOUT_S}],
        "items": ["1-1"],
        "protocol": {"episodes": 2 * groups, "seed": 3, "unit_time_limit_s": 300},
        "params": {"frame_skip": 4, "max_steps": max_steps, "inference_batch": 2},
    }


def reasons(cluster: SecureCluster, batch_id: str) -> list[tuple[str, str | None, str]]:
    results = cluster.db.unit_results(batch_id).values()
    return [(r.status, r.error_kind, r.reason or "") for r in results]


def test_a_slow_checkpoint_is_scored_and_a_late_one_is_the_agents_fault(
    cluster: SecureCluster,
) -> None:
    legal = slow_checkpoint(cluster.folder / "legal", LEGAL_SLEEP_S)
    late = slow_checkpoint(cluster.folder / "late", LATE_SLEEP_S)
    give_to_workers(cluster.folder)

    batch_id = cluster.submit(spec("legal", legal, groups=WORKERS, max_steps=5))
    assert cluster.wait(batch_id, timeout=300) == "done", reasons(cluster, batch_id)
    assert reasons(cluster, batch_id) == [("ok", None, "")] * 2 * WORKERS
    board = cluster.db.leaderboard("legal-1-1")
    assert [row.agent for row in board] == ["legal"]

    batch_id = cluster.submit(spec("late", late, groups=2, max_steps=3))
    assert cluster.wait(batch_id, timeout=300) == "done", reasons(cluster, batch_id)
    for result in cluster.db.unit_results(batch_id).values():
        reason = result.reason or ""
        assert (result.status, result.error_kind) == ("error", "agent"), reason
        assert f"no answer within {STEP_TIMEOUT_S}s (per-step timeout)" in reason, reason
        assert "HostBroken" not in reason


def test_a_request_queued_past_timeout_and_silence_is_answered(tmp_path: Path) -> None:
    """Three groups ask one host at once, each pass 1.6 s: a request waits for the two ahead
    of it, longer than its step timeout + the silence bound (what c3f317a's client waited),
    and is answered, because the host said meanwhile that it waits."""
    needs_sb3()
    require_bwrap()
    import numpy as np

    from tests.security.test_hostile_agents import kill_hosts
    from workers.mario.protocol import action_names
    from workers.mario.sb3 import BATCH_KEY, SEED_KEY
    from workers.sandbox.agent_sandbox import AgentLimits, AgentSource
    from workers.sandbox.shared_agent import CONNECTIONS, shared_agent

    source = AgentSource(checkpoint=str(slow_checkpoint(tmp_path / "legal", LEGAL_SLEEP_S)))
    limits = AgentLimits(data_dir=tmp_path / "data")
    batch = {BATCH_KEY: np.zeros((2, 4, 84, 84), np.uint8), SEED_KEY: 0}
    waits: list[float] = []
    failures: list[BaseException] = []
    start = threading.Barrier(WORKERS)

    def group() -> None:
        try:
            with shared_agent(
                source, None, limits, step_timeout_s=STEP_TIMEOUT_S, idle_s=2, silence_s=SILENCE_S
            ) as agent:
                agent.reset(seed=0, actions=action_names("right_only"))
                start.wait(120)
                for _ in range(3):
                    sent = time.monotonic()
                    assert len(agent.act(batch)) == 2
                    waits.append(time.monotonic() - sent)
        except BaseException as failed:
            failures.append(failed)

    threads = [threading.Thread(target=group) for _ in range(WORKERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(240)
    finally:
        CONNECTIONS.clear()
        kill_hosts(tmp_path / "data")
    assert failures == []
    assert len(waits) == 3 * WORKERS
    assert max(waits) > STEP_TIMEOUT_S + SILENCE_S, waits  # c3f317a's client had given up
