"""A checkpoint is loaded once per process (workers/mario/sb3.py, CACHE): the same actions as a
fresh load, keyed by the file's content (not its path), bounded, and shared by the units a
sandboxed checkpoint's warm process serves."""

from __future__ import annotations

import builtins
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")
pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")

from tests.mario.sb3_models import build_checkpoint, with_pickle_payload
from tests.mario.test_sb3 import load
from tests.needs import require_bwrap
from workers.fingerprint import file_fingerprint
from workers.mario.checkpoints import CACHE, CheckpointCache, LoadedModel
from workers.mario.protocol import MarioProtocol, action_names
from workers.mario.runner import run_episode
from workers.mario.sb3 import Preprocessing
from workers.sandbox.agent_sandbox import AgentLimits, AgentSource, untrusted_agent

LONG = MarioProtocol(max_steps=300, sticky_p=0.25)
LOADS: list[str] = []  # appended to by the counting checkpoint's pickle, in this process


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    CACHE.clear()
    yield
    CACHE.clear()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Untrained PPO (seed 1): its actions depend on the frames, so a stale stack would show."""
    return build_checkpoint(tmp_path_factory.mktemp("sb3") / "ppo", seed=1)


def play(agent: Any, env_seed: int, agent_seed: int) -> dict[str, Any]:
    outcome = run_episode("1-1", agent, LONG, env_seed=env_seed, agent_seed=agent_seed)
    return outcome.model_dump(exclude={"wall_s"})


def test_a_cached_model_plays_the_episodes_of_a_freshly_loaded_one(checkpoint: Path) -> None:
    fresh = {seeds: play(load(checkpoint, cache=False), *seeds) for seeds in [(2, 3), (8, 2)]}
    assert CACHE.keys() == []  # cache=False keeps nothing
    assert all(o["steps"] >= 100 for o in fresh.values())
    assert fresh[2, 3]["actions"] != fresh[8, 2]["actions"]
    first = load(checkpoint)
    assert play(first, 8, 2) == fresh[8, 2]
    # The next units: the same model, a new agent (its own frame stack), the same episodes.
    for seeds in [(2, 3), (8, 2), (2, 3)]:
        again = load(checkpoint)
        assert again is not first and again.model is first.model
        assert play(again, *seeds) == fresh[seeds]
    assert (CACHE.hits, CACHE.misses) == (3, 1)
    assert again.runtime == first.runtime and again.runtime["device"] == "cpu"


def test_the_key_is_the_content_not_the_path(checkpoint: Path, tmp_path: Path) -> None:
    path = tmp_path / "model.zip"
    shutil.copyfile(checkpoint, path)
    old = load(path).model
    assert load(checkpoint).model is old  # another path, the same bytes
    stat = path.stat()
    other = build_checkpoint(tmp_path / "other", seed=2)
    shutil.copyfile(other, path)  # rewritten in place (same inode)...
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ...its modify time set back
    new = load(path)
    assert new.model is not old
    frames = np.random.default_rng(0).integers(0, 256, (8, 240, 256, 3), dtype=np.uint8)
    expected = load(other, cache=False)
    for agent in (new, expected):
        agent.reset(seed=3, actions=action_names("right_only"))
    assert [new.act(f) for f in frames] == [expected.act(f) for f in frames]
    assert load(checkpoint).model is old  # both contents are held


def test_the_key_holds_device_and_preprocessing_and_refusals_are_not_kept(
    checkpoint: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import torch

    agent = load(checkpoint)
    ((digest, device, preprocessing),) = CACHE.keys()
    assert digest == file_fingerprint(checkpoint).digest  # the unit's agent fingerprint
    assert device == "cpu" and preprocessing == Preprocessing()
    with pytest.raises(ValueError, match=r"\(4, 84, 84\).*\(4, 48, 48\)"):
        load(checkpoint, resize=48)  # checked for each preprocessing, refused each time
    with pytest.raises(ValueError, match=r"\(4, 84, 84\).*\(4, 48, 48\)"):
        load(checkpoint, resize=48)
    assert len(CACHE.keys()) == 1
    if not torch.cuda.is_available():  # cuda without a GPU: the cpu model, still warned
        assert load(checkpoint, device="cuda").model is agent.model
        assert "no CUDA GPU" in caplog.text


def test_the_cache_keeps_the_most_recently_used() -> None:
    cache = CheckpointCache(2)
    models = {name: LoadedModel(object(), 5, "PPO") for name in "abc"}  # type: ignore[arg-type]
    keys = {name: (name * 64, "cpu", Preprocessing()) for name in "abc"}
    cache.put(keys["a"], models["a"])
    cache.put(keys["b"], models["b"])
    assert cache.get(keys["a"]) is models["a"]  # a is now the most recent
    cache.put(keys["c"], models["c"])
    assert cache.keys() == [keys["a"], keys["c"]] and cache.get(keys["b"]) is None
    assert (cache.hits, cache.misses) == (1, 1)


def test_a_process_unpickles_a_checkpoint_once(checkpoint: Path, tmp_path: Path) -> None:
    code = "import tests.mario.test_sb3_cache as t; t.LOADS.append('loaded')"
    counting = with_pickle_payload(checkpoint, tmp_path / "counting.zip", code)
    LOADS.clear()
    for _ in range(3):
        load(counting)
    assert LOADS == ["loaded"]
    load(counting, cache=False)
    assert LOADS == ["loaded"] * 2


LOADED_ONCE = (
    "import builtins\n"
    "if getattr(builtins, {flag!r}, False):\n"
    "    raise SystemExit('loaded twice in one process')  # SB3 turns an Exception into a warning\n"
    "setattr(builtins, {flag!r}, True)\n"
)


def test_a_sandboxed_checkpoints_warm_process_loads_it_once(
    checkpoint: Path, tmp_path: Path
) -> None:
    """The agent sandbox keeps a checkpoint's process warm between units (WARM_PROCESSES): the
    second unit's `make` finds the model loaded. This checkpoint refuses a second load in one
    process, so two units pass only if the jail's process loaded it once."""
    require_bwrap()
    flag = "_arena_test_loaded_once"
    once = with_pickle_payload(checkpoint, tmp_path / "once.zip", LOADED_ONCE.format(flag=flag))
    try:  # the control, in this process: a second load without the cache is refused
        load(once, cache=False)
        with pytest.raises(SystemExit, match="loaded twice in one process"):
            load(once, cache=False)
    finally:
        delattr(builtins, flag)
    source = AgentSource(checkpoint=str(once))
    limits = AgentLimits(data_dir=tmp_path / "data")
    frame = {"frame": np.zeros((240, 256, 3), np.uint8), "info": {"x_pos": 40}}
    pids = []
    for unit in range(3):
        with untrusted_agent(source, None, limits, step_timeout_s=30) as agent:
            agent.reset(seed=unit, actions=action_names("right_only"))
            assert 0 <= agent.act(frame) < 5
            pids.append(agent.process.pid)
    assert len(set(pids)) == 1
