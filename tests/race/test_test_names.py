"""Tests by name (scoring/race_tests.py) read from the real runners' captured output
(tests/race/captured/: pytest -rA and -v, pytest's JUnit report, jest --json, cargo test,
go test -json and -v), and the rule that compares a branch's with the baseline's. Before
(c3f317a) a check kept counts only: no name of any test was kept, so nothing could say which
test a branch broke."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoring.race import RaceOutcome, format_dimension
from scoring.race_dimensions import TestCounts, TestOutcome
from scoring.race_measures import (
    AgentMeasures,
    BaselineMeasures,
    CommandsConfigured,
    DiffStats,
    RaceMeasures,
    score_race,
)
from scoring.race_parsers import parse_test_output
from scoring.race_tests import (
    MAX_NAME_CHARS,
    TestChanges,
    cargo_cases,
    compare_cases,
    go_cases,
    jest_cases,
    junit_cases,
    parse_test_cases,
    pytest_cases,
)
from workers.race.named_tests import named_cases, pytest_report_env, read_report, report_cases

CAPTURED = Path(__file__).parent / "captured"
NAMES = json.loads((CAPTURED / "names_manifest.json").read_text())


def captured(name: str) -> str:
    return (CAPTURED / name).read_text()


@pytest.mark.parametrize("case", NAMES, ids=[c["file"] for c in NAMES])
def test_every_test_named_as_written_by_hand(case: dict[str, object]) -> None:
    text = captured(str(case["file"]))
    cases = parse_test_cases(text, str(case["runner"]), str(case["root"]))
    assert cases == case["expected_cases"]
    # The counts come from the same output as ever: names do not change them.
    report = parse_test_output(text, int(str(case["exit_code"])))
    assert report.runner == case["runner"] and report.counts is not None
    if case["runner"] == "go":  # go's counts are of top-level tests; its names hold subtests
        cases = {n: o for n, o in cases.items() if "/" not in n.split("::")[-1]}
    named_passed = sum(outcome == "passed" for outcome in cases.values())
    assert report.counts.passed == named_passed


def test_jest_json_counts_a_suite_that_failed_to_run_once() -> None:
    """jest --json repeats 'Test suite failed to run' in its JSON line: it counted twice."""
    with_json = parse_test_output(captured("jest_json_load_error.txt"), 1).counts
    assert with_json == parse_test_output(captured("jest_load_error.txt"), 1).counts
    assert with_json is not None and with_json.errors == 1


def test_jest_names_are_relative_to_the_checkout() -> None:
    """Every check runs in a checkout of its own: absolute suite paths never name a test twice."""
    text = captured("jest_json_names_base.txt")
    absolute = jest_cases(text)
    assert absolute is not None and all(name.startswith("/") for name in absolute)
    root = next(c["root"] for c in NAMES if c["file"] == "jest_json_names_base.txt")
    assert jest_cases(text, str(root) + "/") == jest_cases(text, str(root))


def test_pytest_verbose_and_report_name_every_test() -> None:
    verbose = pytest_cases(captured("pytest_mixed_verbose.txt"))
    assert verbose is not None and len(verbose) == 9
    assert verbose["test_alpha.py::test_skipped"] == "skipped"
    assert verbose["test_beta.py::test_uses_broken"] == "error"
    report = junit_cases(captured("junit_pytest_mixed.xml"))
    assert report is not None and len(report) == 9
    assert report["test_alpha::test_xfail"] == "xfailed"
    assert report["test_beta::test_split_wrong"] == "failed"
    assert report_cases(captured("junit_pytest_mixed.xml")) == report


def test_pytest_default_summary_names_no_test() -> None:
    """-q lists only the failures (FAILED ...): that is not every test, so no names at all."""
    assert "FAILED test_alpha.py::test_mul_wrong" in captured("pytest_mixed_quiet.txt")
    assert pytest_cases(captured("pytest_mixed_quiet.txt")) is None
    assert pytest_cases(captured("pytest_mixed.txt")) is None


def test_cargo_names_each_test_by_its_binary() -> None:
    cases = cargo_cases(captured("cargo_mixed.txt"))
    assert cases is not None
    assert cases["src/lib.rs::tests::multiplies_wrong"] == "failed"
    assert cases["src/lib.rs::tests::slow_test"] == "skipped"
    counts = parse_test_output(captured("cargo_mixed.txt"), 101).counts
    assert counts is not None
    assert sum(o == "passed" for o in cases.values()) == counts.passed
    assert cargo_cases(captured("cargo_compile_error.txt")) is None


def test_go_verbose_names_tests_and_subtests_by_package() -> None:
    cases = go_cases(captured("go_verbose_mixed.txt"))
    assert cases is not None
    assert cases["example.com/arenasample/calc::TestSub"] == "failed"
    assert cases["example.com/arenasample/calc::TestTable/negative"] == "failed"
    assert cases["example.com/arenasample/strutil::TestCases/unicode"] == "skipped"
    assert cases["example.com/arenasample/strutil::TestReverse"] == "passed"
    assert go_cases(captured("go_mixed.txt")) is None  # without -v no passing test is named


def test_a_branch_against_the_baseline() -> None:
    baseline = {"a": "passed", "b": "passed", "c": "passed", "d": "failed", "e": "passed"}
    branch = {"a": "failed", "b": "skipped", "c": "xfailed", "d": "skipped", "new": "failed"}
    changes = compare_cases(baseline, branch)
    assert changes == TestChanges(broken=["a"], skipped=["b", "c", "d"], missing=["e"])
    assert changes.holds
    assert changes.describe(limit=2) == (
        "broke 1 baseline test (a); skipped 3 baseline tests (b, c, and 1 more); "
        "no longer runs 1 baseline test (e)"
    )
    # A test failing on both sides is not broken; a new failing one is in no list.
    same = compare_cases(
        {"d": "failed", "a": "passed"}, {"d": "error", "a": "passed", "x": "failed"}
    )
    assert same == TestChanges() and not same.holds
    assert compare_cases(None, branch) is None  # nothing to compare with
    assert compare_cases(baseline, None) == TestChanges(unnamed=True)


def test_the_pytest_report_option_rides_on_pytest_addopts(tmp_path: Path) -> None:
    env = pytest_report_env(tmp_path / "r.xml", {"PYTEST_ADDOPTS": "-x", "PATH": "/bin"})
    assert env["PYTEST_ADDOPTS"] == f"-x --junitxml={tmp_path / 'r.xml'}"
    # A report outside the checkout (a link out of it) is not read.
    outside = tmp_path / "outside.xml"
    outside.write_text(captured("junit_pytest_mixed.xml"))
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "link.xml").symlink_to(outside)
    assert read_report(checkout, checkout / "link.xml") is None
    # The report Arena asked for is read for the names, then removed.
    own = checkout / ".arena-tests-x.xml"
    own.write_text(captured("junit_pytest_mixed.xml"))
    named = named_cases("", "pytest", checkout, own, None)
    assert named is not None and len(named) == 9 and not own.exists()


def test_long_names_are_cut() -> None:
    long = "t" * (MAX_NAME_CHARS + 50)
    report = f'<testsuite><testcase classname="c" name="{long}"/></testsuite>'
    cases = junit_cases(report)
    assert cases is not None and [len(n) for n in cases] == [MAX_NAME_CHARS]


@pytest.mark.parametrize(
    ("value", "shown"), [(100.0, "100"), (99.73, "99.7"), (99.83, "99.8"), (75.0, "75"), (0, "0")]
)
def test_a_dimension_shows_one_decimal_when_not_whole(value: float, shown: str) -> None:
    """The TESTS column showed 100 for 99.73."""
    assert format_dimension(value) == shown


def test_only_the_winners_changes_hold_the_verdict() -> None:
    """A loser that broke a test changes nothing; a winner that did is held, named. The scores
    are the seed's either way (the changes are not an input to any dimension)."""

    def agent(name: str, passed: int, changes: TestChanges | None) -> AgentMeasures:
        counts = TestCounts(passed=passed, failed=max(0, 9 - passed))  # 9: the baseline's
        return AgentMeasures(
            name=name,
            tests=TestOutcome(exit_code=0, counts=counts),
            diff=DiffStats(lines_added=1, lines_removed=0, files_changed=1),
            test_changes=changes,
        )

    def race(*agents: AgentMeasures) -> RaceOutcome:
        return score_race(
            RaceMeasures(
                configured=CommandsConfigured(build=False, lint=False),
                baseline=BaselineMeasures(
                    tests=TestOutcome(exit_code=0, counts=TestCounts(passed=9))
                ),
                agents=list(agents),
            )
        )

    broke = TestChanges(broken=["t::a"])
    held = race(agent("a", 11, broke), agent("b", 8, None))
    assert (held.winner, held.verdict.value) == ("a", "review")
    assert held.review_reason == "a broke 1 baseline test (t::a)"
    plain = race(agent("a", 11, None), agent("b", 8, None))
    assert [r.composite for r in plain.agents] == [r.composite for r in held.agents]
    assert plain.verdict.value == "auto-merge" and plain.review_reason is None
    loser = race(agent("a", 11, None), agent("b", 8, broke))
    assert loser.verdict.value == "auto-merge"
    assert loser.agents[1].test_changes == broke  # still named in its row


@pytest.mark.parametrize(
    ("json_file", "plain_file"),
    [
        ("go_json_mixed.txt", "go_verbose_mixed.txt"),
        ("go_json_build_fail.txt", "go_build_fail.txt"),
    ],
)
def test_go_json_counts_the_tests_written_by_hand(json_file: str, plain_file: str) -> None:
    """`go test -json` was read by the exit code only: its events are now counted, top-level
    tests as with -v, a package that does not build as one error (the counts manifest.json
    gives the same project run without -json)."""
    manifest = json.loads((CAPTURED / "manifest.json").read_text())
    expected = next(c["expected"] for c in manifest if c["file"] == plain_file)
    counts = parse_test_output(captured(json_file), 1).counts
    assert counts is not None
    got = {"passed": counts.passed, "failed": counts.failed, "skipped": counts.skipped}
    got |= {"errors": counts.errors, "total": counts.total}
    assert got == expected
