"""One inference process per checkpoint per host (workers/sandbox/inference_host.py,
shared_agent.py; docs/mario.md, "Batching"): every worker process of a host asks the same host,
whose jailed child answers as a worker's own child would; the agent's faults stay the agent's,
the host's the host's; a batch on the cluster comes out the same shared or not. Run here on the
CPU (ARENA_SHARED_INFERENCE=always): on a GPU the same host holds the one CUDA context
(bench/gpu_host.py measures it)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")
if not os.environ.get("CI"):  # CI installs the sb3 extra: there it must run
    pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")

from bench._batching import record_observations
from tests.integration.conftest import arena
from tests.mario.sb3_models import build_checkpoint
from tests.needs import require_bwrap
from workers.mario.protocol import action_names
from workers.mario.sb3 import BATCH_KEY, SEED_KEY, load_checkpoint_agent
from workers.sandbox.agent_process import AgentTimedOut
from workers.sandbox.agent_sandbox import (
    AgentLimits,
    AgentSandboxUnavailable,
    AgentSource,
    check_gpu_reached,
    untrusted_agent,
)
from workers.sandbox.base import SandboxUnavailable
from workers.sandbox.inference_host import MARK, HostBroken, run_dir
from workers.sandbox.shared_agent import CONNECTIONS, shared_agent

ACTIONS = action_names("right_only")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_checkpoint(tmp_path_factory.mktemp("sb3") / "ppo", seed=1, learn_steps=256)


@pytest.fixture(scope="module")
def observations() -> np.ndarray:
    return record_observations(48)


@pytest.fixture
def limits(tmp_path: Path) -> Iterator[AgentLimits]:
    """Limits of this test's own (the host's key holds them: no other test's host answers)."""
    require_bwrap()
    yield AgentLimits(data_dir=tmp_path / "data")
    CONNECTIONS.clear()


def hosts_of(path: Path) -> list[int]:
    """The live inference hosts whose checkpoint is `path`."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if MARK in line and json.dumps(str(path))[1:-1] in line:
            found.append(int(pid))
    return found


def ask_host(path: str, data_dir: str, rows: list[int], queue: Any) -> None:
    """In a process of its own: its rows of the observations, as the host answers them."""
    source, limits = AgentSource(checkpoint=path), AgentLimits(data_dir=Path(data_dir))
    seen = record_observations(48)
    with shared_agent(source, None, limits, step_timeout_s=60, idle_s=5) as agent:
        agent.reset(seed=0, actions=ACTIONS)
        answers = [agent.act({BATCH_KEY: seen[i : i + 8], SEED_KEY: i}) for i in rows]
    queue.put((rows, answers, agent.host_pid))


def test_every_worker_process_asks_one_host_which_answers_as_its_own_child_would(
    checkpoint: Path, observations: np.ndarray, limits: AgentLimits
) -> None:
    expected = load_checkpoint_agent(
        str(checkpoint), grayscale=True, resize=84, frame_stack=4, device="cpu"
    ).act_batch(observations)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    parts = [[0, 24], [8, 32], [16, 40]]
    workers = [
        context.Process(target=ask_host, args=(str(checkpoint), str(limits.data_dir), rows, queue))
        for rows in parts
    ]
    for worker in workers:
        worker.start()
    answered = [queue.get(timeout=180) for _ in workers]
    for worker in workers:
        worker.join(30)
    assert len({host for _, _, host in answered}) == 1  # three processes, one host
    for rows, answers, _ in answered:
        assert answers == [expected[i : i + 8] for i in rows]
    host = answered[0][2]
    assert hosts_of(checkpoint) == [host]
    deadline = time.monotonic() + 30  # idle_s 5 after its last client left: it goes
    while hosts_of(checkpoint) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert hosts_of(checkpoint) == []


def a_new_host_answers(
    source: AgentSource, limits: AgentLimits, observations: np.ndarray, old: Any
) -> None:
    """The next group's host is another than `old`, and it answers."""
    with shared_agent(source, None, limits, step_timeout_s=60, idle_s=5) as agent:
        assert agent.host_pid not in (None, old)
        assert len(agent.act({BATCH_KEY: observations[:4], SEED_KEY: 0})) == 4


def test_a_timed_out_child_is_the_agents_fault_and_the_next_group_gets_a_new_host(
    checkpoint: Path, observations: np.ndarray, limits: AgentLimits
) -> None:
    source = AgentSource(checkpoint=str(checkpoint))
    with shared_agent(source, None, limits, step_timeout_s=0.0001, idle_s=5) as agent:
        first = agent.host_pid
        with pytest.raises(AgentTimedOut, match="per-step timeout") as raised:
            for _ in range(20):  # a pass this short: the first that is not answered in time
                agent.act({BATCH_KEY: observations[:48], SEED_KEY: 0})
        assert not isinstance(raised.value, SandboxUnavailable)  # the agent's, not the host's
    a_new_host_answers(source, limits, observations, first)


def test_a_killed_host_is_an_infrastructure_error_and_the_next_group_starts_another(
    checkpoint: Path, observations: np.ndarray, limits: AgentLimits
) -> None:
    source = AgentSource(checkpoint=str(checkpoint))
    with shared_agent(source, None, limits, step_timeout_s=60, idle_s=5) as agent:
        first = agent.host_pid
        assert isinstance(first, int)
        os.kill(first, signal.SIGKILL)
        with pytest.raises(HostBroken, match="stopped answering"):
            agent.act({BATCH_KEY: observations[:4], SEED_KEY: 0})
    a_new_host_answers(source, limits, observations, first)


def test_a_socket_folder_others_may_enter_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    base = tempfile.mkdtemp(prefix="arena-t-", dir="/tmp")
    monkeypatch.setattr(tempfile, "tempdir", base)
    folder = run_dir()
    assert folder.parent == Path(base) and folder.stat().st_mode & 0o777 == 0o700
    folder.chmod(0o755)  # another user could put a socket there that answers what it likes
    with pytest.raises(HostBroken, match="not a folder private to this user"):
        run_dir()


def spec(path: Path, board: str) -> dict[str, Any]:
    return {
        "workload": "mario",
        "leaderboard": board,
        "agents": ["right", {"name": "ppo", "sb3": str(path)}],
        "items": ["1-1"],
        "protocol": {"episodes": 8, "seed": 5},
        "params": {"sticky_p": 0.25, "max_steps": 150, "inference_batch": 4},
    }


def run(tmp_path: Path, checkpoint: Path, mode: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env |= {
        "ARENA_DATA_DIR": str(tmp_path / f"data-{mode}"),
        "ARENA_SHARED_INFERENCE": mode,
        "ARENA_INFERENCE_IDLE_S": "20",
    }
    path = tmp_path / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(spec(checkpoint, f"shared-{mode}")))
    report = tmp_path / f"{mode}.json"
    ran = arena("run", str(path), "--workers", "2", "--json", "--output-path", str(report), env=env)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return json.loads(report.read_text())


def test_a_batch_on_the_cluster_is_the_same_shared_or_not(tmp_path: Path, checkpoint: Path) -> None:
    require_bwrap()
    alone = run(tmp_path, checkpoint, "never")
    assert hosts_of(checkpoint) == []
    shared = run(tmp_path, checkpoint, "always")
    assert len(hosts_of(checkpoint)) == 1  # two worker processes, one host (idle for 20 s)

    def outcomes(report: dict[str, Any]) -> list[Any]:
        units = sorted(report["units"], key=lambda u: (u["agent"], u["episode"]))
        # All of each result but its wall time.
        return [(u["agent"], u["status"], u["reason"], {**u["result"], "wall_s": 0}) for u in units]

    assert [u[1] for u in outcomes(shared)] == ["ok"] * 16
    assert outcomes(shared) == outcomes(alone)
    for pid in hosts_of(checkpoint):
        os.kill(pid, signal.SIGTERM)


def test_a_cuda_checkpoint_the_jail_leaves_on_the_cpu_is_the_hosts_failing(
    checkpoint: Path, limits: AgentLimits
) -> None:
    """On a host with a GPU, a `device: cuda` checkpoint whose jail did not get CUDA would play
    on the CPU: another device's results, slowly. That is refused as the host's failing."""
    source = AgentSource(checkpoint=str(checkpoint), device="cuda")
    with untrusted_agent(source, None, limits, step_timeout_s=60) as jailed:
        made = {"runtime": jailed.runtime}  # no GPU here: cuda plays on the cpu, as documented
    assert made["runtime"]["device"] == "cpu"
    check_gpu_reached(source, made, [])  # a host without a GPU: allowed
    with pytest.raises(AgentSandboxUnavailable, match="did not give it to the checkpoint"):
        check_gpu_reached(source, made, [Path("/dev/nvidia0")])
    assert issubclass(AgentSandboxUnavailable, SandboxUnavailable)  # an infrastructure error
    check_gpu_reached(source, {"runtime": {"device": "cuda:0"}}, [Path("/dev/nvidia0")])
    cpu = AgentSource(checkpoint=str(checkpoint), device="cpu")
    check_gpu_reached(cpu, made, [Path("/dev/nvidia0")])  # asked for the cpu: the cpu it is


def test_a_checkpoint_that_does_not_load_fails_as_it_does_in_its_own_child(
    tmp_path: Path, limits: AgentLimits
) -> None:
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"not a zip at all")
    source = AgentSource(checkpoint=str(broken))
    # Whatever it raises in its own child, the same from the shared host.
    with (
        pytest.raises(Exception) as alone,
        untrusted_agent(source, None, limits, step_timeout_s=60),
    ):
        pass
    with (
        pytest.raises(Exception) as shared,
        shared_agent(source, None, limits, step_timeout_s=60, idle_s=5),
    ):
        pass
    assert (type(shared.value).__name__, str(shared.value)) == (
        type(alone.value).__name__,
        str(alone.value),
    )
    assert not isinstance(shared.value, SandboxUnavailable)  # the agent's error, not the host's
