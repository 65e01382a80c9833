"""`arena mario watch DIR` (docs/mario.md, "Evaluating while training"): every whole checkpoint
`<run>@<steps>.zip` that appears is submitted once, as agent `<run>@<steps>`; a half-written
file waits until it is whole. On a cluster (ARENA_REDIS_URL; no workers here) `--once` submits
and exits."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from arena.service.training import CheckpointFolder, whole_zip
from tasks.store import Store
from tests.integration.conftest import arena

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not os.environ.get("CI"):  # CI installs the sb3 extra: there it must run
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    from tests.mario.sb3_models import build_checkpoint

    return build_checkpoint(tmp_path_factory.mktemp("model") / "ppo.zip", resize=48, frame_stack=2)


def half_of(source: Path, target: Path) -> None:
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])


def test_a_folder_gives_each_whole_checkpoint_once(tmp_path: Path, checkpoint: Path) -> None:
    shutil.copy(checkpoint, tmp_path / "ppo-a@1k.zip")
    half_of(checkpoint, tmp_path / "ppo-a@2k.zip")
    shutil.copy(checkpoint, tmp_path / "notes.zip")  # not <run>@<steps>: never given
    (tmp_path / "ppo-a@3k.txt").write_text("not a zip")
    folder = CheckpointFolder(tmp_path)
    assert folder.look() == []  # a file is whole only once unchanged since the last look
    assert folder.look() == [(tmp_path / "ppo-a@1k.zip", "ppo-a@1k")]
    assert not whole_zip(tmp_path / "ppo-a@2k.zip")
    assert folder.look() == []  # the half-written one stays out, the first is not given again
    shutil.copy(checkpoint, tmp_path / "ppo-a@2k.zip")  # now complete (a new size)
    assert folder.look() == []
    assert folder.look() == [(tmp_path / "ppo-a@2k.zip", "ppo-a@2k")]
    assert folder.look() == []
    # Every cut of a checkpoint is refused (the torch zips inside it do not pass for it).
    data = checkpoint.read_bytes()
    cut = tmp_path / "cut.zip"
    for size in range(0, len(data), max(len(data) // 40, 1)):
        cut.write_bytes(data[:size])
        assert not whole_zip(cut), size


def test_watch_once_submits_each_checkpoint_once(
    tmp_path: Path, checkpoint: Path, cluster_env: dict[str, str], db: Store
) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    shutil.copy(checkpoint, folder / "ppo-a@1k.zip")
    half_of(checkpoint, folder / "ppo-a@2k.zip")
    args = ["mario", "watch", str(folder), "--once", "--interval", "0.3", "--episodes", "2",
            "--max-steps", "50", "--resize", "48", "--frame-stack", "2"]  # fmt: skip
    first = arena(*args, env=cluster_env)
    assert first.returncode == 0, first.stderr
    assert "ppo-a@1k: submitted" in first.stdout and "ppo-a@2k" not in first.stdout
    assert first.stdout.rstrip().endswith("1 checkpoints submitted")
    batches = db.batch_ids(10)
    assert len(batches) == 1
    info = db.batch(batches[0])
    assert info is not None and info.leaderboard == "mario-1-1"
    assert list(info.identity.agents) == ["ppo-a@1k"]
    shutil.copy(checkpoint, folder / "ppo-a@2k.zip")  # its writer finished
    second = arena(*args, env=cluster_env)
    assert second.returncode == 0, second.stderr
    # The first is found where it was: its batch is the same (the spec and file are), not a new one.
    assert "ppo-a@1k: already being evaluated" in second.stdout
    assert "ppo-a@2k: submitted" in second.stdout
    assert len(db.batch_ids(10)) == 2
    bad = arena("mario", "watch", str(tmp_path / "nowhere"), "--once", env=cluster_env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    level = arena("mario", "watch", str(folder), "--once", "--level", "9-9", env=cluster_env)
    assert level.returncode == 2 and "9-9" in level.stderr and level.stderr.count("\n") == 1
