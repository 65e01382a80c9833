"""The loop around training (issue 35, item 4; docs/mario.md, "Evaluating while training"): a PPO
run with ArenaCallback on the embedded default, its learning rate 0 so that it cannot improve.
Every checkpoint then plays as the first did, so none beats the best by the interval:
StopTrainingOnNoArenaImprovement stops the run long before its steps are done. Arena's numbers
are in the TensorBoard event files SB3 writes, one value per evaluation as it landed; the first
checkpoint is the best and is saved, `callback_on_new_best` ran once for it.

On c3f317a nothing of this existed: the callback wrote nothing to SB3's logger, kept no best and
had no callbacks, so training ran to its last step."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.integration.test_embedded import embedded_env, no_leftovers

pytestmark = pytest.mark.integration
STEPS, EVERY, DEADLINE_S = 1_000_000, 500, 240
PARAMS = {"frame_skip": 4, "action_set": "right_only", "max_steps": 50}
# 16x16 frames and an MLP: training costs little beside the emulator, so the test's time is the
# cluster's start and three evaluations.
PREPROCESS = {"grayscale": True, "resize": 16, "frame_stack": 1}


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the event files under `folder`, read by TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars: dict[str, list[tuple[int, float]]] = {}
    for events in sorted(folder.rglob("events.out.tfevents.*")):
        reader = EventAccumulator(str(events.parent))
        reader.Reload()
        for tag in reader.Tags()["scalars"]:
            scalars.setdefault(tag, []).extend((e.step, e.value) for e in reader.Scalars(tag))
    return scalars


def test_a_run_that_does_not_improve_is_stopped_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not os.environ.get("CI"):  # CI installs the sb3 extra and tensorboard: there it must run
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
        pytest.importorskip("tensorboard", reason="tensorboard is not installed")
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList

    from arena.integrations.sb3 import ArenaCallback, MarioEnv, StopTrainingOnNoArenaImprovement
    from workers.mario.sb3 import MarioObservation

    data = tmp_path / "data"
    for name, value in embedded_env(data).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ARENA_REDIS_URL", raising=False)

    class NewBests(BaseCallback):
        def _on_step(self) -> bool:
            return True

    class Deadline(BaseCallback):  # a run the stop callback never stopped fails, not hangs
        def _on_training_start(self) -> None:
            self.until = time.monotonic() + DEADLINE_S

        def _on_step(self) -> bool:
            return time.monotonic() < self.until

    torch.set_num_threads(1)
    env = MarioObservation(MarioEnv("1-1", PARAMS), **PREPROCESS)
    model = PPO(
        "MlpPolicy", env, n_steps=250, batch_size=50, n_epochs=1, seed=0, device="cpu",
        learning_rate=0.0, tensorboard_log=str(tmp_path / "tb"),
    )  # fmt: skip
    new_bests = NewBests()
    stop = StopTrainingOnNoArenaImprovement(max_no_improvement_evals=1)
    arena = ArenaCallback(
        "flat", every=EVERY, folder=tmp_path / "checkpoints", episodes=2, seed=7, params=PARAMS,
        preprocess=PREPROCESS, callback_on_new_best=new_bests, callback_after_eval=stop, verbose=1,
        wait_at_end=False,  # the evaluations queued when it stopped are not waited for
    )  # fmt: skip
    model.learn(STEPS, callback=CallbackList([arena, Deadline()]))

    assert arena.errors == []
    assert model.num_timesteps < STEPS
    assert stop.no_improvement_evals == 2, [a.evaluated.name for a in arena.landed]
    # Stopped at the third evaluation read in training; more may have landed at the end.
    first, *rest = arena.landed
    assert first.new_best and not any(a.new_best for a in rest)
    assert new_bests.n_calls == 1 and arena.new_bests == 1
    for later in rest:
        assert later.against_best is not None and later.against_best.better is None
        assert later.against_best.probability == 0.5  # the same play: every pair a tie
    best = tmp_path / "checkpoints" / "best"
    assert (best / "best_model.zip").read_bytes() == first.path.read_bytes()
    about = json.loads((best / "best_model.json").read_text())
    assert about["agent"] == first.evaluated.name and about["beat"] is None

    scalars = tensorboard_scalars(tmp_path / "tb")
    points = [a.evaluated.point for a in arena.landed]
    assert all(p is not None for p in points)
    steps = [v for _, v in scalars["arena/checkpoint_steps"]]
    assert steps == [p.steps for p in points if p is not None]
    for key in ("iqm_score", "score", "avg_max_x", "success_rate"):
        logged = [v for _, v in scalars[f"arena/{key}"]]
        wanted = [getattr(p, key) for p in points if p is not None]
        assert logged == pytest.approx(wanted, rel=1e-6), key  # float32 in the event file
    assert [v for _, v in scalars["arena/new_best"]] == [1] + [0] * len(rest)
    no_leftovers(data)
