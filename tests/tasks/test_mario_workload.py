"""The mario workload's spec checks, boards, queues and reducer (no emulator, no cluster)."""

from __future__ import annotations

import pytest

from scoring.mario import AggregateStats
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import UnitResult
from tasks.workloads.mario_spec import BUILTIN_NAMES


def mario_spec(**overrides: object) -> dict:
    spec: dict = {
        "workload": "mario",
        "agents": ["right", {"name": "mine", "entry_point": "tests.integration.agents:chatty"}],
        "items": ["1-1", "4-2"],
        "protocol": {"episodes": 3, "seed": 0},
        "params": {
            "frame_skip": 4,
            "action_set": "right_only",
            "sticky_p": 0.25,
            "max_steps": 4500,
        },
    }
    spec.update(overrides)
    return spec


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"items": ["9-1"]}, "items[0].name: unknown level '9-1'"),
        ({"items": ["1-5"]}, "items[0].name"),
        ({"params": {"action_set": "everything"}}, "params.action_set"),
        ({"params": {"frame_skip": 0}}, "params.frame_skip"),
        ({"params": {"sticky_p": 1.0}}, "params.sticky_p"),
        ({"protocol": {"episodes": -1}}, "protocol.episodes"),
        ({"agents": ["mario-kart"]}, "unknown built-in agent 'mario-kart'"),
        (
            {"agents": [{"name": "x", "sb3": "missing.zip"}]},
            "agents[0].sb3: 'missing.zip' is not a checkpoint",
        ),
        ({"agents": [{"name": "right", "preprocess": {"resize": 84}}]}, "preprocess: applies"),
    ],
)
def test_bad_mario_specs_name_the_field(change: dict, message: str):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_batch(mario_spec(**change))


def test_one_board_per_level_and_its_own_protocol():
    mario = get_workload("mario")
    both = mario.boards(validate_batch(mario_spec()))
    assert list(both) == ["mario-1-1", "mario-4-2"]
    one = mario.boards(validate_batch(mario_spec(items=["1-1"], agents=["random"])))
    assert one == {"mario-1-1": both["mario-1-1"]}  # same level, same protocol: one board
    other = mario.boards(validate_batch(mario_spec(params={"sticky_p": 0.0})))
    assert other["mario-1-1"] != both["mario-1-1"]  # another protocol, another fingerprint
    named = mario.boards(validate_batch(mario_spec(leaderboard="nightly")))
    assert list(named) == ["nightly-1-1", "nightly-4-2"]


def test_a_cuda_agent_goes_to_the_gpu_queue():
    spec = mario_spec(agents=["right", {"name": "big", "builtin": "random", "device": "cuda"}])
    units = get_workload("mario").expand(validate_batch(spec))
    assert {u.queue for u in units if u.agent == "big"} == {"gpu"}
    assert {u.queue for u in units if u.agent == "right"} == {"cpu"}


def test_the_builtin_names_are_the_runners():
    from workers.mario.agents import BUILTIN

    assert set(BUILTIN_NAMES) == set(BUILTIN)


def unit(agent: str, level: str, episode: int, **result: object) -> UnitResult:
    base = {
        "level": level,
        "completed": False,
        "world": int(level[0]),
        "stage": int(level[2]),
        "max_x": 500,
        "steps": 100,
        "frames": 400,
        "coins": 0,
        "time_remaining": 300,
        "lives_lost": 1,
        "levels_completed": None,
        "arena_score": 0.0,
    }
    if result.get("status") == "error":
        return UnitResult(
            unit_id=f"b:{agent}:{level}:{episode}",
            agent=agent,
            item=level,
            episode=episode,
            status="error",
            reason="RuntimeError: boom",
        )
    return UnitResult(
        unit_id=f"b:{agent}:{level}:{episode}",
        agent=agent,
        item=level,
        episode=episode,
        status="ok",
        result={**base, **result},
    )


def test_the_reducer_scores_each_level_on_its_own_board_with_the_rubric():
    batch = validate_batch(mario_spec(agents=["right", "random"]))
    results = [
        unit("right", "1-1", 0, max_x=800),
        unit("right", "1-1", 1, max_x=900),
        unit("right", "1-1", 2, status="error"),
        unit("random", "1-1", 0, completed=True, max_x=3200, time_remaining=250),
        unit("random", "1-1", 1),
        unit("random", "1-1", 2),
        *(unit(a, "4-2", e, world=4, stage=2) for a in ("right", "random") for e in range(3)),
    ]
    reduction = get_workload("mario").reduce(batch, results)
    boards = {(e.board, e.agent): e for e in reduction.entries}
    assert set(boards) == {(b, a) for b in ("mario-1-1", "mario-4-2") for a in ("right", "random")}
    right = boards["mario-1-1", "right"].stats
    assert (right["episodes"], right["failed"], right["success_rate"]) == (3, 1, 0.0)
    assert right["arena_score"] == 1 * 10_000 + 1_000 + 900 - 10.0
    assert boards["mario-1-1", "random"].score > 1_000_000  # a completed level
    for key in (
        "arena_score",
        "success_rate",
        "success_ci95",
        "mean_score",
        "std_score",
        "iqm_score",
        "iqm_ci95",
        "avg_steps",
        "avg_max_x",
        "protocol",
    ):
        assert key in right
    ranked = get_workload("mario").rank([boards["mario-1-1", a] for a in ("right", "random")])
    assert [e.agent for e in ranked] == ["random", "right"]
    text = get_workload("mario").format_board(
        "mario-1-1", [e for e in boards.values() if e.board == "mario-1-1"]
    )
    assert text is not None and "MARIO ARENA LEADERBOARD" in text and "IQM [95% CI]" in text
    assert AggregateStats.model_validate(
        {k: right[k] for k in AggregateStats.model_fields}, strict=False
    )
