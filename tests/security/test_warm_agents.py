"""A warm agent jail carries nothing from one unit to the next, a process that hit a limit is
never reused, and a unit's agent has a CPU limit (issue 33, build rule 2; the "warm process" and
"jails have no CPU limit" findings). On a real cluster (password Redis, API token in the
workers' environment, one worker process, so every unit of an agent meets the same warm jail).

Before (c3f317a) a worker process kept each agent's jailed process between units and only
called its factory again: module globals, class attributes and files in /tmp lived on (an agent
could carry what it learnt in one episode into the next), a process that had run out of memory
was kept with what it held (2 GB resident after its unit failed), and nothing limited an
agent's CPU (a thread could spin for as long as the warm process lived). Now each unit gets a
new child of the jail's fork server (workers/agent_child.py) that imports the agent afresh, under
RLIMIT_CPU (ARENA_AGENT_CPU_S), and the jail's /tmp is put back as it was after each unit.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tasks.workloads.base import UnitResult
from tests.security.cluster import SecureCluster, give_to_workers, secure_cluster

pytestmark = pytest.mark.integration
CPU_S = 2  # ARENA_AGENT_CPU_S of this cluster
MEMORY_MB = 512  # ARENA_AGENT_MEMORY_MB of this cluster

AGENTS = '''
import os, threading, time

from workers.bandit import GreedyAgent

UNITS = 0  # how many units this module has served: 1 in a fresh process
HOARD = []  # what the hog holds


def resident_mb():
    status = open("/proc/self/status").read()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024


class Reporter(GreedyAgent):
    """Counts its units in module state, leaves a file in /tmp, and says so in the unit's log."""

    def __init__(self):
        global UNITS
        UNITS += 1
        self.carried = os.path.exists("/tmp/counter-was-here")
        open("/tmp/counter-was-here", "w").close()
        print(f"pid={os.getpid()} units={UNITS} carried={self.carried} rss={resident_mb()}")
        super().__init__()


class Counter(Reporter):
    """Fails a unit that is not its module's first, or finds the last unit's file."""

    def __init__(self):
        super().__init__()
        if UNITS > 1 or self.carried:
            raise RuntimeError(f"state carried over: unit {UNITS}, /tmp {self.carried}")


class Hog(Reporter):
    def reset(self, *, seed, n_arms):
        if n_arms == 3:
            while True:  # until the memory limit: a MemoryError, the agent's fault
                HOARD.append(bytearray(32 << 20))
        super().reset(seed=seed, n_arms=n_arms)


class Burner(GreedyAgent):
    def reset(self, *, seed, n_arms):
        print(f"pid={os.getpid()}")
        threading.Thread(target=self.spin, daemon=True).start()
        super().reset(seed=seed, n_arms=n_arms)

    def spin(self):
        while True:
            pass

    def act(self, observation):
        while True:  # waits, while its thread burns a core, until the CPU limit ends it
            time.sleep(0.05)
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    agents = Path(tempfile.mkdtemp(prefix="arena-warm-"))  # one the workers' user can read
    agents.chmod(0o755)
    (agents / "warm_agents.py").write_text(AGENTS)
    give_to_workers(agents)
    env = {"ARENA_AGENT_CPU_S": str(CPU_S), "ARENA_AGENT_MEMORY_MB": str(MEMORY_MB)}
    try:
        tmp_path = tmp_path_factory.mktemp("warm")
        with secure_cluster(tmp_path, env, paths=(agents,), concurrency=1) as running:
            yield running
    finally:
        shutil.rmtree(agents, ignore_errors=True)


def run(cluster: SecureCluster, agents: list[Any], arms: dict[str, int]) -> dict[str, UnitResult]:
    """One bandit batch (one chunk: its units run one after the other in one worker process)."""
    spec = {
        "workload": "bandit",
        "agents": agents,
        "items": [
            {"name": name, "arms": [round(0.1 + 0.8 * a / (n - 1), 3) for a in range(n)]}
            for name, n in arms.items()
        ],
        "params": {"pulls": 50},
    }
    batch_id = cluster.submit(spec)
    assert cluster.wait(batch_id, timeout=300) == "done", cluster.log_tail()
    return {f"{r.agent}/{r.item}": r for r in cluster.db.unit_results(batch_id).values()}


def printed(result: UnitResult) -> dict[str, str]:
    """The agent's `key=value` line in the unit's log."""
    line = next(x for x in (result.log_tail or "").splitlines() if x.startswith("pid="))
    return dict(part.split("=", 1) for part in line.split())


def test_every_unit_starts_as_a_fresh_process_would(cluster: SecureCluster) -> None:
    """Four units of an agent that counts its units in a module global and leaves a file in
    /tmp, one after the other in one worker process. Before: units 2-4 saw count 2, 3, 4 (and
    the file): RuntimeError. Now every unit sees count 1 and no file, in a process of its own."""
    agent = {"name": "counter", "entry_point": "warm_agents:Counter", "version": "1"}
    results = run(cluster, [agent], {"a": 2, "b": 2, "c": 2, "d": 2})
    assert {k: (r.status, r.reason) for k, r in results.items()} == {
        f"counter/{item}": ("ok", None) for item in "abcd"
    }
    seen = [printed(results[f"counter/{item}"]) for item in "abcd"]
    assert {(s["units"], s["carried"]) for s in seen} == {("1", "False")}
    assert len({s["pid"] for s in seen}) == 4


def test_a_process_that_ran_out_of_memory_is_not_reused(cluster: SecureCluster) -> None:
    """The hog fills its memory limit on its 3-armed unit (a MemoryError: the agent's fault)
    and keeps what it got in a module global. Before: its process was kept warm for the next
    unit, ~500 MB resident and the hoard still there. Now the next unit starts in a new process
    at the resident memory of a fresh one."""
    agent = {"name": "hog", "entry_point": "warm_agents:Hog", "version": "1"}
    results = run(cluster, [agent], {"a": 2, "m": 3, "z": 2})
    hit, after, first = results["hog/m"], results["hog/z"], results["hog/a"]
    assert (hit.status, hit.error_kind) == ("error", "agent"), hit.reason
    assert f"memory limit {MEMORY_MB} MB exceeded" in (hit.reason or ""), hit.reason
    assert (first.status, after.status) == ("ok", "ok"), after.reason
    assert printed(after)["pid"] not in {printed(hit)["pid"], printed(first)["pid"]}
    assert int(printed(after)["rss"]) < int(printed(first)["rss"]) + 20


def test_a_cpu_burner_is_ended_at_its_cpu_limit_as_the_agents_fault(
    cluster: SecureCluster,
) -> None:
    """A thread that spins while the agent waits in `act`. Before: no CPU limit: the move
    waited out the 10 s per-step timeout (AgentTimedOut) while the thread burned a core. Now the
    unit child is killed at ARENA_AGENT_CPU_S (2 s): the unit is the agent's error naming the
    limit, the other agent's unit and the worker process are untouched."""
    workers = cluster.worker_pids()
    agents = [
        {"name": "burner", "entry_point": "warm_agents:Burner", "version": "1"},
        {"name": "counter", "entry_point": "warm_agents:Counter", "version": "2"},
    ]
    results = run(cluster, agents, {"a": 2})
    burned = results["burner/a"]
    assert (burned.status, burned.error_kind) == ("error", "agent"), burned.reason
    reason = burned.reason or ""
    assert "AgentOutOfCPU" in reason and f"its limit is {CPU_S}s (ARENA_AGENT_CPU_S)" in reason
    assert "SIGXCPU" in reason or "SIGKILL" in reason, reason
    assert results["counter/a"].status == "ok", results["counter/a"].reason
    assert cluster.worker_pids() == workers
