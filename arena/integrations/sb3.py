"""Evaluation during training (docs/mario.md, "Evaluating while training"): `ArenaCallback`, a
Stable-Baselines3 callback that every `every` steps saves the model as `<folder>/<run>@<steps>.zip`
(`ppo-a@500k`) and submits its evaluation to the cluster from a background thread
(arena/service/background.py), and `MarioEnv`, a gymnasium env of the game the protocol plays.

```python
from stable_baselines3 import PPO
from arena.integrations.sb3 import ArenaCallback, MarioEnv
from workers.mario.sb3 import MarioObservation

env = MarioObservation(MarioEnv("1-1"), resize=84, frame_stack=4)
model = PPO("CnnPolicy", env)
model.learn(1_000_000, callback=ArenaCallback("ppo-a", every=100_000, folder="checkpoints"))
```

As SB3's `EvalCallback`, it records each evaluation into the model's logger as it lands (`arena/*`
keys: TensorBoard, W&B, CSV, whatever outputs the logger has), saves the best checkpoint
(`best_model.zip`), and runs `callback_on_new_best` and `callback_after_eval`;
`StopTrainingOnNoArenaImprovement` as the latter stops training when evaluations stop improving.
"Best" and "improving" are judged on the interval (`arena compare`'s), never a point estimate.

Needs the sb3 extra (`pip install 'arena-eval[mario,sb3]'`); no other Arena module imports this
one, so Arena runs without Stable-Baselines3."""

from __future__ import annotations

import io
import json
import logging
import os
import queue
import shutil
import warnings
from pathlib import Path
from typing import Any

from arena.integrations.mario_env import MarioEnv
from arena.service.background import BackgroundEvaluations, Landed, Submitted
from arena.service.series import checkpoint_name
from arena.service.training import CheckpointTemplate, template

try:
    from stable_baselines3.common.callbacks import BaseCallback
except ImportError as error:  # pragma: no cover - the sb3 extra brings it
    raise ImportError(
        "arena.integrations.sb3 needs Stable-Baselines3: pip install 'arena-eval[mario,sb3]'"
    ) from error

__all__ = [
    "ArenaCallback",
    "Landed",
    "MarioEnv",
    "StopTrainingOnNoArenaImprovement",
    "Submitted",
]
log = logging.getLogger("arena.training")


class ArenaCallback(BaseCallback):
    """Every `every` training steps: the model saved as `<folder>/<run>@<steps>.zip` (written
    to a temporary file and renamed, so a watcher never reads half of it) and its evaluation
    queued for a background thread, which submits it as a one-agent Mario batch, the agent
    named `<run>@<steps>`, on the protocol's board (`mario-1-1`). Training waits only for the
    save; an evaluation that cannot be submitted (no cluster to evaluate on, a refused
    checkpoint) is never raised: it is logged, warned of (RuntimeWarning, in training's own
    thread at the next checkpoint and at the end), kept in `errors` and in `submitted` (state
    `not-submitted`, with its reason).

    The evaluation: `spec` (a Mario spec file or dict: items, protocol, params, leaderboard;
    its first agent's preprocess and device), else `level`, `episodes`, `seed`, `params`,
    `leaderboard`; `preprocess` (grayscale, resize, frame_stack: how the model sees the game;
    default: read from each checkpoint's observation space, and checked against it when given)
    and `device` for the checkpoint. It runs on ARENA_REDIS_URL's cluster, or with none set on
    the data folder's (ARENA_DATA_DIR) embedded cluster, shared with every other command on
    that folder (another training process, `arena mario series`, `arena api`): attached to (or
    started, with `workers` processes) at the first checkpoint and kept until training ends,
    when the callback waits for the evaluations still running (`wait_at_end`, at most `wait_s`
    seconds): that cluster stops once no command uses it.

    As each evaluation lands (read at the next training step, from the thread's queue) its
    numbers go into the model's logger (`arena/...`, dumped at the step it landed, with the
    checkpoint's own steps as `arena/checkpoint_steps`, as SB3's EvalCallback dumps its own) and
    into `landed`. The first evaluated checkpoint is the best; a later one is the new best when
    `arena compare BOARD IT BEST`'s interval says it is better: then it is copied to
    `<best_model_save_path>/best_model.zip` (default `<folder>/best/`, which a watch of
    `folder` does not look into) with `best_model.json`, and `callback_on_new_best` runs. Then
    `callback_after_eval` runs: either returning False stops training."""

    def __init__(
        self,
        run: str,
        every: int,
        folder: str | Path,
        *,
        spec: str | Path | dict[str, Any] | None = None,
        level: str | None = None,
        episodes: int | None = None,
        seed: int | None = None,
        params: dict[str, Any] | None = None,
        leaderboard: str | None = None,
        preprocess: dict[str, Any] | None = None,
        device: str | None = None,
        workers: int | None = None,
        wait_at_end: bool = True,
        wait_s: float | None = None,
        best_model_save_path: str | Path | None = None,
        callback_on_new_best: BaseCallback | None = None,
        callback_after_eval: BaseCallback | None = None,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        if every < 1:
            raise ValueError(f"every: {every} (a checkpoint every 1 or more steps)")
        checkpoint_name(run, every)  # a run name that makes agent names, or ValueError now
        self.run, self.every, self.folder = run, every, Path(folder)
        self.template: CheckpointTemplate = template(
            spec,
            level=level,
            episodes=episodes,
            seed=seed,
            params=params,
            leaderboard=leaderboard,
            preprocess=preprocess,
            device=device,
        )
        self.workers, self.wait_at_end, self.wait_s = workers, wait_at_end, wait_s
        self.evaluations: BackgroundEvaluations | None = None
        self.submitted: list[Submitted] = []
        self.errors: list[str] = []
        self._next = every
        self._warned = 0  # how many of the evaluations' errors training was warned of
        self.best_model_save_path = Path(best_model_save_path or self.folder / "best")
        self.callback_on_new_best, self.callback_after_eval = (
            callback_on_new_best,
            callback_after_eval,
        )
        for child in (callback_on_new_best, callback_after_eval):
            if child is not None:
                child.parent = self
        self.landed: list[Landed] = []  # every evaluation that ended, as it was read
        self.best: Landed | None = None
        self.new_bests = 0  # how many times a checkpoint became the best

    def _init_callback(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._next = (self.num_timesteps // self.every + 1) * self.every
        for child in (self.callback_on_new_best, self.callback_after_eval):
            if child is not None:
                child.init_callback(self.model)

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self._next = (self.num_timesteps // self.every + 1) * self.every
            self.checkpoint()
        return self.read_landed()

    def read_landed(self) -> bool:
        """Take in each evaluation that ended since the last step; False: a callback of ours
        asked training to stop."""
        if self.evaluations is None:
            return True
        go_on = True
        while True:
            try:
                landed = self.evaluations.landed.get_nowait()
            except queue.Empty:
                return go_on
            go_on = self._take(landed) and go_on

    def _take(self, landed: Landed) -> bool:
        """One evaluation into the logger, the best model and the callbacks."""
        self.landed.append(landed)
        self._record(landed)
        go_on = True
        if landed.new_best:
            self.best, self.new_bests = landed, self.new_bests + 1
            self._save_best(landed)
            if self.callback_on_new_best is not None:
                go_on = self.callback_on_new_best.on_step()
        if self.callback_after_eval is not None:
            go_on = self.callback_after_eval.on_step() and go_on
        return go_on

    def _record(self, landed: Landed) -> None:
        """The evaluation's numbers into SB3's logger, dumped now (EvalCallback's way)."""
        point, record = landed.evaluated.point, self.logger.record
        if point is None:
            return
        record("arena/checkpoint_steps", point.steps)
        for key in ("score", "iqm_score", "success_rate", "mean_score", "avg_max_x"):
            value = getattr(point, key)
            if value is not None:
                record(f"arena/{key}", value)
        for key, pair in (("iqm", point.iqm_ci95), ("success", point.success_ci95)):
            if pair is not None:
                record(f"arena/{key}_ci95_low", pair[0])
                record(f"arena/{key}_ci95_high", pair[1])
        if landed.against_best is not None:
            record("arena/p_beats_best", landed.against_best.probability)
        record("arena/new_best", int(landed.new_best))
        self.logger.dump(self.num_timesteps)

    def _save_best(self, landed: Landed) -> None:
        folder = self.best_model_save_path
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / ".best_model.zip.partial"
        shutil.copyfile(landed.path, partial)
        os.replace(partial, folder / "best_model.zip")
        point, against = landed.evaluated.point, landed.against_best
        about = {
            "agent": landed.evaluated.name,
            "steps": point.steps if point else None,
            "batch": landed.evaluated.info.id,
            "beat": landed.best_before,
            "against_best": against.model_dump(mode="json") if against else None,
        }
        (folder / "best_model.json").write_text(json.dumps(about, indent=2) + "\n")
        if self.verbose:
            log.info("arena: new best checkpoint %s", landed.evaluated.name)

    def _warn(self, errors: list[str]) -> None:
        """Training hears of each evaluation not submitted, once (RuntimeWarning)."""
        for line in errors[self._warned :]:
            warnings.warn(f"arena: evaluation not submitted: {line}", RuntimeWarning, 2)
        self._warned = len(errors)

    def checkpoint(self) -> Path:
        """Save the model now and queue its evaluation; the checkpoint's path."""
        name = checkpoint_name(self.run, self.num_timesteps)
        path = self.folder / f"{name}.zip"
        data = io.BytesIO()
        self.model.save(data)
        partial = path.with_name(f".{path.name}.partial")
        partial.write_bytes(data.getvalue())
        os.replace(partial, path)
        if self.evaluations is None:
            self.evaluations = BackgroundEvaluations(self.template, self.workers)
        self._warn(self.errors + self.evaluations.errors)  # the earlier checkpoints'
        self.evaluations.submit(path, name)
        if self.verbose:
            log.info("arena: saved %s; its evaluation is queued", path)
        return path

    def _on_training_end(self) -> None:
        self.close()

    def close(self) -> None:
        """End the background thread (training's end does it): queued checkpoints submitted,
        the embedded cluster's evaluations waited for (`wait_at_end`), then stopped."""
        evaluations, self.evaluations = self.evaluations, None
        if evaluations is None:
            return
        evaluations.close(self.wait_at_end, self.wait_s)
        self.evaluations = evaluations  # what landed while it closed: logged, best saved
        self.read_landed()
        self.evaluations = None
        self.submitted += evaluations.submitted
        self.errors += evaluations.errors
        self._warn(self.errors)


class StopTrainingOnNoArenaImprovement(BaseCallback):
    """SB3's StopTrainingOnNoModelImprovement for `ArenaCallback(callback_after_eval=...)`:
    training stops once `max_no_improvement_evals` evaluations in a row (after the first
    `min_evals`) did not beat the best checkpoint by `arena compare`'s interval."""

    parent: ArenaCallback

    def __init__(self, max_no_improvement_evals: int, min_evals: int = 0, verbose: int = 0):
        super().__init__(verbose)
        if max_no_improvement_evals < 0 or min_evals < 0:
            raise ValueError(
                f"max_no_improvement_evals: {max_no_improvement_evals}, min_evals: {min_evals} "
                "(0 or more each)"
            )
        self.max_no_improvement_evals, self.min_evals = max_no_improvement_evals, min_evals
        self.no_improvement_evals = 0
        self._bests = 0

    def _on_step(self) -> bool:
        assert self.parent is not None, "use it as ArenaCallback(callback_after_eval=...)"
        go_on = True
        if self.n_calls > self.min_evals:
            if self.parent.new_bests > self._bests:
                self.no_improvement_evals = 0
            else:
                self.no_improvement_evals += 1
                go_on = self.no_improvement_evals <= self.max_no_improvement_evals
        self._bests = self.parent.new_bests
        if not go_on and self.verbose:
            log.info(
                "arena: stopping training: %d evaluations without a better checkpoint",
                self.no_improvement_evals,
            )
        return go_on
