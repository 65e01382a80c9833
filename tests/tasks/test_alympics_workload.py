"""The alympics workload's spec checks and expansion, and faults costing (no cluster needed)."""

from __future__ import annotations

import socket
import time

import pytest

from arena.service.alympics import BenchmarkResult, agent_spec, benchmark_spec, result_of
from tasks.execute import execute_batch
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


# Faults cost (docs/alympics.md, "Agents and faults") ----------------------------------------

AGENTS = "tests.integration.agents"


def run_benchmark(agent: str, episodes: int = 2) -> BenchmarkResult:
    batch = validate_batch(benchmark_spec(agent, episodes=episodes), asker="operator")
    return result_of(batch, execute_batch(batch))


def assert_all_forfeit(result: BenchmarkResult, why: str) -> None:
    assert len(result.results) == 13
    for unit in result.results:
        assert unit.status == "error", unit.item
        assert unit.reason is not None
        assert unit.reason.startswith("AgentForfeit: "), unit.reason
        assert why in unit.reason
    assert result.composite_score == 0
    assert all(category.score == 0 for category in result.categories.values())


def test_an_agent_that_raises_on_every_move_forfeits_and_scores_0():
    result = run_benchmark(f"{AGENTS}:alympics_raiser")
    assert_all_forfeit(result, "act failed: RuntimeError: agent bug: no move")
    # Play stops as soon as more than half of the moves have faulted: 101 of 100 x 2 in the PD.
    pd = next(r for r in result.results if r.item == "prisoners_dilemma@tit-for-tat")
    assert pd.reason is not None and "101 of 200 moves faulted (forfeit" in pd.reason


def test_an_agent_that_answers_garbage_forfeits_and_scores_0():
    result = run_benchmark(f"{AGENTS}:alympics_garbage")
    assert_all_forfeit(result, "invalid action: InvalidAction")


def test_faults_on_40_percent_of_moves_cost_without_forfeit():
    # 5 episodes: 2 of every 5 moves fault in every match set, one-shot games included.
    builtin = run_benchmark("builtin", episodes=5)
    faulty = run_benchmark(f"{AGENTS}:alympics_sometimes", episodes=5)
    for unit in faulty.results:
        assert unit.status == "ok", unit.reason
        rounds = {"prisoners_dilemma": 100, "public_goods": 50}.get(unit.result["game"], 1)
        assert unit.result["measures"]["faults"] == 2 * rounds  # 40% of 5 episodes' moves
    for own, faulted in zip(builtin.results, faulty.results, strict=True):
        for name, value in own.result["measures"].items():
            if name != "faults" and value > 0:
                assert faulted.result["measures"][name] < value, (own.item, name)
    # Against tit-for-tat the builtin cooperates throughout; its faulted 40% count as
    # defections, each credited mutual defection's 1 (normalised 0).
    pd = next(r for r in faulty.results if r.item == "prisoners_dilemma@tit-for-tat")
    assert pd.result["measures"]["cooperation"] == 60.0
    assert pd.result["measures"]["strategic"] == pytest.approx(60.0)
    assert faulty.composite_score < builtin.composite_score
    for name in ("strategic", "cooperation", "fairness", "robustness"):
        assert faulty.categories[name].score <= builtin.categories[name].score, name
    assert faulty.categories["cooperation"].score < builtin.categories["cooperation"].score
    # Same seed, same result, faults and all.
    again = run_benchmark(f"{AGENTS}:alympics_sometimes", episodes=5)
    assert again.to_json() == faulty.to_json()


def test_an_http_agent_with_nothing_listening_forfeits_quickly():
    with socket.socket() as probe:  # a free loopback port, closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.perf_counter()
    result = run_benchmark(f"http://127.0.0.1:{port}/act")
    assert time.perf_counter() - started < 10
    assert_all_forfeit(result, "act failed: HttpAgentError: request failed: ConnectError")
