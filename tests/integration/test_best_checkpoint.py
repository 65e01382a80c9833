"""Which checkpoint is the best (arena/service/background.py, `Landed`; docs/mario.md, "The loop
around training"): the first evaluated one, then one whose `arena compare` interval beats the
best, never a point estimate. Three real evaluations on one board (built-ins named as checkpoints,
real emulator, real Redis): walk@1k (right, which walks into the first Goomba), walk@2k
(jump-right, which its episodes separate from it: the new best), walk@3k (right again: not
better than the best).

On c3f317a ArenaCallback kept no best: it submitted and never read an evaluation back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arena.service.background import BackgroundEvaluations, Landed
from arena.service.training import Target, template
from tasks.settings import ArenaSettings
from tasks.store import Store
from tests.api.picture_batches import run_into

pytestmark = pytest.mark.integration
pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")


def spec(name: str, builtin: str) -> dict[str, Any]:
    return {
        "workload": "mario",
        "agents": [{"name": name, "builtin": builtin}],
        "items": ["1-1"],
        "protocol": {"episodes": 4, "seed": 11},
        "params": {"max_steps": 60},
    }


def test_the_best_is_the_first_then_one_its_interval_separates(db: Store, tmp_path: Path) -> None:
    runs = [("walk@1k", "right"), ("walk@2k", "jump-right"), ("walk@3k", "right")]
    batches = [run_into(db, spec(name, builtin)) for name, builtin in runs]
    evaluations = BackgroundEvaluations(template())  # its thread waits for a checkpoint
    try:
        for (name, _), batch in zip(runs, batches, strict=True):
            evaluations._pending[batch] = (tmp_path / f"{name}.zip", name)
        evaluations._land(Target(db, ArenaSettings(), embedded=False))
    finally:
        evaluations.close(wait=False)
    landed: list[Landed] = []
    while not evaluations.landed.empty():
        landed.append(evaluations.landed.get())
    assert [a.evaluated.name for a in landed] == ["walk@1k", "walk@2k", "walk@3k"]
    first, second, third = landed
    assert first.new_best and first.against_best is None and first.best_before is None
    assert second.best_before == "walk@1k" and second.against_best is not None
    assert second.against_best.better == "a" and second.new_best
    assert third.best_before == "walk@2k" and third.against_best is not None
    assert third.against_best.better != "a" and not third.new_best
    assert evaluations.best == "walk@2k"
