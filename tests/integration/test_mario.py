"""Super Mario Bros on the cluster: real emulator episodes through real workers, per-level
boards, the rubric's table, replays that reproduce the stored result, an SB3 checkpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tasks.execute import execute_batch
from tasks.workloads import get_workload, validate_batch
from tests.integration.conftest import ROOT, arena

pytestmark = pytest.mark.integration


def embedded_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return {**env, "ARENA_DATA_DIR": str(data_dir), "ARENA_WORKERS": "2", "PYTHONPATH": str(ROOT)}


def small_spec(**overrides: object) -> dict:
    spec: dict = {
        "workload": "mario",
        "agents": ["right", "jump-right", "random"],
        "items": ["1-1", "full-game"],
        "protocol": {"episodes": 3, "seed": 5},
        "params": {"frame_skip": 4, "action_set": "right_only", "sticky_p": 0.25, "max_steps": 300},
    }
    spec.update(overrides)
    return spec


def test_a_mario_batch_on_the_embedded_cluster(tmp_path: Path):
    spec = small_spec()
    path = tmp_path / "mario.json"
    path.write_text(json.dumps(spec))
    env = embedded_env(tmp_path / "data")
    ran = arena("run", str(path), "--json", env=env)
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["leaderboards"] == ["mario-1-1", "mario-full-game"]
    assert report["counts"] == {"total": 18, "completed": 18, "errors": 0}
    # The cluster's numbers are the in-process run's: same seeds, same episodes.
    batch = validate_batch(spec)
    reduction = get_workload("mario").reduce(batch, execute_batch(batch))
    expected = {f"{e.board}/{e.agent}": e.stats for e in reduction.entries}
    got = {
        f"{board}/{agent}": r["stats"]
        for board, rows in report["results"].items()
        for agent, r in rows.items()
    }
    assert got == json.loads(json.dumps(expected))
    level = report["results"]["mario-1-1"]["jump-right"]["stats"]
    for key in (
        "arena_score",
        "success_rate",
        "success_ci95",
        "mean_score",
        "std_score",
        "iqm_score",
        "iqm_ci95",
        "avg_steps",
        "avg_max_x",
        "protocol",
    ):
        assert key in level
    board = arena("leaderboard", "mario-1-1", env=env)
    assert "MARIO ARENA LEADERBOARD" in board.stdout and "IQM [95% CI]" in board.stdout
    full = arena("leaderboard", "mario-full-game", "--json", env=env)
    assert {e["agent"] for e in json.loads(full.stdout)["entries"]} == set(spec["agents"])
    # The best episode replays from its action log to the same result, as a GIF.
    gif = tmp_path / "best.gif"
    replay = arena(
        "mario",
        "replay",
        report["batch_id"][:8],
        "jump-right",
        "--level",
        "1-1",
        "--out",
        str(gif),
        env=env,
    )
    assert replay.returncode == 0, replay.stderr
    assert "replay matches the stored result" in replay.stdout and gif.stat().st_size > 10_000
    missing = arena("mario", "replay", report["batch_id"], "luigi", env=env)
    assert missing.returncode == 2 and "no agent 'luigi'" in missing.stderr


def test_an_agent_that_raises_ends_its_episodes_as_errors(tmp_path: Path):
    spec = small_spec(
        agents=["right", {"name": "broken", "entry_point": "tests.integration.agents:crashing"}],
        items=["1-1"],
    )
    path = tmp_path / "mario.json"
    path.write_text(json.dumps(spec))
    ran = arena("run", str(path), "--json", env=embedded_env(tmp_path / "data"))
    assert ran.returncode == 1  # errors: exit 1 with the reasons, the batch complete
    assert "3 of 6 units failed" in ran.stderr
    rows = json.loads(ran.stdout)["results"]["mario-1-1"]
    assert rows["broken"]["stats"]["failed"] == 3 and rows["broken"]["rank"] == 2


def test_an_sb3_checkpoint_plays_through_the_cluster(tmp_path: Path):
    if not os.environ.get("CI"):  # CI installs the sb3 extra: there it must run
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    from tests.mario.sb3_models import build_checkpoint

    checkpoint = build_checkpoint(tmp_path / "ppo.zip", resize=84, frame_stack=4)
    agent = {
        "name": "ppo",
        "sb3": str(checkpoint),
        "device": "cpu",
        "preprocess": {"grayscale": True, "resize": 84, "frame_stack": 4},
    }
    spec = small_spec(agents=["right", agent], items=["1-1"], protocol={"episodes": 2, "seed": 1})
    path = tmp_path / "mario.json"
    path.write_text(json.dumps(spec))
    written = tmp_path / "report.json"
    ran = arena(
        "run",
        str(path),
        "--json",
        "--output-path",
        str(written),
        env=embedded_env(tmp_path / "data"),
    )
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert set(report["results"]["mario-1-1"]) == {"right", "ppo"}
    assert report["versions"]["agents"]["ppo"]["kind"] == "file"  # the checkpoint's hash
    # Each checkpoint unit says where it ran and how (docs/mario.md, "Same result on any device").
    units = json.loads(written.read_text())["units"]
    runtimes = [u["result"].get("runtime") for u in units if u["agent"] == "ppo"]
    assert len(runtimes) == 2 and all(r and r["device"] == "cpu" for r in runtimes), runtimes
    assert all(not r["tf32_cudnn"] and r["deterministic_algorithms"] for r in runtimes)
    assert not any("runtime" in u["result"] for u in units if u["agent"] == "right")
    # A unit's log holds what its agent printed, not gym's "unmaintained" notice (SB3 imports
    # gym when installed: it opened the log of each agent process's first unit).
    assert not any("Gym has been unmaintained" in u["log_tail"] for u in units), units


def test_a_cuda_agent_waits_on_the_gpu_queue(cluster_env, db, write_spec):
    """Routing checked on the broker itself (no GPU, no worker needed)."""
    agents = ["right", {"name": "big", "builtin": "random", "device": "cuda"}]
    spec = small_spec(agents=agents, items=["1-1"], protocol={"episodes": 2, "seed": 0})
    submitted = arena("submit", str(write_spec(spec)), env=cluster_env)
    assert submitted.returncode == 0, submitted.stderr
    # One unit per chunk, per episode: on each queue, one chunk in the broker (no worker yet:
    # the pool's smallest window) and one waiting in its pool (docs/architecture.md, "Sharing").
    assert (db.r.llen("gpu"), db.r.llen("cpu")) == (1, 1)
    pools = [(e.waiting_chunks, e.out_chunks) for q in ("gpu", "cpu") for e in db.pool_batches(q)]
    assert pools == [(1, 1), (1, 1)]
