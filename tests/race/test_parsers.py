"""Test-output parsers against real output of pytest, jest, cargo test and go test.

The captures and their expected counts (known from the sample projects' source, checked against
each tool's own summary) are in tests/race/captured/; make_captures.sh there regenerates them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoring.race import TestCounts, score_tests
from scoring.race_parsers import PARSERS, parse_test_output, score_tests_report

CAPTURED = Path(__file__).with_name("captured")
MANIFEST = json.loads((CAPTURED / "manifest.json").read_text())
# Without -v, go lists only failures, so the parser counts packages (docs/scoring.md). The sample
# module has two packages: calc (the failing or broken one in these cases) and strutil.
GO_PACKAGE_COUNTS = {
    "go_pass.txt": TestCounts(passed=2),
    "go_pass_cached.txt": TestCounts(passed=2),
    "go_mixed.txt": TestCounts(passed=1, failed=1),
    "go_build_fail.txt": TestCounts(passed=1, errors=1),
    "go_syntax_error.txt": TestCounts(passed=1, errors=1),
    "go_no_test_files.txt": TestCounts(passed=1),  # strutil has no test files: not a package result
}


def case_id(case: dict) -> str:
    return str(case["file"])


def expected_counts(case: dict) -> TestCounts:
    if case["file"] in GO_PACKAGE_COUNTS:
        return GO_PACKAGE_COUNTS[case["file"]]
    e = case["expected"]
    return TestCounts(
        passed=e["passed"], failed=e["failed"], errors=e["errors"], skipped=e["skipped"]
    )


def test_every_runner_is_captured():
    assert {c["runner"] for c in MANIFEST} == set(PARSERS)
    assert all((CAPTURED / c["file"]).is_file() for c in MANIFEST)


@pytest.mark.parametrize("case", MANIFEST, ids=case_id)
def test_named_parser_reads_the_real_output(case: dict):
    text = (CAPTURED / case["file"]).read_text()
    report = parse_test_output(text, case["exit_code"], runner=case["runner"])
    assert report.runner == case["runner"]
    assert report.counts == expected_counts(case)
    if case["file"] not in GO_PACKAGE_COUNTS:
        assert report.counts is not None and report.counts.total == case["expected"]["total"]


@pytest.mark.parametrize("case", MANIFEST, ids=case_id)
def test_auto_detection_picks_the_right_runner(case: dict):
    report = parse_test_output((CAPTURED / case["file"]).read_text(), case["exit_code"])
    assert (report.runner, report.counts) == (case["runner"], expected_counts(case))


@pytest.mark.parametrize("case", MANIFEST, ids=case_id)
def test_other_parsers_do_not_claim_the_output(case: dict):
    text = (CAPTURED / case["file"]).read_text()
    for name, parser in PARSERS.items():
        if name != case["runner"]:
            assert parser(text) is None, f"{name} parser claims {case['file']}"


def test_go_verbose_counts_top_level_tests_not_subtests():
    text = (CAPTURED / "go_verbose_mixed.txt").read_text()
    counts = parse_test_output(text, 1, "go").counts
    assert counts == TestCounts(passed=4, failed=2, skipped=1)


@pytest.mark.parametrize(
    ("text", "exit_code", "score"),
    [
        ("make: *** [all] Error 2\n", 2, 0.0),
        ("all good\n", 0, 100.0),
        ("", 1, 0.0),
    ],
)
def test_unrecognised_output_falls_back_to_the_exit_code(text: str, exit_code: int, score: float):
    report = parse_test_output(text, exit_code)
    assert (report.runner, report.counts) == ("exit-code", None)
    assert score_tests_report(report, parse_test_output("", 0)) == score


def test_score_tests_report_from_real_runs_against_a_real_baseline():
    baseline = parse_test_output((CAPTURED / "pytest_pass.txt").read_text(), 0)
    agent = parse_test_output((CAPTURED / "pytest_mixed.txt").read_text(), 1)
    assert agent.counts is not None and baseline.counts is not None
    # 4 of 7 pass, 0 new tests, 3 fewer passing than the baseline's 7.
    assert score_tests_report(agent, baseline) == pytest.approx(4 / 7 * 100 - 3 / 7 * 50)
    assert score_tests_report(agent, baseline) == score_tests(agent.counts, baseline.counts)
    broken = parse_test_output((CAPTURED / "cargo_compile_error.txt").read_text(), 101)
    assert broken.counts == TestCounts(passed=0, errors=1)
    assert score_tests_report(broken, baseline) == 0.0
