"""Races on the cluster: real git repositories built on the fly (tests/race/projects.py), real
build/test/lint tools run through the local sandbox, real workers; every dimension and the
ranking checked against values computed by hand from the branches' facts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tasks.execute import execute_batch
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch
from tests.integration.conftest import ROOT, arena
from tests.race.conftest import require_cargo
from tests.race.projects import (
    agent_spec_entries,
    git,
    make_cargo_repo,
    make_python_repo,
)

pytestmark = pytest.mark.integration

# Listed fastest first: durations 30, 45, 60, ... s, so speed = 30 / duration * 100.
PY_ORDER = [
    "clean",
    "adds-tests",
    "breaks-test",
    "lint-errors",
    "huge-diff",
    "broken-build",
    "hanging-test",
]
# By hand from tests/race/projects.py's facts (baseline: 6 passed, ruff clean; weights
# 30/30/15/15/10). diff: churn <= 100 and <= 5 files is 100.
PY_EXPECTED = {
    "clean": dict(build=100, tests=100, lint=100, diff_size=100, speed=100),
    # 8/8 pass plus 2 new tests: 100 + 2/8*10 clamps to 100.
    "adds-tests": dict(build=100, tests=100, lint=100, diff_size=100, speed=30 / 45 * 100),
    # 5 of 6 pass; one regression: 5/6*100 - 1/6*50 = 75.
    "breaks-test": dict(build=100, tests=75, lint=100, diff_size=100, speed=50),
    # 3 new ruff findings, counted as errors: 100 - 3*10.
    "lint-errors": dict(build=100, tests=100, lint=70, diff_size=100, speed=40),
    # 700 lines: 60 - (700-500)/1000*40 = 52; 20 files: 70 - (20-15)/20*40 = 60.
    "huge-diff": dict(
        build=100, tests=100, lint=100, diff_size=52 * 0.6 + 60 * 0.4, speed=30 / 90 * 100
    ),
    # The build fails: tests and lint are 0, not run.
    "broken-build": dict(build=0, tests=0, lint=0, diff_size=100, speed=30 / 105 * 100),
    # pytest is killed at the 10 s check timeout: tests 0.
    "hanging-test": dict(build=100, tests=0, lint=100, diff_size=100, speed=25),
}
WEIGHTS = dict(build=30, tests=30, lint=15, diff_size=15, speed=10)


def composite(scores: dict[str, float]) -> float:
    return sum(scores[d] * w for d, w in WEIGHTS.items()) / sum(WEIGHTS.values())


def embedded_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return {**env, "ARENA_DATA_DIR": str(data_dir), "ARENA_WORKERS": "2", "PYTHONPATH": str(ROOT)}


def race_run(spec: dict, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    """`arena race run SPEC --json` on the embedded cluster; its result and environment."""
    path = tmp_path / "race.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = embedded_env(tmp_path / "data")
    return arena("race", "run", str(path), "--json", env=env), env


@pytest.fixture(autouse=True)
def repo_roots(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """validate_batch's default asker is a token holder, who names only repositories under
    ARENA_REPO_ROOTS: every repository here is built under pytest's temporary folder."""
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(tmp_path_factory.getbasetemp()))


@pytest.fixture
def python_repo(tmp_path: Path):
    return make_python_repo(tmp_path / "repo")


def test_a_python_race_on_the_embedded_cluster(python_repo, tmp_path: Path):
    ghost = {"name": "ghost", "branch": "nope", "duration_s": 10.0}
    agents = [*agent_spec_entries(python_repo, PY_ORDER), ghost]
    spec = {
        "workload": "race",
        "task": "add a feature",
        "repo": str(python_repo.path),
        "agents": agents,
    }
    ran, env = race_run(spec, tmp_path)
    # A branch that does not exist is refused at submission: one line naming it, nothing run
    # or stored (issue 22: before, it was an error unit and the race was still auto-merged).
    assert ran.returncode == 2, ran.stderr
    index = len(agents) - 1
    assert ran.stderr.strip() == (
        f"arena: error: agents[{index}].branch: 'nope' is not a branch, tag or commit of the "
        "repository"
    )
    assert not (tmp_path / "data").exists()
    spec["agents"] = agents[:-1]
    ran, env = race_run(spec, tmp_path)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["errors"] == {} and result["review_reason"] is None
    assert result["verdict"] == "auto-merge" and result["winner"] == "clean"
    got = {a["name"]: a for a in result["agents"]}
    assert set(got) == set(PY_ORDER)
    for name, expected in PY_EXPECTED.items():
        assert got[name]["scores"] == pytest.approx(expected), name
        assert got[name]["composite"] == pytest.approx(composite(expected)), name
    order = sorted(PY_EXPECTED, key=lambda n: -composite(PY_EXPECTED[n]))
    assert [a["name"] for a in result["agents"]] == order
    assert [a["rank"] for a in result["agents"]] == list(range(1, len(order) + 1))
    # The raw measures behind them.
    facts = python_repo.facts
    for name in PY_ORDER:
        diff = got[name]["measures"]["diff"]
        f = facts[name]
        assert (diff["lines_added"], diff["lines_removed"], diff["files_changed"]) == (
            f.lines_added,
            f.lines_removed,
            f.files_changed,
        ), name
    assert got["breaks-test"]["measures"]["tests"]["counts"]["passed"] == 5
    assert got["hanging-test"]["measures"]["tests"]["timed_out"] is True
    assert got["broken-build"]["measures"]["tests"] is None
    assert result["baseline"]["tests"]["counts"]["passed"] == 6

    # The seed's layout, the winner's branch and the merge hint.
    shown = arena("race", "results", result["batch_id"], env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == 'Race Results — Task: "add a feature"'
    assert lines[3].split()[:4] == ["#1", "clean", "100.0", "/"]
    cells = "[BUILD: ✓] [TESTS: 100] [LINT: 100] [DIFF: 100] [SPEED: 100]"
    assert " ".join(lines[3].split()).endswith(cells)
    broken = next(line for line in lines if "broken-build" in line)
    assert "[BUILD: ✗] [TESTS: --] [LINT: --] [DIFF: 100] [SPEED: 28.6]" in " ".join(broken.split())
    assert "Winner: clean (branch: clean)" in shown.stdout
    assert f"arena race merge {result['batch_id']}" in shown.stdout

    # The race's board, in the same layout, ranked the same way.
    (board,) = arena("leaderboard", env=env).stdout.split()
    shown_board = arena("leaderboard", board, env=env).stdout.splitlines()
    assert shown_board[0].startswith(f"Race Leaderboard {board}")
    ranks = [line.split()[:2] for line in shown_board if line.strip().startswith("#")]
    assert ranks == [[f"#{i}", name] for i, name in enumerate(order, start=1)]

    # Every command's whole output is in the check's log.
    logs = arena("race", "logs", result["batch_id"], "breaks-test", env=env)
    assert "== tests: python -m pytest" in logs.stdout and "1 failed, 5 passed" in logs.stdout
    base_logs = arena("race", "logs", result["batch_id"], "baseline", env=env)
    assert "6 passed" in base_logs.stdout

    # Auto-merge: the winner's scored commit lands on main as a merge commit.
    winner_commit = got["clean"]["commit"]
    merged = arena("race", "merge", result["batch_id"], env=env)
    assert merged.returncode == 0, merged.stderr
    parents = git(python_repo.path, "rev-list", "--parents", "-n", "1", "main").split()
    assert parents[2] == winner_commit
    again = arena("race", "merge", result["batch_id"], env=env)  # main moved: refused
    assert again.returncode == 1 and "moved since the race" in again.stderr


def test_a_tie_at_the_top_is_never_merged_by_name(python_repo, tmp_path: Path):
    """Two agents with the same commit and the same time tie at 100.0: the verdict is review,
    there is no winner, and `arena race merge` refuses even with --force (issue 20, item 3)."""
    (clean,) = agent_spec_entries(python_repo, ["clean"])
    agents = [{**clean, "name": "twin-b"}, {**clean, "name": "twin-a"}]
    spec = {"workload": "race", "task": "tie", "repo": str(python_repo.path), "agents": agents}
    ran, env = race_run(spec, tmp_path)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert [a["composite"] for a in result["agents"]] == [100.0, 100.0]
    assert (result["verdict"], result["winner"], result["tied"]) == (
        "review",
        None,
        ["twin-a", "twin-b"],
    )
    shown = arena("race", "results", result["batch_id"], env=env)
    assert "Winner: none: twin-a, twin-b tie at 100.0 / 100" in shown.stdout, shown.stdout
    head = git(python_repo.path, "rev-parse", "main")
    for extra in ([], ["--force"]):
        merged = arena("race", "merge", result["batch_id"], *extra, env=env)
        assert merged.returncode == 1 and "tie at the top" in merged.stderr, merged.stderr
    assert git(python_repo.path, "rev-parse", "main") == head  # nothing merged


CARGO_ORDER = ["clean", "adds-tests", "breaks-test", "lint-warning", "broken-build"]
# Baseline: 3 passed, clippy clean.
CARGO_EXPECTED = {
    "clean": dict(build=100, tests=100, lint=100, diff_size=100, speed=100),
    "adds-tests": dict(build=100, tests=100, lint=100, diff_size=100, speed=30 / 45 * 100),
    # 2 of 3 pass, one regression: 2/3*100 - 1/3*50 = 50.
    "breaks-test": dict(build=100, tests=50, lint=100, diff_size=100, speed=50),
    # One new clippy warning: 100 - 2.
    "lint-warning": dict(build=100, tests=100, lint=98, diff_size=100, speed=40),
    "broken-build": dict(build=0, tests=0, lint=0, diff_size=100, speed=30 / 90 * 100),
}


def test_a_cargo_race_in_process_matches_the_hand_computed_scores(tmp_path: Path):
    require_cargo()
    repo = make_cargo_repo(tmp_path / "repo")
    spec = {
        "workload": "race",
        "task": "crate",
        "repo": str(repo.path),
        "agents": agent_spec_entries(repo, CARGO_ORDER),
    }
    batch = validate_batch(spec)
    results = execute_batch(batch)
    assert [r.status for r in results] == ["ok"] * (len(CARGO_ORDER) + 1), [
        r.reason for r in results
    ]
    summary = get_workload("race").reduce(batch, results).summary
    got = {a["name"]: a for a in summary["agents"]}
    for name, expected in CARGO_EXPECTED.items():
        assert got[name]["scores"] == pytest.approx(expected), (name, got[name]["notes"])
        assert got[name]["composite"] == pytest.approx(composite(expected)), name
    assert summary["winner"] == "clean" and summary["verdict"] == "auto-merge"


def race_spec(repo: Path, **scoring: object) -> dict:
    return {
        "workload": "race",
        "task": "t",
        "repo": str(repo),
        "agents": [{"name": "a", "branch": "clean"}, {"name": "b", "branch": "adds-tests"}],
        **({"scoring": scoring} if scoring else {}),
    }


def test_a_command_that_is_not_installed_is_an_error_result(tmp_path: Path):
    repo = make_python_repo(tmp_path / "repo")
    spec = race_spec(
        repo.path,
        build_command="no-such-build-tool --all",
        test_command="python -m pytest -q -p no:cacheprovider tests",
    )
    batch = validate_batch(spec)
    results = execute_batch(batch)
    assert all(r.status == "error" and "not installed" in (r.reason or "") for r in results)
    summary = get_workload("race").reduce(batch, results).summary
    assert summary["verdict"] == "all-failed" and summary["winner"] is None


def test_an_unreachable_repository_is_an_error_result_and_the_race_still_reduces(
    tmp_path: Path,
):
    """A repository gone by the time the workers clone it (a missing one is refused at
    submission: tests/security/test_hostile_specs.py)."""
    repo = make_python_repo(tmp_path / "repo")
    spec = race_spec(repo.path, test_command="true")
    batch = validate_batch(spec)
    shutil.rmtree(repo.path)
    results = execute_batch(batch)
    assert [r.status for r in results] == ["error"] * 3
    assert "does not exist" in (results[1].reason or "") or "failed" in (results[1].reason or "")
    summary = get_workload("race").reduce(batch, results).summary
    assert summary["agents"] == [] and set(summary["errors"]) == {"@baseline", "a", "b"}


def test_a_race_is_its_commits(tmp_path: Path):
    """Same branches at the same commits: the same batch (a resume). A new commit on a branch
    (or on the base) is a new race: results never come back stale."""
    repo = make_python_repo(tmp_path / "repo")
    spec = race_spec(repo.path)
    first = validate_batch(spec)
    assert first.identity.agents["a"].kind == "commit"
    assert validate_batch(spec).batch_id == first.batch_id
    git(repo.path, "checkout", "-q", "clean")
    (repo.path / "calc" / "extra.py").write_text("X = 1\n")
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-q", "-m", "more")
    git(repo.path, "checkout", "-q", "main")
    second = validate_batch(spec)
    assert second.batch_id != first.batch_id
    assert second.identity.agents["b"] == first.identity.agents["b"]


@pytest.fixture(scope="module")
def shared_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_python_repo(tmp_path_factory.mktemp("race") / "repo").path


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"repo": None}, "repo"),
        (
            {"agents": [{"name": "a", "branch": "x", "started_at": "2026-11-26T10:00:00Z"}]},
            "agents[0]",
        ),
        ({"agents": [{"name": "a", "branch": "-x"}]}, "agents[0].branch"),
        ({"protocol": {"episodes": 2}}, "protocol.episodes"),
        ({"scoring": {"weights": {"build": -1}}}, "scoring.weights.build"),
        (
            {"scoring": {"test_command": "x", "timeout_per_check_seconds": 0}},
            "scoring.timeout_per_check_seconds",
        ),
        ({"scoring": {"tests_command": "x"}}, "scoring.tests_command"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_race_specs_name_the_field(shared_repo: Path, change: dict, field: str):
    spec = {
        "workload": "race",
        "task": "t",
        "repo": str(shared_repo),
        "agents": [{"name": "a", "branch": "clean"}],
    }
    spec.update(change)
    spec = {k: v for k, v in spec.items() if v is not None}
    with pytest.raises(InputError, match=f"^{re.escape(field)}"):
        validate_batch(spec)


def test_a_race_without_hydra_toml_or_scoring_is_refused(tmp_path: Path):
    repo = make_python_repo(tmp_path / "repo")
    git(repo.path, "rm", "-q", "hydra.toml")
    git(repo.path, "commit", "-q", "-m", "no config")
    ran = arena(
        "race",
        "run",
        "--repo",
        str(repo.path),
        "--task",
        "t",
        "--agent",
        "a=clean",
        env=embedded_env(tmp_path / "data"),
    )
    assert ran.returncode == 2
    assert ran.stderr.startswith("arena: error: scoring: no scoring block") and "hydra.toml" in (
        ran.stderr
    )
    assert len(ran.stderr.strip().splitlines()) == 1
