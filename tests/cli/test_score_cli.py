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


def test_race_rubric_example_reproduces_the_seed():
    path = str(EXAMPLES / "race-example.json")
    out = json.loads(arena("score", "race", path, "--json").stdout)
    assert [(a["name"], a["rank"]) for a in out["agents"]] == [
        ("Codex CLI", 1),
        ("Claude Code", 2),
        ("Cursor CLI", 3),
    ]
    assert [a["composite"] for a in out["agents"]] == pytest.approx([93.25, 91.25, 16.0])
    assert (out["winner"], out["verdict"]) == ("Codex CLI", "auto-merge")
    cursor = out["agents"][2]
    assert cursor["scores"] == {"build": 0, "tests": 0, "lint": 0, "diff_size": 60, "speed": 70}
    assert cursor["notes"] == ["build failed: tests and lint not run"]
    assert "measures" not in cursor
    human = arena("score", "race", path).stdout.splitlines()
    assert human[3:6] == [
        "  #1  Codex CLI      93.3 / 100    [BUILD: ✓] [TESTS: 80] [LINT: 100] [DIFF: 95] [SPEED: 100]",  # noqa: E501
        "  #2  Claude Code    91.3 / 100    [BUILD: ✓] [TESTS: 95] [LINT: 90]  [DIFF: 75] [SPEED: 80]",  # noqa: E501
        "  #3  Cursor CLI     16.0 / 100    [BUILD: ✗] [TESTS: --] [LINT: --]  [DIFF: 60] [SPEED: 70]",  # noqa: E501
    ]


def test_race_failed_build_makes_tests_and_lint_0():
    out = score_json(
        "race",
        {
            "agents": [
                {"name": "a", "build": 0, "diff_size": 60, "speed": 70},  # formerly 29.09
                {
                    "name": "b",
                    "build": 0,
                    "tests": 80,
                    "lint": 90,
                    "diff_size": 60,
                    "speed": 70,
                },  # 53.5
            ]
        },
    )
    assert [a["composite"] for a in out["agents"]] == pytest.approx([16.0, 16.0])
    assert [a["rank"] for a in out["agents"]] == [1, 1]  # a tie
    assert out["agents"][1]["scores"]["tests"] == 0 and out["agents"][1]["scores"]["lint"] == 0
    assert out["measured"] == ["build", "tests", "lint", "diff_size", "speed"]


def test_race_measured_leaves_a_dimension_out_for_everyone():
    out = score_json(
        "race",
        {
            "measured": ["build", "lint", "diff_size", "speed"],
            "agents": [
                {"name": "Codex CLI", "build": 100, "lint": 100, "diff_size": 95, "speed": 100},
                {
                    "name": "no-tests",
                    "build": 100,
                    "tests": None,
                    "lint": 100,
                    "diff_size": 100,
                    "speed": 50,
                },
            ],
        },
    )
    # Codex: (3000 + 1500 + 1425 + 1000) / 70 = 98.57...; no-tests: (3000 + 1500 + 1500 + 500) / 70
    assert [(a["name"], a["composite"]) for a in out["agents"]] == [
        ("Codex CLI", pytest.approx(6925 / 70)),
        ("no-tests", pytest.approx(6500 / 70)),
    ]
    assert out["measured"] == ["build", "lint", "diff_size", "speed"]


def test_race_raw_measures_example():
    path = str(EXAMPLES / "race-raw-measures.json")
    out = json.loads(arena("score", "race", path, "--json").stdout)
    assert out["measured"] == ["build", "tests", "lint", "diff_size", "speed"]
    # By hand (tests/scoring/test_race.py::test_score_race_by_hand): 97.75, 96.68, 17.1988...
    assert [(a["name"], a["composite"]) for a in out["agents"]] == [
        ("Codex CLI", pytest.approx(97.75)),
        ("Claude Code", pytest.approx(96.68)),
        ("Cursor CLI", pytest.approx((67.6 * 15 + 3600 / 51 * 10) / 100)),
    ]
    assert out["agents"][0]["scores"]["tests"] == pytest.approx(92.5)
    raw = json.loads((EXAMPLES / "race-raw-measures.json").read_text())["agents"]
    codex = next(a for a in raw if a["name"] == "Codex CLI")
    assert (
        out["agents"][0]["measures"]["tests"]["counts"]["passed"]
        == codex["tests"]["counts"]["passed"]
    )
    assert out["agents"][0]["measures"]["diff"] == codex["diff"]
    assert out["agents"][2]["notes"] == ["build failed: tests and lint not run"]
    human = arena("score", "race", path).stdout
    # A dimension that is not a whole number shows one decimal (92.5 read 93 before).
    assert "  #1  Codex CLI      97.8 / 100    [BUILD: ✓] [TESTS: 92.5] [LINT: 100]" in human
    assert "[BUILD: ✗] [TESTS: --]   [LINT: --]  [DIFF: 67.6] [SPEED: 70.6]" in human


RAW_AGENT = {
    "name": "a",
    "build": {"exit_code": 0},
    "tests": {"exit_code": 0},
    "lint": {"exit_code": 0},
    "diff": {"lines_added": 1, "lines_removed": 0, "files_changed": 1},
}


def test_race_raw_measures_with_an_unparsed_baseline_say_so():
    agent = {**RAW_AGENT, "tests": {"exit_code": 1, "counts": {"passed": 3, "failed": 1}}}
    out = score_json("race", {"baseline": {"tests": {"exit_code": 1}}, "agents": [agent]})
    (only,) = out["agents"]
    assert only["scores"]["tests"] == pytest.approx(75.0)  # 3/4, no bonus for 4 "new" tests
    assert any("baseline's output was not parsed" in n for n in only["notes"])
    assert (
        "Notes:"
        in arena(
            "score",
            "race",
            "-",
            stdin=json.dumps({"baseline": {"tests": {"exit_code": 1}}, "agents": [agent]}),
        ).stdout
    )


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
        (
            "race",
            {"agents": [{"name": "a", "build": 50, "tests": 1, "lint": 1}]},
            "agents[0].build: must be 0 or 100",
        ),
        (
            "race",
            {
                "agents": [
                    {"name": "a", "build": 100, "tests": 80, "lint": 100},
                    {"name": "b", "build": 100, "lint": 100},
                ]
            },
            "agents[1].tests: missing; the race measures tests (list the measured dimensions in "
            '"measured" to leave one out)',
        ),
        (
            "race",
            {"measured": ["build", "style"], "agents": [{"name": "a", "build": 100}]},
            "measured[1]",
        ),
        (
            "race",
            {"measured": ["lint"], "agents": [{"name": "a", "build": 100, "lint": 1}]},
            "agents[0].build: given, but the race does not measure build",
        ),
        ("race", {"measured": [], "agents": [{"name": "a"}]}, "measured"),
        (
            "race",
            {"baseline": {}, "agents": [{**RAW_AGENT, "diff": {"lines_added": 1}}]},
            "agents[0].diff.lines_removed",
        ),
        (
            "race",
            {"configured": {"lint": False}, "agents": [RAW_AGENT]},
            "agents[0].lint: given, but the race runs no lint command",
        ),
        ("race", {"agents": [{**RAW_AGENT, "tests": None}]}, "agents[0].tests: missing"),
        (
            "race",
            {"agents": [{**RAW_AGENT, "duration_s": 3}, {**RAW_AGENT, "name": "b"}]},
            "agents[1].duration_s: missing",
        ),
        (
            "race",
            {"agents": [{**RAW_AGENT, "build": {"exit_code": "0"}}]},
            "agents[0].build.exit_code",
        ),
        (
            "race",
            {
                "agents": [
                    {**RAW_AGENT, "lint": {"exit_code": 1, "counts": {"errors": -1, "warnings": 0}}}
                ]
            },
            "agents[0].lint.counts.errors",
        ),
        ("race", {"agents": [{**RAW_AGENT, "speed": 100}]}, "agents[0].speed"),  # unknown field
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
        "97.8 / 100",  # race-raw-measures.json
        "builtin scored 73/100",
    ):
        assert figure in result.stdout


@pytest.mark.parametrize(
    ("workload", "text", "field"),
    [
        (
            "mario",
            '{"world": 1, "stage": 1, "completed": true, "max_x_pos": 1, "steps": 1e400}',
            "steps",
        ),
        ("mario", json.dumps({**EPISODE, "steps": 10**400}), "steps"),
        ("mario", json.dumps({**EPISODE, "max_x_pos": 10**22}), "max_x_pos"),
        (
            "race",
            '{"weights": {"build": Infinity}, "agents": [{"name": "a", "build": 100}]}',
            "weights.build",
        ),
        (
            "race",
            '{"weights": {"build": 1e308, "tests": 1e308}, '
            '"agents": [{"name": "a", "build": 100, "tests": 100}]}',
            "weights.build",
        ),
        (
            "race",
            '{"thresholds": {"auto_merge_minimum": 10, "fail_maximum": 50}, '
            '"agents": [{"name": "a", "build": 0}]}',
            "thresholds",
        ),
        (
            "alympics",
            json.dumps(json.loads((EXAMPLES / "alympics-example.json").read_text())).replace(
                '"fairness": 80', '"fairness": NaN'
            ),
            "games.public_goods.fairness",
        ),
    ],
)
def test_nonsense_numbers_exit_2_and_json_never_holds_nan(workload, text, field):
    for extra in ((), ("--json",)):
        result = arena("score", workload, "-", *extra, stdin=text)
        assert result.returncode == 2, result.stdout
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("arena: error: ") and field in lines[0]
