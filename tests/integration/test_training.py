"""Evaluation during training (issue 25; docs/mario.md, "Evaluating while training"): PPO trains
on 1-1 with ArenaCallback, its checkpoints are evaluated on the embedded cluster while training
goes on, and the API's learning curve has one point per checkpoint, each equal to a separate
evaluation of that checkpoint (`arena run` of a spec naming all five, on another data folder)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from arena.embedded import embedded_redis
from arena.web.app import create_app
from tasks.settings import ArenaSettings
from tests.integration.conftest import ROOT, arena

pytestmark = pytest.mark.integration
PARAMS = {"frame_skip": 4, "action_set": "right_only", "max_steps": 100}
PREPROCESS = {"grayscale": True, "resize": 48, "frame_stack": 2}
STEPS, EVERY = 5_000, 1_000


def test_checkpoints_are_evaluated_while_ppo_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not os.environ.get("CI"):  # CI installs the sb3 extra: there it must run
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList

    from arena.integrations.sb3 import ArenaCallback, MarioEnv
    from workers.mario.sb3 import MarioObservation

    data = tmp_path / "data"
    monkeypatch.delenv("ARENA_REDIS_URL", raising=False)
    monkeypatch.setenv("ARENA_DATA_DIR", str(data))
    monkeypatch.setenv("ARENA_WORKERS", "2")

    class LastStep(BaseCallback):
        at = 0.0

        def _on_step(self) -> bool:
            LastStep.at = time.time()
            return True

    torch.set_num_threads(1)
    env = MarioObservation(MarioEnv("1-1", PARAMS), **PREPROCESS)
    model = PPO("CnnPolicy", env, n_steps=250, batch_size=50, n_epochs=1, seed=0, device="cpu")
    arena_cb = ArenaCallback(
        "ppo-a",
        every=EVERY,
        folder=tmp_path / "checkpoints",
        episodes=3,
        seed=7,
        params=PARAMS,
        preprocess=PREPROCESS,
    )
    started = time.time()
    model.learn(STEPS, callback=CallbackList([arena_cb, LastStep()]))
    trained = LastStep.at
    assert arena_cb.errors == []
    names = [f"ppo-a@{k}k" for k in range(1, 6)]
    assert [s.agent for s in arena_cb.submitted] == names
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        f"{n}.zip" for n in names
    ]

    with embedded_redis(data) as url:
        settings = ArenaSettings(redis_url=url, data_dir=data)
        with TestClient(create_app(settings)) as client:
            batches = [
                client.get(f"/batches/{s.batch_id}").json()["batch"] for s in arena_cb.submitted
            ]
            series = client.get("/leaderboards/mario-1-1/series/ppo-a").json()
    assert all(b["status"] == "done" for b in batches), batches
    # Evaluated while training went on: finished before its last step.
    during = [b for b in batches if b["finished_at"] < trained]
    assert len(during) >= 3, ([b["finished_at"] - started for b in batches], trained - started)
    points = series["points"]
    assert [p["agent"] for p in points] == names
    assert [p["steps"] for p in points] == [1000, 2000, 3000, 4000, 5000]
    assert [p["batch"] for p in points] == [s.batch_id for s in arena_cb.submitted]

    # Every checkpoint evaluated again, apart (one batch of all five, another data folder):
    # each point has its own evaluation's numbers.
    alone = {
        "workload": "mario",
        "agents": [
            {"name": n, "sb3": str(tmp_path / "checkpoints" / f"{n}.zip"), "preprocess": PREPROCESS}
            for n in names
        ],
        "items": ["1-1"],
        "protocol": {"episodes": 3, "seed": 7},
        "params": PARAMS,
    }
    spec = tmp_path / "alone.json"
    spec.write_text(json.dumps(alone))
    other = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    other |= {
        "ARENA_DATA_DIR": str(tmp_path / "other"),
        "ARENA_WORKERS": "2",
        "PYTHONPATH": str(ROOT),
    }
    ran = arena("run", str(spec), "--json", env=other)
    assert ran.returncode == 0, ran.stderr
    rows = json.loads(ran.stdout)["results"]["mario-1-1"]
    assert sorted(rows) == names
    for point in points:
        row = rows[point["agent"]]
        assert point["score"] == row["score"], point["agent"]
        for key in ("success_rate", "success_ci95", "iqm_score", "iqm_ci95", "mean_score"):
            assert point[key] == row["stats"][key], (point["agent"], key)
        assert point["episodes"] == row["stats"]["episodes"] == 3
