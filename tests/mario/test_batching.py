"""Batched policy calls (protocol `inference_batch`, workers/mario/batched.py): the mode keeps
its own boards, lockstep play gives valid unit results (the episodes one-by-one play gives, and
each replays from its action log), batched actions equal single ones on real observations, and
bad input is refused. Speed: bench/mario_batching.py; >= 4,096 observations:
bench/batch_agreement.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest

pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")
pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")

from bench._batching import agreement, record_observations
from tasks.execute import execute_batch
from tasks.workloads import get_workload, validate_batch
from tests.mario.sb3_models import build_checkpoint
from tests.needs import require_bwrap
from workers.mario.agents import InvalidAction
from workers.mario.batched import GROUPS, agent_policy, run_lockstep
from workers.mario.protocol import LockstepGroup, MarioProtocol, action_names
from workers.mario.runner import replay_episode, run_episode
from workers.mario.sb3 import BATCH_KEY, Preprocessing, load_checkpoint_agent
from workers.sandbox.agent_sandbox import AgentLimits, AgentSource, untrusted_agent

PROTOCOL = MarioProtocol(sticky_p=0.25, max_steps=200)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PPO trained a little (its logits no longer the initial ones), seed 1."""
    return build_checkpoint(tmp_path_factory.mktemp("sb3") / "ppo", seed=1, learn_steps=256)


def load(path: Path) -> Any:
    return load_checkpoint_agent(str(path), grayscale=True, resize=84, frame_stack=4, device="cpu")


def spec(path: Path, **params: Any) -> dict[str, Any]:
    return {
        "workload": "mario",
        "agents": ["right", {"name": "ppo", "sb3": str(path)}],
        "items": ["1-1"],
        "protocol": {"episodes": 5, "seed": 3},
        "params": {"sticky_p": 0.25, "max_steps": 200, **params},
    }


def test_the_mode_is_part_of_the_protocol_and_single_keeps_old_fingerprints(
    checkpoint: Path,
) -> None:
    assert "inference_batch" not in MarioProtocol().model_dump()  # boards before it: unchanged
    assert MarioProtocol(inference_batch=4).model_dump()["inference_batch"] == 4
    mario = get_workload("mario")
    single = mario.boards(validate_batch(spec(checkpoint), asker="operator"))
    batched = mario.boards(validate_batch(spec(checkpoint, inference_batch=4), asker="operator"))
    other = mario.boards(validate_batch(spec(checkpoint, inference_batch=8), asker="operator"))
    assert single.keys() == batched.keys() == other.keys() == {"mario-1-1"}
    assert len({single["mario-1-1"], batched["mario-1-1"], other["mario-1-1"]}) == 3
    for bad in (0, 33, True, "4", 2.0):
        with pytest.raises(pydantic.ValidationError, match="inference_batch"):
            MarioProtocol(inference_batch=bad)


def test_batched_actions_equal_single_ones_on_real_observations(checkpoint: Path) -> None:
    seen = record_observations(512)
    assert seen.shape == (512, 4, 84, 84) and len({o.tobytes() for o in seen}) > 400
    for row in agreement(load(checkpoint).model, seen, (8, 64)):
        assert row["differ"] == 0, row


def test_lockstep_play_gives_the_episodes_of_one_by_one_play(checkpoint: Path) -> None:
    agent = load(checkpoint)
    seeds = [11, 12, 13, 14, 15]
    agent.reset(seed=0, actions=action_names("right_only"))
    calls: list[int] = []

    def policy(batch: np.ndarray) -> Any:
        calls.append(len(batch))
        return agent_policy(agent)(batch)

    together = run_lockstep("1-1", policy, Preprocessing(), PROTOCOL, seeds)
    assert max(calls) == len(seeds) and calls == sorted(calls, reverse=True)
    assert len(together) == len(seeds) and len({o.actions for o in together}) > 1
    for seed, outcome in zip(seeds, together, strict=True):
        alone = run_episode("1-1", load(checkpoint), PROTOCOL, seed, seed)
        assert outcome.model_dump(exclude={"wall_s"}) == alone.model_dump(exclude={"wall_s"})
        replayed = replay_episode("1-1", outcome.actions, PROTOCOL, seed)
        assert replayed.model_dump(exclude={"wall_s"}) == outcome.model_dump(exclude={"wall_s"})


def test_a_batched_batch_gives_valid_unit_results(checkpoint: Path) -> None:
    GROUPS.clear()
    mario = get_workload("mario")
    batch = validate_batch(spec(checkpoint, inference_batch=2), asker="operator")
    units = mario.expand(batch)
    groups = [u.payload.get("group") for u in units]
    assert groups[:5] == [None] * 5  # a built-in plays alone
    assert [g["index"] for g in groups[5:]] == [0, 1, 0, 1, 0]
    assert mario.chunk_size_for(units) == 2
    results = execute_batch(batch)
    assert all(r.status == "ok" for r in results), [r.reason for r in results]
    single = {
        (r.agent, r.episode): r.result
        for r in execute_batch(validate_batch(spec(checkpoint), asker="operator"))
    }
    for r in results:
        assert r.result is not None and single[r.agent, r.episode] is not None
        drop = ("wall_s",)
        mine = {k: v for k, v in r.result.items() if k not in drop}
        assert mine == {k: v for k, v in single[r.agent, r.episode].items() if k not in drop}
    assert mario.reduce(batch, results).entries


def test_a_unit_whose_group_does_not_hold_it_is_refused(checkpoint: Path) -> None:
    mario = get_workload("mario")
    unit = mario.expand(validate_batch(spec(checkpoint, inference_batch=2), asker="operator"))[5]
    group = unit.payload["group"]
    bad_groups = [
        {**group, "index": 2},
        {**group, "env_seeds": [group["env_seeds"][1], group["env_seeds"][0]]},
        {**group, "env_seeds": group["env_seeds"] * 2},  # more than the protocol plays
        {**group, "env_seeds": []},
        {**group, "extra": 1},
    ]
    for bad in bad_groups:
        broken = unit.model_copy(update={"payload": {**unit.payload, "group": bad}})
        with pytest.raises((ValueError, pydantic.ValidationError)):
            mario.run_unit(broken)
    with pytest.raises(ValueError, match="not the unit's"):
        LockstepGroup(env_seeds=[1, 2], agent_seed=0, index=0).check(2, 2)


def test_bad_batches_and_answers_are_refused(checkpoint: Path) -> None:
    agent = load(checkpoint)
    for bad in (
        np.zeros((0, 4, 84, 84), np.uint8),
        np.zeros((2, 4, 84, 84), np.float32),
        np.zeros((2, 4, 48, 48), np.uint8),
        np.zeros((4, 84, 84), np.uint8),
    ):
        with pytest.raises(ValueError, match="batch of observations"):
            agent.act({BATCH_KEY: bad})
    with pytest.raises(ValueError, match="1 to 32"):
        run_lockstep("1-1", lambda b: [1] * len(b), Preprocessing(), PROTOCOL, [])
    with pytest.raises(ValueError, match="level"):
        run_lockstep("9-9", lambda b: [1] * len(b), Preprocessing(), PROTOCOL, [1])
    with pytest.raises(ValueError, match="1 actions for 2"):
        run_lockstep("1-1", lambda b: [1], Preprocessing(), PROTOCOL, [1, 2])
    with pytest.raises(InvalidAction):
        run_lockstep("1-1", lambda b: [7] * len(b), Preprocessing(), PROTOCOL, [1, 2])
    with pytest.raises(ValueError, match="got 3"):
        run_lockstep("1-1", agent_policy(_Constant()), Preprocessing(), PROTOCOL, [1, 2])


class _Constant:
    def act(self, observation: Any) -> Any:
        return 3  # an agent that answers a batch with one action


def test_the_jailed_child_answers_a_batch_as_the_worker_would(
    checkpoint: Path, tmp_path: Path
) -> None:
    require_bwrap()
    seen = record_observations(48)
    expected = load(checkpoint).act_batch(seen)
    source = AgentSource(checkpoint=str(checkpoint))
    limits = AgentLimits(data_dir=tmp_path / "data")
    with untrusted_agent(source, None, limits, step_timeout_s=60) as jailed:
        jailed.reset(seed=0, actions=action_names("right_only"))
        assert [jailed.act({BATCH_KEY: seen[i : i + 16]}) for i in (0, 16, 32)] == [
            expected[0:16],
            expected[16:32],
            expected[32:48],
        ]
        assert jailed.act({BATCH_KEY: seen[:5]}) == expected[:5]  # a smaller batch after
