"""A small PPO training run with ArenaCallback, as a user's own training script runs it (its own
process, the embedded default of ARENA_DATA_DIR): `python -m tests.integration.ppo_trainer RUN
STEPS EVERY FOLDER`. Prints what the callback submitted and its errors as JSON, and the time of
training's last step."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

PARAMS = {"frame_skip": 4, "action_set": "right_only", "max_steps": 100}
PREPROCESS = {"grayscale": True, "resize": 48, "frame_stack": 2}
EPISODES, SEED = 3, 7


def train(run: str, steps: int, every: int, folder: Path) -> dict[str, object]:
    """Train `steps` with a checkpoint every `every`; what the callback did, and when training's
    last step was taken (`trained`, unix s)."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList

    from arena.integrations.sb3 import ArenaCallback, MarioEnv
    from workers.mario.sb3 import MarioObservation

    class LastStep(BaseCallback):
        at = 0.0

        def _on_step(self) -> bool:
            LastStep.at = time.time()
            return True

    torch.set_num_threads(1)
    env = MarioObservation(MarioEnv("1-1", PARAMS), **PREPROCESS)
    model = PPO("CnnPolicy", env, n_steps=250, batch_size=50, n_epochs=1, seed=0, device="cpu")
    callback = ArenaCallback(
        run, every=every, folder=folder, episodes=EPISODES, seed=SEED, params=PARAMS,
        preprocess=PREPROCESS,
    )  # fmt: skip
    model.learn(steps, callback=CallbackList([callback, LastStep()]))
    return {
        "submitted": [[s.agent, s.batch_id, s.state] for s in callback.submitted],
        "errors": callback.errors,
        "trained": LastStep.at,
    }


if __name__ == "__main__":
    run, steps, every, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    print(json.dumps(train(run, steps, every, Path(folder))))
