"""The alympics workload's spec checks and expansion (no cluster needed)."""

from __future__ import annotations

import pytest

from arena.alympics import agent_spec, benchmark_spec
from tasks.spec import load_spec_file
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch
from workers.games import BASELINES


def test_the_example_spec_expands_to_one_unit_per_game_and_baseline():
    batch = validate_batch(load_spec_file("examples/alympics.yaml"))
    units = get_workload("alympics").expand(batch)
    assert len(units) == sum(len(b) for b in BASELINES.values()) == 13
    pd = [u for u in units if u.item.startswith("prisoners_dilemma@")]
    assert {u.payload["opponent"] for u in pd} == {"tit-for-tat", "always-defect"}
    assert {(u.payload["rounds"], u.payload["episodes"]) for u in pd} == {(100, 20)}
    auction = next(u for u in units if u.item.startswith("auction@"))
    assert (auction.payload["rounds"], auction.payload["episodes"]) == (1, 50)


def test_episodes_override_and_same_seeds_for_every_agent():
    spec = benchmark_spec("builtin", episodes=3)
    spec["agents"].append({"name": "other", "entry_point": "tests.integration.agents:crashing"})
    units = get_workload("alympics").expand(validate_batch(spec))
    assert {u.payload["episodes"] for u in units} == {3}
    seeds: dict[str, set[int]] = {}
    for u in units:
        seeds.setdefault(u.item, set()).add(u.env_seed)
    assert all(len(s) == 1 for s in seeds.values())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"protocol": {"episodes": 5}}, "protocol.episodes: alympics takes episodes per game"),
        ({"items": ["prisoners_dilemma"]}, "items: the composite needs all five games"),
        ({"items": ["chess"]}, "items[0].name"),
        ({"params": {"suite": "nope"}}, "params.suite: unknown suite 'nope'"),
        ({"agents": ["alphago"]}, "unknown built-in agent 'alphago'"),
        ({"agents": [{"name": "x", "url": "ftp://x"}]}, "agents[0].url"),
    ],
)
def test_bad_alympics_specs_name_the_field(change: dict, message: str):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_batch({**benchmark_spec(), **change})


def test_agent_names_from_the_command_line():
    assert agent_spec("builtin") == {"name": "builtin"}
    assert agent_spec("my_pkg.agents:make")["entry_point"] == "my_pkg.agents:make"
    http = agent_spec("http://127.0.0.1:8000/act")
    assert http["url"] == "http://127.0.0.1:8000/act" and http["name"].startswith("http-")
    assert benchmark_spec()["leaderboard"] == "alympics"
    assert benchmark_spec(episodes=3)["leaderboard"] is None  # its own board
