"""Arena inside other tools' loops: `arena.integrations.sb3`, a Stable-Baselines3 callback that
evaluates checkpoints while they train (the `sb3` extra; no other module imports it)."""
