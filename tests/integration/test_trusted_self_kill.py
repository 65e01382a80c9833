"""A trusted agent that ends the worker it runs in (issue 34, finding 5; tasks/trusted_deaths.py).

Where no jail starts and ARENA_TRUST_AGENTS=true, agents run in the worker's own process: one
that exits, SIGKILLs itself or segfaults takes the worker with it. On c3f317a each such unit was
an infrastructure error after ARENA_MAX_DELIVERIES (3) deaths, the batch ended `incomplete` and
no board was written: the well-behaved agents lost their evaluation to one bad agent. Now the
second death is the agent's error (AgentProcessDied), the batch ends `done` with a board, and a
single death by chance is forgiven (the unit runs again and scores).
"""

from __future__ import annotations

import pytest

from tasks.execute import execute_batch
from tasks.trusted_deaths import blamed_on_agent
from tasks.workloads import validate_batch
from tasks.workloads.base import Unit
from tests.integration.conftest import arena, bandit_spec, wait_finished
from tests.workers.jails import NO_BWRAP, no_jail_here

pytestmark = pytest.mark.integration

GOOD = [
    "ucb1",
    "greedy",
    {"name": "kills-once", "entry_point": "tests.integration.agents:kills_once"},
]
BAD = {
    "exits": "tests.integration.agents:process_killer",  # os._exit(1)
    "sigkills": "tests.integration.agents:self_sigkiller",  # os.kill(getpid(), SIGKILL)
    "segfaults": "tests.integration.agents:segfaulter",  # reads address 0
}


def test_a_trusted_agent_that_ends_its_worker_is_the_agents_error(
    cluster_env, db, workers, write_spec, tmp_path, monkeypatch
):
    agents = [*GOOD, *({"name": n, "entry_point": e} for n, e in BAD.items())]
    items = [{"name": "easy", "arms": [0.2, 0.5, 0.8]}]
    spec = bandit_spec(agents=agents, items=items, protocol={"episodes": 2, "seed": 4})
    spec["params"] = {"pulls": 50}
    env = {**cluster_env, "ARENA_TRUST_AGENTS": "true", **NO_BWRAP}
    env["ARENA_TEST_KILL_ONCE_DIR"] = str(tmp_path)
    workers.start(env, concurrency=2)
    submitted = arena("submit", str(write_spec(spec)), env=cluster_env)
    assert submitted.returncode == 0, submitted.stderr
    batch_id = submitted.stdout.strip()
    status = wait_finished(db, batch_id, timeout=120)
    assert status == "done", f"{db.batch(batch_id)}\n{workers.log_tail()}"
    results = db.unit_results(batch_id)
    assert len(results) == 12
    for name in BAD:
        died = [r for r in results.values() if r.agent == name]
        assert len(died) == 2
        for result in died:
            assert (result.status, result.error_kind) == ("error", "agent"), result
            assert result.reason.startswith("AgentProcessDied: the worker process died 2 times")
    # The good agents, the one whose worker died once by chance too, scored as if alone.
    for unit_id, expected in _alone(monkeypatch, items).items():
        stored = results[f"{batch_id}:{unit_id}"]
        assert stored.status == "ok", stored
        assert (stored.result["mean_reward"], stored.result["regret"]) == expected
    assert (tmp_path / "killed").exists()  # kills-once did end its worker, once
    board = {row.agent for row in db.leaderboard("it")}
    assert {"ucb1", "greedy", "kills-once"} <= board


def _alone(monkeypatch: pytest.MonkeyPatch, items: list[dict]) -> dict[str, tuple]:
    """The good agents' units run in this process (kills-once as the GreedyAgent it plays):
    unit id without the batch -> (mean reward, regret)."""
    agents = [*GOOD[:2], {"name": "kills-once", "entry_point": "workers.bandit:GreedyAgent"}]
    spec = bandit_spec(agents=agents, items=items, protocol={"episodes": 2, "seed": 4})
    spec["params"] = {"pulls": 50}
    with no_jail_here(monkeypatch, trust=True):
        results = execute_batch(validate_batch(spec))
    return {
        r.unit_id.split(":", 1)[1]: (r.result["mean_reward"], r.result["regret"]) for r in results
    }


def test_only_a_noted_unit_is_blamed_and_a_resubmission_forgets_the_note(db):
    """The rule on a real Redis: no note (a sandboxed agent, a built-in), no blame; a noted unit
    is forgiven its first death and blamed for its second; a retried unit starts unnoted."""
    unit = Unit(
        id="b1:bad:easy:0",
        batch_id="b1",
        workload="bandit",
        agent="bad",
        item="easy",
        episode=0,
        env_seed=1,
        agent_seed=2,
        time_limit_s=60,
        payload={},
    )
    assert blamed_on_agent(db, unit, attempts=3) is None  # two deaths, never noted
    db.r.sadd(db.keys.in_process("b1"), unit.id)
    assert blamed_on_agent(db, unit, attempts=1) is None  # its first run
    assert blamed_on_agent(db, unit, attempts=2) is None  # one death: forgiven
    blamed = blamed_on_agent(db, unit, attempts=3)
    assert blamed is not None and blamed.result.error_kind == "agent"
    assert blamed.result.reason.startswith("AgentProcessDied: the worker process died 2 times")
    db.reset_attempts("b1", [unit.id])  # a resubmission retrying it
    assert blamed_on_agent(db, unit, attempts=3) is None
