"""Issue 36's broken-test rule: a branch that breaks one baseline test and adds two passes more
tests than the baseline, so the seed's regression term (counts) does not see it; before
(c3f317a) it won with `auto-merge`. Now the verdict is `review` and the broken test is named;
the same for a branch that skips baseline tests. The scores keep the seed's formula.

On pytest: real git repositories, the race run as users run it (validate_batch, the workload's
units in the real sandbox, its reducer), real pytest. On jest: the real `jest --json` output of a
baseline and two branches (tests/race/captured/jest_json_names_*.txt, made by make_captures.sh)
read as a check reads it, then reduced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scoring.race_dimensions import TestCounts, score_tests
from scoring.race_parsers import parse_test_output
from tasks.execute import execute_batch
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import UnitResult
from tasks.workloads.race_reduce import agent_measures, score_measures
from tasks.workloads.race_spec import BASELINE, RaceAgentSpec, RaceItem, RaceParams
from tasks.workloads.race_view import format_results
from tests.conftest import RACE_WHEELS
from tests.needs import require_bwrap, unavailable
from tests.race.projects import commit, git
from workers.race.named_tests import named_cases

BUILD = 'python -c "import calc"'
TESTS = "python -m pytest -q"
CALC = "def double(n):\n    return n * 2\n"
TEST_CALC = """\
import pytest

from calc import double


@pytest.mark.parametrize("n", range(20))
def test_double(n):
    assert double(n) == n + n


def test_zero():
    assert double(0) == 0
"""
TEST_HALF = """\
from calc import half


def test_half():
    assert half(8) == 4


def test_half_odd():
    assert half(3) == 1.5
"""
# Arena's own plugins off (they change no count but cost seconds); no cache in the checkout.
INI = "[pytest]\naddopts = -p no:cacheprovider -p no:xdist -p no:hypothesispytest -p no:anyio\n"
BRANCHES: dict[str, dict[str, str]] = {
    # Breaks double(7), adds half and two tests: 22 of 23 pass, more than the baseline's 21.
    "a-breaks-one": {
        "calc.py": "def double(n):\n    return 15 if n == 7 else n * 2\n\n\n"
        "def half(n):\n    return n / 2\n",
        "tests/test_half.py": TEST_HALF,
    },
    # Skips test_zero and marks double(5) as an expected failure that is not run.
    "b-skips-two": {
        "tests/test_calc.py": TEST_CALC.replace(
            'parametrize("n", range(20))',
            'parametrize("n", [pytest.param(5, marks=pytest.mark.xfail(run=False))]'
            " + [n for n in range(20) if n != 5])",
        ).replace("def test_zero", '@pytest.mark.skip(reason="later")\ndef test_zero'),
    },
}


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    base = {
        "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
        "pytest.ini": INI,
        "calc.py": CALC,
        "tests/test_calc.py": TEST_CALC,
    }
    commit(path, base, "calc")
    for branch, files in BRANCHES.items():
        git(path, "checkout", "-q", "-b", branch, "main")
        commit(path, files, branch)
    git(path, "checkout", "-q", "main")
    return path


def race(repo: Path, branches: list[str]) -> dict[str, Any]:
    spec = {
        "workload": "race",
        "task": "add half",
        "repo": str(repo),
        "agents": [{"name": b[0].upper(), "branch": b} for b in branches],
        "scoring": {"build_command": BUILD, "test_command": TESTS},
    }
    batch = validate_batch(spec)
    results = execute_batch(batch)
    assert [r.status for r in results] == ["ok"] * (len(branches) + 1), [r.reason for r in results]
    reduction = get_workload("race").reduce(batch, results)
    # The names stay in the race's summary: a board entry is kept long and listed often.
    assert all("test_changes" not in entry.stats for entry in reduction.entries)
    assert isinstance(reduction.summary, dict)
    return reduction.summary


def test_pytest_branches_that_break_or_skip_baseline_tests_are_held_for_review(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    if not (RACE_WHEELS / ".complete").is_file():
        unavailable(f"no wheels in {RACE_WHEELS}: run scripts/install-test-tools")
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(tmp_path))
    monkeypatch.setenv("ARENA_WORK_DIR", str(tmp_path / "work"))
    repo = make_repo(tmp_path / "calc")

    summary = race(repo, ["a-breaks-one"])
    a = summary["agents"][0]
    counts = a["measures"]["tests"]["counts"]
    assert (counts["passed"], counts["failed"]) == (22, 1)
    # The seed's formula, unchanged: 22/23 pass, 2 new tests, no penalty (22 >= 21).
    baseline = TestCounts(passed=21)
    assert a["scores"]["tests"] == pytest.approx(score_tests(TestCounts(**counts), baseline))
    assert a["composite"] >= 85  # what the seed would auto-merge
    assert summary["verdict"] == "review"
    broken = "tests.test_calc::test_double[7]"
    assert a["test_changes"] == {"broken": [broken], "skipped": [], "missing": [], "unnamed": False}
    assert broken in summary["review_reason"]
    assert summary["baseline"]["tests"]["named_tests"] == 21
    assert "cases" not in summary["baseline"]["tests"]  # the names stay in the unit results
    text = format_results(summary, "b1")
    assert f"Baseline tests:\n  A: broke 1 baseline test ({broken})" in text
    assert f"Verdict: review (A broke 1 baseline test ({broken}))" in text
    # The TESTS cell shows the score to one decimal (96.5), not a rounded 100 or 97.
    assert f"[TESTS: {round(a['scores']['tests'], 1)}]" in text

    summary = race(repo, ["b-skips-two"])
    b = summary["agents"][0]
    assert b["measures"]["tests"]["counts"]["skipped"] == 1
    assert b["measures"]["tests"]["counts"]["xfailed"] == 1
    assert b["composite"] >= 85 and summary["verdict"] == "review"
    skipped = ["tests.test_calc::test_double[5]", "tests.test_calc::test_zero"]
    assert b["test_changes"]["skipped"] == skipped
    assert "B skipped 2 baseline tests (" + ", ".join(skipped) + ")" in summary["review_reason"]


CAPTURED = Path(__file__).parent / "captured"
ROOTS = {c["file"]: c["root"] for c in json.loads((CAPTURED / "names_manifest.json").read_text())}


def jest_result(agent: str, file: str) -> UnitResult:
    """A check's result as run_check stores it, its tests read from the real jest output as a
    check reads them (counts by the jest parser, names from the --json report)."""
    text = (CAPTURED / file).read_text()
    report = parse_test_output(text, 0)
    cases = named_cases(text, report.runner, Path(ROOTS[file]), Path("/nonexistent.xml"), None)
    run = {"command": "npx jest --json", "exit_code": 0, "timed_out": False, "duration_s": 1.0}
    tests = {**run, "output_tail": "", "output_bytes": len(text), "runner": report.runner}
    tests |= {"counts": report.counts.model_dump() if report.counts else None, "cases": cases}
    build = {**run, "command": "true", "output_tail": "", "output_bytes": 0}
    diff = {"lines_added": 5, "lines_removed": 1, "files_changed": 1}
    result = {"build": build, "tests": tests, "lint": None, "diff": diff, "commit": "c" * 40}
    return UnitResult(
        unit_id=f"u:{agent}", agent=agent, item="race", episode=0, status="ok", result=result
    )


def test_jest_branches_that_break_or_skip_baseline_tests_are_held_for_review() -> None:
    params = RaceParams(build_command="true", test_command="npx jest --json")
    item = RaceItem(task="t", repo="/r")
    base = jest_result(BASELINE, "jest_json_names_base.txt")
    for agent, file, field, names in (
        ("breaks", "jest_json_names_breaks.txt", "broken", ["calc.test.js › calc › doubles 7"]),
        (
            "skips",
            "jest_json_names_skips.txt",
            "skipped",
            ["calc.test.js › calc › doubles 10", "calc.test.js › calc › doubles 9"],
        ),
    ):
        agents = {agent: RaceAgentSpec(name=agent, branch=agent)}
        results = {BASELINE: base, agent: jest_result(agent, file)}
        measures = agent_measures(agents, results, base.result["tests"])
        outcome = score_measures(item, params, base.result, measures, [])
        (row,) = outcome.agents
        assert row.composite >= 85, row  # the seed's numbers would auto-merge it
        assert outcome.verdict.value == "review"
        assert row.test_changes is not None and getattr(row.test_changes, field) == names
        assert outcome.review_reason is not None and names[0] in outcome.review_reason
