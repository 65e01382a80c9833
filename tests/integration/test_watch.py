"""`arena mario watch DIR` (docs/mario.md, "Evaluating while training"): every whole checkpoint
`<run>@<steps>.zip` that appears is submitted once, as agent `<run>@<steps>`; a half-written
file waits until it is whole. On a cluster (ARENA_REDIS_URL; no workers here) `--once` submits
and exits. On the embedded default (no ARENA_REDIS_URL) the watch starts Redis and workers itself:
`--once` waits for the evaluations, prints each checkpoint's result and the board, and exits 0;
without it, checkpoints are evaluated as they appear until Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from arena.service.series import checkpoint_file
from arena.service.training import CheckpointFolder, save_name, whole_zip
from tasks.store import Store
from tasks.validation import InputError
from tests.integration.conftest import ARENA, ROOT, arena
from tests.integration.test_mario import embedded_env

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


SMALL = ["--episodes", "2", "--max-steps", "50", "--resize", "48", "--frame-stack", "2"]


def assert_series_is_the_board(env: dict[str, str], agents: list[str]) -> list[dict]:
    """`arena mario series mario-1-1 ppo-a --json`: one point per agent, each with the numbers of
    the agent's row in `arena leaderboard mario-1-1 --json`. The points."""
    series = arena("mario", "series", "mario-1-1", "ppo-a", "--json", env=env)
    assert series.returncode == 0, series.stderr
    points = json.loads(series.stdout)["points"]
    assert [p["agent"] for p in points] == agents
    board = arena("leaderboard", "mario-1-1", "--json", env=env)
    assert board.returncode == 0, board.stderr
    rows = {row["agent"]: row for row in json.loads(board.stdout)["entries"]}
    for point in points:
        row = rows[point["agent"]]
        assert (point["score"], point["batch"]) == (row["score"], row["batch"])
        for key in ("success_rate", "success_ci95", "iqm_score", "iqm_ci95", "mean_score"):
            assert point[key] == row["stats"][key], key
        assert point["episodes"] == row["stats"]["episodes"] == 2
        assert point["failed"] == 0
    return points


def test_watch_once_on_the_embedded_default_evaluates_each_checkpoint(
    tmp_path: Path, checkpoint: Path
) -> None:
    env = embedded_env(tmp_path / "data")  # no ARENA_REDIS_URL: Redis and 2 workers of its own
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    shutil.copy(checkpoint, folder / "ppo-a@1k.zip")
    shutil.copy(checkpoint, folder / "ppo-a@2k.zip")
    args = ["mario", "watch", str(folder), "--once", "--interval", "0.3", *SMALL]
    ran = arena(*args, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = ran.stdout
    assert "ppo-a@1k: submitted" in out and "ppo-a@2k: submitted" in out
    assert "waiting for 2 evaluations on the embedded cluster" in out
    assert out.count("2/2 units") == 2  # a progress bar per evaluation, as `arena run` shows
    assert "MARIO ARENA LEADERBOARD: mario-1-1" in out  # the board, as `arena run` prints it
    assert out.rstrip().endswith("2 checkpoints submitted, 2 evaluated")
    # Both were evaluated (the embedded cluster stopped with the command: its data folder is
    # free for the next one), and the board's rows are the series' points.
    points = assert_series_is_the_board(env, ["ppo-a@1k", "ppo-a@2k"])
    assert [p["steps"] for p in points] == [1000, 2000]
    for point in points:  # each checkpoint's result line: its batch and its numbers
        line = next(x for x in out.splitlines() if x.startswith(f"{point['agent']}: evaluated"))
        assert f"best {point['score']:,.0f}" in line and f"batch {point['batch'][:12]}" in line
        assert f"max x {point['avg_max_x']:,.0f}" in line  # the distance beside the score
        assert f"{point['agent']}: submitted, batch {point['batch'][:12]}" in out
    # Again on the same data folder: found evaluated, nothing run twice.
    again = arena(*args, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "ppo-a@1k: already evaluated" in again.stdout
    assert "ppo-a@2k: already evaluated" in again.stdout
    assert "waiting for" not in again.stdout
    assert assert_series_is_the_board(env, ["ppo-a@1k", "ppo-a@2k"]) == points


def test_watch_on_the_embedded_default_evaluates_new_checkpoints_until_ctrl_c(
    tmp_path: Path, checkpoint: Path
) -> None:
    env = embedded_env(tmp_path / "data")
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    shutil.copy(checkpoint, folder / "ppo-a@1k.zip")
    out = tmp_path / "watch.out"

    def wait_for(text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in out.read_text():
            assert watcher.poll() is None, out.read_text()
            assert time.monotonic() < deadline, f"no {text!r} in:\n{out.read_text()}"
            time.sleep(0.2)

    with out.open("w") as sink:
        watcher = subprocess.Popen(
            [ARENA, "mario", "watch", str(folder), "--interval", "0.3", *SMALL],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        wait_for("ppo-a@1k: evaluated")
        shutil.copy(checkpoint, folder / "ppo-a@2k.zip")  # a checkpoint the trainer saved since
        wait_for("ppo-a@2k: evaluated")
        watcher.send_signal(signal.SIGINT)  # Ctrl-C
        assert watcher.wait(60) == 0, out.read_text()
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait(10)
    assert out.read_text().rstrip().endswith("stopped"), out.read_text()
    assert_series_is_the_board(env, ["ppo-a@1k", "ppo-a@2k"])


def test_checkpoint_callback_names_are_the_runs_agents(tmp_path: Path) -> None:
    """SB3's `<prefix>_<steps>_steps` is the agent `save_name` would write for the same steps;
    other names are not checkpoints."""
    assert checkpoint_file("ppo_mario_1024_steps") == ("ppo_mario@1024", 1024)
    assert checkpoint_file("ppo_mario_2000_steps") == ("ppo_mario@2k", 2000)
    assert checkpoint_file("ppo-a@2k") == ("ppo-a@2k", 2000)
    assert save_name("ppo_mario", 2000) == "ppo_mario@2k.zip"
    for other in ("ppo_mario_steps", "ppo_mario_1024", "_1024_steps", "ppo mario_1024_steps"):
        assert checkpoint_file(other) is None, other
    with pytest.raises(
        InputError, match=r"^r{60}_1024_steps\.zip: .* is 65 characters \(at most 64\)"
    ):
        checkpoint_file("r" * 60 + "_1024_steps")  # an agent name over 64 characters


def test_watch_once_submits_a_checkpoint_callback_folder(
    tmp_path: Path, cluster_env: dict[str, str], db: Store
) -> None:
    """A real PPO run saving through SB3's own CheckpointCallback (with its VecNormalize side
    files): every checkpoint is submitted, named `<prefix>@<steps>`; a second file that would be
    the same agent is one line of error naming both (exit 2), never a silent pick. Before
    (c3f317a) the watch read only `<run>@<steps>.zip`: "0 checkpoints submitted", exit 0."""
    if not os.environ.get("CI"):
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import CheckpointCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from tests.mario.sb3_models import RIGHT_ONLY_ACTIONS, ToyFrames

    folder = tmp_path / "checkpoints"
    env = VecNormalize(
        DummyVecEnv([lambda: ToyFrames((2, 48, 48), RIGHT_ONLY_ACTIONS)]), norm_obs=False
    )
    saves = CheckpointCallback(64, str(folder), name_prefix="ppo_mario", save_vecnormalize=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # torch's default (all cores) is slow beside other processes
    try:
        model = PPO("CnnPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
        model.learn(total_timesteps=192, callback=saves)
    finally:
        torch.set_num_threads(threads)
    steps = [64, 128, 192]
    assert {p.name for p in folder.iterdir()} == {
        *(f"ppo_mario_{n}_steps.zip" for n in steps),
        *(f"ppo_mario_vecnormalize_{n}_steps.pkl" for n in steps),
    }
    args = ["mario", "watch", str(folder), "--once", "--interval", "0.3", *SMALL]
    ran = arena(*args, env=cluster_env)
    assert ran.returncode == 0, ran.stderr
    for n in steps:
        assert f"ppo_mario@{n}: submitted" in ran.stdout, ran.stdout
    assert ran.stdout.rstrip().endswith("3 checkpoints submitted")
    agents = sorted(a for b in db.batch_ids(10) for a in db.batch(b).identity.agents)  # type: ignore[union-attr]
    assert agents == sorted(f"ppo_mario@{n}" for n in steps)
    shutil.copy(folder / "ppo_mario_128_steps.zip", folder / "ppo_mario@128.zip")
    twice = arena(*args, env=cluster_env)
    assert twice.returncode == 2 and twice.stderr.count("\n") == 1, twice.stderr
    assert "ppo_mario@128.zip and ppo_mario_128_steps.zip" in twice.stderr, twice.stderr
    assert len(db.batch_ids(10)) == 3  # nothing submitted by the refused watch


def test_watch_refuses_a_checkpoint_of_other_preprocessing_in_one_line(
    tmp_path: Path, checkpoint: Path, cluster_env: dict[str, str], db: Store
) -> None:
    """A checkpoint trained on (2, 48, 48) watched with --resize 84 --frame-stack 4: refused at
    submission, one line naming the field and both shapes, nothing stored; without them its own
    preprocessing is read from it and it is submitted. On c3f317a it was submitted, every
    episode failed at evaluation and the checkpoint got a board row scored 0."""
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    shutil.copy(checkpoint, folder / "ppo-a@1k.zip")
    once = ["mario", "watch", str(folder), "--once", "--interval", "0.3", "--episodes", "2",
            "--max-steps", "50"]  # fmt: skip
    refused = arena(*once, "--resize", "84", "--frame-stack", "4", env=cluster_env)
    assert refused.returncode == 0, refused.stderr
    said = [line for line in refused.stdout.splitlines() if line.startswith("ppo-a@1k")]
    assert said == [
        "ppo-a@1k: not submitted: agents[0].preprocess: resize 84, frame_stack 4 does not give "
        f"what {str(folder / 'ppo-a@1k.zip')!r} observes, (2, 48, 48) (grayscale true, resize "
        "48, frame_stack 2): declare what it was trained with, or leave it out"
    ]
    assert refused.stdout.rstrip().endswith("0 checkpoints submitted")
    assert db.batch_ids(10) == []
    declared_once = arena(*once, env=cluster_env)
    assert "ppo-a@1k: submitted" in declared_once.stdout, declared_once.stdout
    (batch,) = db.batch_ids(10)
    info = db.batch(batch)
    assert info is not None
    agent = info.spec["agents"][0]
    assert agent["preprocess"] == {"grayscale": True, "resize": 48, "frame_stack": 2}
