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

Needs the sb3 extra (`pip install 'arena-eval[mario,sb3]'`); no other Arena module imports this
one, so Arena runs without Stable-Baselines3."""

from __future__ import annotations

import io
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from arena.integrations.mario_env import MarioEnv
from arena.service.background import BackgroundEvaluations, Submitted
from arena.service.series import checkpoint_name
from arena.service.training import CheckpointTemplate, template

try:
    from stable_baselines3.common.callbacks import BaseCallback
except ImportError as error:  # pragma: no cover - the sb3 extra brings it
    raise ImportError(
        "arena.integrations.sb3 needs Stable-Baselines3: pip install 'arena-eval[mario,sb3]'"
    ) from error

__all__ = ["ArenaCallback", "MarioEnv", "Submitted"]
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
    `leaderboard`; `preprocess` (grayscale, resize, frame_stack: how the model sees the game)
    and `device` for the checkpoint. It runs on ARENA_REDIS_URL's cluster, or with none set on
    the data folder's (ARENA_DATA_DIR) embedded cluster, shared with every other command on
    that folder (another training process, `arena mario series`, `arena api`): attached to (or
    started, with `workers` processes) at the first checkpoint and kept until training ends,
    when the callback waits for the evaluations still running (`wait_at_end`, at most `wait_s`
    seconds): that cluster stops once no command uses it."""

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

    def _init_callback(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._next = (self.num_timesteps // self.every + 1) * self.every

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self._next = (self.num_timesteps // self.every + 1) * self.every
            self.checkpoint()
        return True

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
        self.submitted += evaluations.submitted
        self.errors += evaluations.errors
        self._warn(self.errors)
