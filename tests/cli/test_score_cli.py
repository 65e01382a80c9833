"""`arena score` and `arena demo` through the real console script, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ARENA = str(Path(sys.executable).with_name("arena"))
EXAMPLES = Path(__file__).resolve().parents[2] / "arena" / "examples" / "scoring"


def arena(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ARENA, *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


def score_json(workload: str, data: object) -> dict:
    result = arena("score", workload, "-", "--json", stdin=json.dumps(data))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_mario_single_episode_human_and_json():
    path = str(EXAMPLES / "mario-1-completion.json")
    human = arena("score", "mario", path)
    assert human.returncode == 0
    assert "Arena Score: 1,018,182" in human.stdout
    out = json.loads(arena("score", "mario", path, "--json").stdout)
    assert out["arena_score"] == pytest.approx(1_018_181.8)


def test_mario_list_gives_the_aggregate():
    out = score_json("mario", json.loads((EXAMPLES / "mario-5-best-of-n.json").read_text()))
    assert out["arena_score"] == pytest.approx(1_018_181.8)
    assert out["success_rate"] == 0.5
    assert out["episodes"] == 4 and len(out["episode_scores"]) == 4
    low, high = out["success_ci95"]
    assert low < 0.5 < high


def test_mario_agents_give_a_leaderboard():
    out = score_json("mario", json.loads((EXAMPLES / "mario-6-leaderboard.json").read_text()))
    assert [row["name"] for row in out["leaderboard"]] == [
        "PPO-v3-1M",
        "PPO-v2-500k",
        "PPO-v1-100k",
    ]
    human = arena("score", "mario", str(EXAMPLES / "mario-6-leaderboard.json")).stdout
    assert "MARIO ARENA LEADERBOARD" in human


def test_mario_full_game():
    out = score_json("mario", json.loads((EXAMPLES / "mario-4-full-game.json").read_text()))
    assert out["arena_score"] == pytest.approx(21_954.4)


def test_race_ranks_by_composite_with_missing_and_null_dimensions():
    out = score_json(
        "race",
        {
            "weights": {"build": 30, "tests": 30, "lint": 15, "diff_size": 15, "speed": 10},
            "agents": [
                {"name": "Codex CLI", "build": 100, "tests": 80, "lint": 100, "diff_size": 95,
                 "speed": 100},
                {"name": "no-tests", "build": 100, "tests": None, "lint": 100, "diff_size": 100},
            ],
        },
    )  # fmt: skip
    assert [(a["name"], a["rank"]) for a in out["agents"]] == [("no-tests", 1), ("Codex CLI", 2)]
    assert out["agents"][0]["composite"] == pytest.approx(100.0)
    assert out["agents"][1]["composite"] == pytest.approx(93.25)
    assert out["verdict"] == "auto-merge"


def test_alympics_json_names_the_composite():
    out = score_json("alympics", json.loads((EXAMPLES / "alympics-example.json").read_text()))
    assert out["composite_score"] == pytest.approx(73.05)
    assert out["categories"]["fairness"]["score"] == pytest.approx(78.2)


EPISODE = {"world": 1, "stage": 1, "completed": True, "max_x_pos": 3266, "steps": 342}


@pytest.mark.parametrize(
    ("workload", "data", "field"),
    [
        ("mario", {k: v for k, v in EPISODE.items() if k != "world"}, "world"),  # missing
        ("mario", {**EPISODE, "steps": "many"}, "steps"),  # wrong type
        ("mario", {**EPISODE, "steps": "342"}, "steps"),  # numbers are not text
        ("mario", {**EPISODE, "steps": -5}, "steps"),  # negative
        ("mario", {**EPISODE, "completed": 1}, "completed"),
        ("mario", {**EPISODE, "lives": 3}, "lives"),  # unknown key
        ("mario", [EPISODE, {**EPISODE, "coins": -1}], "[1].coins"),
        ("mario", [], "episodes"),
        ("mario", [EPISODE, {**EPISODE, "frame_skip": 8}], "frame_skip"),
        (
            "mario",
            {
                "full_game": True,
                "world": 2,
                "stage": 1,
                "max_x_pos": 1,
                "steps": 1,
                "levels_completed": 9,
            },
            "levels_completed",
        ),
        ("race", {"agents": []}, "agents"),
        ("race", {"agents": [{"name": "a", "build": 101}]}, "agents[0].build"),
        (
            "race",
            {"agents": [{"name": "a", "build": 1}], "weights": {"build": -1}},
            "weights.build",
        ),
        ("race", {"agents": [{"name": "a", "build": 1}, {"name": "a"}]}, "duplicate"),
        ("race", {"agents": [{"name": "a", "speed": 50}], "weights": {"speed": 0}}, "dimension"),
        ("alympics", {"games": {"chess": {"strategic": 1}}}, "games.chess"),  # unknown game
        ("alympics", {"games": {"auction": {"strategic": "high"}}}, "games.auction.strategic"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_field(workload, data, field):
    result = arena("score", workload, "-", stdin=json.dumps(data))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("arena: error: ")
    assert field in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "needle"),
    [
        (("score", "chess", "-"), "{}", "chess"),  # unknown workload
        (("score", "mario", "/nonexistent/x.json"), None, "/nonexistent/x.json"),
        (("score", "mario", "-"), "{not json", "not valid JSON"),
        (("score", "mario", "-"), "42", "expected a JSON object"),
        (("score",), None, "Missing argument"),
    ],
)
def test_bad_invocations_exit_2_with_one_line(args, stdin, needle):
    result = arena(*args, stdin=stdin)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert needle in result.stderr


def test_demo_scores_every_rubric_example():
    result = arena("demo")
    assert result.returncode == 0, result.stderr
    for figure in (
        "1,018,182",
        "13,067",
        "1,039,026",
        "21,954",
        "93.3 / 100",
        "builtin scored 73/100",
    ):
        assert figure in result.stdout


@pytest.mark.parametrize(
    ("workload", "text", "field"),
    [
        ("mario", '{"world": 1, "stage": 1, "completed": true, "max_x_pos": 1, "steps": 1e400}',
         "steps"),
        ("mario", json.dumps({**EPISODE, "steps": 10**400}), "steps"),
        ("mario", json.dumps({**EPISODE, "max_x_pos": 10**22}), "max_x_pos"),
        ("race", '{"weights": {"build": Infinity}, "agents": [{"name": "a", "build": 100}]}',
         "weights.build"),
        ("race", '{"weights": {"build": 1e308, "tests": 1e308}, '
                 '"agents": [{"name": "a", "build": 100, "tests": 100}]}', "weights.build"),
        ("race", '{"thresholds": {"auto_merge_minimum": 10, "fail_maximum": 50}, '
                 '"agents": [{"name": "a", "build": 0}]}', "thresholds"),
        ("alympics", json.dumps(json.loads((EXAMPLES / "alympics-example.json").read_text()))
         .replace('"fairness": 80', '"fairness": NaN'), "games.public_goods.fairness"),
    ],
)  # fmt: skip
def test_nonsense_numbers_exit_2_and_json_never_holds_nan(workload, text, field):
    for extra in ((), ("--json",)):
        result = arena("score", workload, "-", *extra, stdin=text)
        assert result.returncode == 2, result.stdout
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("arena: error: ") and field in lines[0]
