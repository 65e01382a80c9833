"""The work inside one unit is bounded (issue 33, finding 4; tasks/workloads/unit_work.py).

On c3f317a `POST /batches` of an Alympics spec with `params.episodes: 100000` was accepted
(202): ARENA_MAX_UNITS counts units, not the work in one, and one match set of the Prisoner's
Dilemma then peaked at 2,763 MB in a worker; ARENA_UNIT_MEMORY_MB was 0 (no limit) by default,
so a unit that grew took the worker and the units it held to the OOM killer, and a process that
hit an operator's limit ran the next units too. Now every count that multiplies a unit's work
has a ceiling checked at submission (a 422 naming the field and the numbers, exit 2 in one line
from the CLI, nothing stored), and every unit runs under its workload's default memory limit in
a process that is replaced once a unit ran out of memory in it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from tasks.store import Store
from tasks.workloads import validate_batch
from tasks.workloads.base import UnitResult
from tasks.workloads.unit_work import UNIT_MEMORY_MB
from tests.api.conftest import AUTH
from tests.cli.test_malformed_input import arena
from tests.integration.conftest import ROOT
from tests.security.cluster import SecureCluster, give_to_workers, secure_cluster
from tests.security.test_hostile_specs import snapshot
from tests.workers.jails import NO_BWRAP

pytestmark = pytest.mark.integration
GAMES = ["prisoners_dilemma", "public_goods", "auction", "colonel_blotto", "congestion"]


def alympics(episodes: int) -> dict[str, Any]:
    return {
        "workload": "alympics",
        "agents": ["builtin"],
        "items": GAMES,
        "params": {"episodes": episodes},
    }


def bandit(pulls: int = 1000, arms: int = 2, agent: str = "ucb1") -> dict[str, Any]:
    arm_list = [round(0.1 + 0.8 * a / max(arms - 1, 1), 6) for a in range(arms)]
    return {
        "workload": "bandit",
        "agents": [agent],
        "items": [{"name": "b", "arms": arm_list}],
        "params": {"pulls": pulls},
    }


def mario(max_steps: int, frame_skip: int = 4, inference_batch: int = 1) -> dict[str, Any]:
    params = {"max_steps": max_steps, "frame_skip": frame_skip, "inference_batch": inference_batch}
    return {"workload": "mario", "agents": ["right"], "items": ["1-1"], "params": params}


# (spec, what the one line must say: the field first, then the numbers)
OVER = {
    "alympics episodes (the finding)": (
        alympics(100_000),
        ["params.episodes: 100,000 is over the ceiling of 1,000 episodes per unit"],
    ),
    "alympics episodes by one": (alympics(1_001), ["params.episodes: 1,001", "1,000"]),
    "bandit pulls": (
        bandit(pulls=10_000_000),
        ["params.pulls: 10,000,000 is over the ceiling of 1,000,000 pulls per unit"],
    ),
    "bandit arms": (bandit(arms=1_001), ["items[0].arms: 1,001 arms", "ceiling of 1,000"]),
    "bandit pulls × arms": (
        bandit(pulls=1_000_000, arms=11),
        ["params.pulls: 1,000,000 pulls × 11 arms of items[0] = 11,000,000", "10,000,000"],
    ),
    "mario frames": (
        mario(1_000_000, frame_skip=60),
        ["params.max_steps: 1,000,000 steps × frame_skip 60 = 60,000,000 frames", "576,000"],
    ),
    "mario lockstep group": (
        mario(4_500, frame_skip=5, inference_batch=32),
        ["params.max_steps:", "× inference_batch 32 = 720,000 frames", "576,000 frames"],
    ),
}
AT_CEILING = {
    "alympics": alympics(1_000),
    "bandit pulls": bandit(pulls=1_000_000, arms=10),
    "bandit arms": bandit(pulls=10_000, arms=1_000),
    "mario": mario(144_000, frame_skip=4),
    "mario lockstep group": mario(4_500, frame_skip=4, inference_batch=32),
}


@pytest.mark.parametrize("case", OVER)
def test_the_api_refuses_a_count_over_its_ceiling(case: str, client: TestClient, db: Store) -> None:
    spec, needles = OVER[case]
    before = snapshot(db)
    response = client.post("/batches", json=spec, headers=AUTH)
    assert response.status_code == 422, (response.status_code, response.text)
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail, detail
    assert all(needle in detail for needle in needles), detail
    assert snapshot(db) == before, "a refused spec changed what Redis holds"


@pytest.mark.parametrize("case", OVER)
def test_the_cli_refuses_a_count_over_its_ceiling_in_one_line(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARENA_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    monkeypatch.setenv("ARENA_REDIS_RETRY_S", "0")  # nor is it waited for
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "data"))
    spec, needles = OVER[case]
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    code, out, err = arena("run", str(path))
    assert code == 2 and "Traceback" not in out + err, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arena: error: "), err
    assert all(needle in lines[0] for needle in needles), lines[0]
    assert "cannot reach Redis" not in lines[0]
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("case", AT_CEILING)
def test_a_spec_at_the_ceilings_is_taken(case: str) -> None:
    validate_batch(AT_CEILING[case], asker="operator")


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_is_under_the_ceilings(path: Path, tmp_path: Path) -> None:
    spec = yaml.safe_load(path.read_text())
    if spec["workload"] == "race":  # its repository is made by a script, as its comment says
        repo = tmp_path / "race-repo"
        made = [sys.executable, str(ROOT / "examples" / "make_race_repo.py"), str(repo)]
        subprocess.run(made, check=True, capture_output=True, timeout=120)
        spec["repo"] = str(repo)
    validate_batch(spec, asker="operator")


MEASURE = textwrap.dedent(
    """
    import json, sys
    from tasks.execute import execute_unit, unit_memory
    from tasks.workloads import get_workload, validate_batch

    spec, wanted = json.loads(sys.argv[1]), sys.argv[2:]
    batch = validate_batch(spec, asker="operator")
    workload = get_workload(spec["workload"])
    for unit in workload.expand(batch):
        if unit.item.split("@")[0] not in wanted:
            continue
        with unit_memory(workload.memory_limit_mb(unit)):
            run = execute_unit(workload, unit)
        status = dict(line.split(":", 1) for line in open("/proc/self/status"))
        peak = int(status["VmPeak"].split()[0]) >> 10
        print(json.dumps([unit.item, run.result.status, run.result.reason, peak]))
    """
)


@pytest.mark.parametrize(
    ("spec", "wanted"),
    [
        (alympics(1_000), ["prisoners_dilemma", "public_goods"]),  # the most moves per episode
        (bandit(pulls=10_000, arms=1_000, agent="thompson"), ["b"]),  # the most arms
    ],
    ids=["alympics", "bandit"],
)
def test_a_unit_at_the_ceilings_stays_well_under_its_memory_limit(
    spec: dict[str, Any], wanted: list[str]
) -> None:
    """Real units, each in a fresh process under its workload's default limit: all end ok,
    and the process's address space peaks under half the limit (room for what a busier worker
    process holds: its threads, Redis connections, earlier units' emulators)."""
    limit = UNIT_MEMORY_MB[spec["workload"]]
    measured = subprocess.run(
        [sys.executable, "-c", MEASURE, json.dumps(spec), *wanted],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rows = [json.loads(line) for line in measured.stdout.splitlines()]
    assert rows, measured.stderr
    for item, status, reason, peak in rows:
        assert status == "ok", (item, reason)
        assert peak < limit / 2, f"{item}: address space peaked at {peak} MB (limit {limit} MB)"


HOG = '''
"""A bandit agent that tells its process, and on a 3-armed bandit wants 3 GiB at once."""
import os

from workers.bandit import GreedyAgent


class Hog(GreedyAgent):
    def reset(self, *, seed, n_arms):
        print(f"pid={os.getpid()}")
        if n_arms == 3:
            self.hoard = bytearray(3 << 30)
        super().reset(seed=seed, n_arms=n_arms)


def make():
    return Hog()
'''


def pid_of(log_tail: str | None) -> int:
    line = next(line for line in (log_tail or "").splitlines() if line.startswith("pid="))
    return int(line.removeprefix("pid="))


def test_a_unit_over_the_default_memory_limit_fails_alone_and_its_process_is_replaced(
    tmp_path: Path,
) -> None:
    """A trusted agent in the worker's own process (no jail on this worker) asks for 3 GiB on
    the second of three units of one chunk, under bandit's default limit (1,024 MB; nothing
    set). Before (c3f317a): no limit by default, so the allocation succeeded and the unit was
    `ok` (and under an operator's ARENA_UNIT_MEMORY_MB the process that hit the limit ran the
    chunk's next unit). Now: that unit is the agent's error naming the limit, the unit after it
    runs in a new process, the batch is done."""
    agents = Path(tempfile.mkdtemp(prefix="arena-hog-"))  # one the workers' user can read
    agents.chmod(0o755)
    (agents / "hog_agent.py").write_text(HOG)
    give_to_workers(agents)
    env = {"ARENA_TRUST_AGENTS": "true", **NO_BWRAP}
    try:
        with secure_cluster(tmp_path, env, paths=(agents,), concurrency=1) as cluster:
            results, alive = run_hog(cluster)
    finally:
        shutil.rmtree(agents, ignore_errors=True)
    assert {item: r.status for item, r in results.items()} == {"a": "ok", "m": "error", "z": "ok"}
    failed = results["m"]
    assert failed.error_kind == "agent"
    assert "MemoryError" in (failed.reason or "") and "1,024 MB" in (failed.reason or "")
    assert "ARENA_UNIT_MEMORY_MB" in (failed.reason or ""), failed.reason
    first, hit, after = (pid_of(results[i].log_tail) for i in ("a", "m", "z"))
    assert first == hit, "the chunk's first two units ran in one process"
    assert after != hit and hit not in alive, "the process that ran out of memory was reused"


def run_hog(cluster: SecureCluster) -> tuple[dict[str, UnitResult], list[int]]:
    """Three units of one chunk (bandit: 10 to a chunk), the middle one on 3 arms."""
    spec = {
        "workload": "bandit",
        "agents": [{"name": "hog", "entry_point": "hog_agent:make", "version": "1"}],
        "items": [
            {"name": "a", "arms": [0.2, 0.8]},
            {"name": "m", "arms": [0.2, 0.5, 0.8]},
            {"name": "z", "arms": [0.3, 0.7]},
        ],
        "params": {"pulls": 100},
    }
    batch_id = cluster.submit(spec)
    assert cluster.wait(batch_id, timeout=120) == "done", cluster.log_tail()
    results = {r.item: r for r in cluster.db.unit_results(batch_id).values()}
    return results, cluster.worker_pids()


ALYMPICS_HOG = '''
"""An Alympics agent that wants 3 GiB at once for each move of the auction."""
from workers.games import BUILTIN


class Hog:
    def reset(self, *, game, player, seed):
        self.inner = BUILTIN[game]()
        self.inner.reset(game=game, player=player, seed=seed)

    def act(self, observation):
        if observation["game"] == "auction":
            self.hoard = bytearray(3 << 30)
        return self.inner.act(observation)


def make():
    return Hog()
'''


def test_a_run_in_the_clis_own_process_is_under_the_same_memory_limit(tmp_path: Path) -> None:
    """`arena game benchmark` without --cluster runs the units in the CLI's own process (the
    reference run), a trusted agent with no jail here. Before: no memory limit there, so the
    3 GiB were taken and the auction played. Now under Alympics' limit (2,048 MB) each of its
    moves is the agent's MemoryError (its match sets forfeited), and the other match sets are
    played in the same process."""
    (tmp_path / "alympics_hog.py").write_text(ALYMPICS_HOG)
    env = {**os.environ, "ARENA_TRUST_AGENTS": "true", **NO_BWRAP, "PYTHONPATH": str(tmp_path)}
    env.pop("ARENA_UNIT_MEMORY_MB", None)
    done = subprocess.run(
        [sys.executable, "-m", "arena.cli.main", "game", "benchmark", "--agent",
         "alympics_hog:make", "--episodes", "2", "--output", "json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    matches = json.loads(done.stdout)["matches"]
    failed = {m["item"]: m["reason"] for m in matches if m["status"] != "ok"}
    assert set(failed) == {"auction@shade", "auction@truthful"}, failed
    assert all("act failed: MemoryError" in reason for reason in failed.values()), failed
    assert len(matches) == 13
