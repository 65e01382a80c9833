"""SB3 checkpoints as Mario agents: preprocessing, loading, refusals, real episodes."""

from __future__ import annotations

import logging
import zipfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")
pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")

import gymnasium

from tests.mario.sb3_models import build_checkpoint
from workers.mario.protocol import MarioProtocol, action_names
from workers.mario.runner import EpisodeOutcome, decode_actions, run_episode
from workers.mario.sb3 import (
    FrameStack,
    MarioObservation,
    Preprocessing,
    load_checkpoint_agent,
    luminance,
    resize_area,
)

SHORT = MarioProtocol(max_steps=50, sticky_p=0.25)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PPO, 84x84 grayscale, 4 frames, untrained: seed 1's initial weights answer different
    frames with different actions (a trained toy would always press one button)."""
    return build_checkpoint(tmp_path_factory.mktemp("sb3") / "ppo", seed=1)


def frames(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (240, 256, 3), dtype=np.uint8) for _ in range(n)]


def load(path: Path | str, **overrides: Any) -> Any:
    options: dict[str, Any] = {
        "grayscale": True,
        "resize": 84,
        "frame_stack": 4,
        "device": "cpu",
        **overrides,
    }
    return load_checkpoint_agent(str(path), **options)


# --- preprocessing -----------------------------------------------------------------------------


def exact_area(image: np.ndarray, size: int) -> np.ndarray:
    """The mean of the area each output pixel covers, in fractions, rounded half up."""
    height, width = image.shape
    out = np.zeros((size, size), dtype=np.uint8)
    for i in range(size):
        for k in range(size):
            y0, y1 = Fraction(i * height, size), Fraction((i + 1) * height, size)
            x0, x1 = Fraction(k * width, size), Fraction((k + 1) * width, size)
            total = Fraction(0)
            for y in range(height):
                dy = min(y1, Fraction(y + 1)) - max(y0, Fraction(y))
                for x in range(width):
                    dx = min(x1, Fraction(x + 1)) - max(x0, Fraction(x))
                    if dy > 0 and dx > 0:
                        total += dy * dx * int(image[y, x])
            out[i, k] = int(total / ((y1 - y0) * (x1 - x0)) + Fraction(1, 2))
    return out


@pytest.mark.parametrize(("height", "width", "size"), [(7, 5, 3), (24, 26, 9), (10, 12, 16)])
def test_resize_is_the_exact_area_mean(height: int, width: int, size: int) -> None:
    image = np.random.default_rng(size).integers(0, 256, (height, width), dtype=np.uint8)
    assert np.array_equal(resize_area(image, size), exact_area(image, size))
    stacked = np.stack([image, 255 - image])  # (C, H, W): each channel on its own
    assert np.array_equal(resize_area(stacked, size)[1], exact_area(255 - image, size))


def test_luminance_and_a_frame() -> None:
    frame = frames(1)[0]
    r, g, b = (frame[..., c].astype(np.int64) for c in range(3))
    assert np.array_equal(luminance(frame), (4899 * r + 9617 * g + 1868 * b + 8192) >> 14)
    assert luminance(np.full((2, 2, 3), 255, np.uint8)).tolist() == [[255, 255], [255, 255]]
    # An integer ratio is the plain block mean: 240x256 -> 120x128 is not square, so crop.
    gray = luminance(frame)[:, :240]
    block = gray.reshape(120, 2, 120, 2).astype(np.float64).mean(axis=(1, 3))
    assert np.array_equal(resize_area(gray, 120), np.floor(block + 0.5).astype(np.uint8))
    assert Preprocessing().frame(frame).shape == (1, 84, 84)
    assert Preprocessing(grayscale=False, resize=48).frame(frame).shape == (3, 48, 48)
    with pytest.raises(ValueError, match=r"\(H, W, 3\) uint8"):
        Preprocessing().frame(frame[..., 0])


def test_frame_stack_repeats_the_first_frame_and_keeps_the_newest_last() -> None:
    pre = Preprocessing(grayscale=False, resize=36, frame_stack=3)
    stack = FrameStack(pre)
    a, b, c, d = frames(4)
    one = [pre.frame(f) for f in (a, b, c, d)]
    assert np.array_equal(stack.push(a), np.concatenate([one[0]] * 3))  # (9, 36, 36)
    stack.push(b)
    stack.push(c)
    assert np.array_equal(stack.push(d), np.concatenate(one[1:]))
    stack.clear()
    assert np.array_equal(stack.push(c), np.concatenate([one[2]] * 3))


class ScreenEnv(gymnasium.Env[np.ndarray, Any]):
    """Shows the given RGB frames in turn: the training side of the preprocessing."""

    observation_space = gymnasium.spaces.Box(0, 255, (240, 256, 3), np.uint8)
    action_space = gymnasium.spaces.Discrete(5)

    def __init__(self, screens: list[np.ndarray]) -> None:
        self.screens, self.t = screens, 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self.t = 0
        return self.screens[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self.screens[self.t], 0.0, False, False, {}


def test_the_training_wrapper_shows_the_model_what_the_agent_does(checkpoint: Path) -> None:
    screens = frames(6, seed=3)
    env = MarioObservation(ScreenEnv(screens), resize=84, frame_stack=4)
    trained = [env.reset()[0]] + [env.step(0)[0] for _ in range(5)]
    assert env.observation_space == Preprocessing().space()
    agent = load(checkpoint)
    seen: list[np.ndarray] = []
    predict = agent.model.predict

    def spy(observation: np.ndarray, **kwargs: Any) -> Any:
        seen.append(observation.copy())
        return predict(observation, **kwargs)

    agent.model.predict = spy
    agent.reset(seed=0, actions=action_names("right_only"))
    for screen in screens:
        assert isinstance(agent.act({"frame": screen, "info": {}}), int)
    assert all(s.dtype == np.uint8 and s.shape == (4, 84, 84) for s in seen)
    assert all(np.array_equal(s, t) for s, t in zip(seen, trained, strict=True))
    # A new episode starts a new stack, as the wrapper's reset does.
    agent.reset(seed=0, actions=action_names("right_only"))
    agent.act({"frame": screens[2], "info": {}})
    assert np.array_equal(seen[-1], np.stack([seen[2][-1]] * 4))


# --- real episodes -----------------------------------------------------------------------------


def test_plays_a_real_episode_deterministically(checkpoint: Path) -> None:
    outcomes = [
        run_episode("1-1", load(checkpoint), SHORT, env_seed=7, agent_seed=1) for _ in range(2)
    ]
    first, second = (o.model_dump(exclude={"wall_s"}) for o in outcomes)
    assert isinstance(outcomes[0], EpisodeOutcome)
    assert outcomes[0].level == "1-1" and (outcomes[0].world, outcomes[0].stage) == (1, 1)
    assert 1 <= outcomes[0].steps <= 50 and outcomes[0].frames >= outcomes[0].steps
    assert first == second
    assert len(set(decode_actions(outcomes[0].actions))) > 1  # the frames steer it
    # One agent object replays the same episode too: reset forgets the last one's frames.
    agent = load(checkpoint)
    again = [run_episode("1-1", agent, SHORT, env_seed=7, agent_seed=1) for _ in range(2)]
    assert all(o.model_dump(exclude={"wall_s"}) == first for o in again)


@pytest.mark.parametrize("algorithm", ["A2C", "DQN"])
def test_the_algorithm_is_read_from_the_checkpoint(tmp_path: Path, algorithm: str) -> None:
    path = build_checkpoint(
        tmp_path / algorithm.lower(), resize=36, algorithm=algorithm, learn_steps=64
    )
    agent = load(path, resize=36)
    assert type(agent.model).__name__ == algorithm
    outcome = run_episode(
        "1-1", agent, MarioProtocol(sticky_p=0.0, max_steps=5), env_seed=0, agent_seed=0
    )
    assert outcome.steps == 5


# --- refusals ----------------------------------------------------------------------------------


def test_a_checkpoint_of_other_preprocessing_is_refused(tmp_path: Path) -> None:
    small = build_checkpoint(tmp_path / "small", resize=48)
    with pytest.raises(ValueError, match=r"\(4, 48, 48\).*\(4, 84, 84\)"):
        load(small)
    with pytest.raises(ValueError, match=r"\(4, 48, 48\).*grayscale=False.*\(12, 48, 48\)"):
        load(small, resize=48, grayscale=False)
    with pytest.raises(ValueError, match=r"\(4, 48, 48\).*frame_stack=2.*\(2, 48, 48\)"):
        load(small, resize=48, frame_stack=2)


def test_an_action_set_of_another_size_is_refused_at_reset(checkpoint: Path) -> None:
    agent = load(checkpoint)
    with pytest.raises(ValueError, match=r"5 actions.*'simple' has 7"):
        agent.reset(seed=0, level="1-1", action_set="simple", actions=action_names("simple"))
    with pytest.raises(ValueError, match=r"5 actions.*'simple' has 7"):
        run_episode(
            "1-1", agent, MarioProtocol(sticky_p=0.0, action_set="simple"), env_seed=0, agent_seed=0
        )


def test_missing_and_corrupt_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no checkpoint file"):
        load(tmp_path / "absent.zip")
    corrupt = tmp_path / "corrupt.zip"
    corrupt.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="not a Stable-Baselines3 checkpoint"):
        load(corrupt)
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(ValueError, match="not a Stable-Baselines3 checkpoint"):
        load(other)
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("data", '{"policy_class": {"__module__": "mine.policies"}}')
    with pytest.raises(ValueError, match="not saved by one of PPO, A2C, DQN"):
        load(other)
    # A real checkpoint cut short: its zip directory is gone.
    whole = build_checkpoint(tmp_path / "whole", resize=36).read_bytes()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match="not a Stable-Baselines3 checkpoint"):
        load(cut, resize=36)
    with pytest.raises(ValueError, match="device"):
        load(tmp_path / "whole.zip", resize=36, device="tpu")


def test_cuda_without_a_gpu_runs_on_the_cpu_with_a_warning(
    checkpoint: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: cuda is used")
    with caplog.at_level(logging.WARNING, logger="workers.mario.sb3"):
        agent = load(checkpoint, device="cuda")
    assert agent.model.device.type == "cpu"
    assert any(
        "no CUDA GPU" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records
    )
    outcome = run_episode(
        "1-1", agent, MarioProtocol(sticky_p=0.0, max_steps=5), env_seed=0, agent_seed=0
    )
    assert outcome.steps == 5
