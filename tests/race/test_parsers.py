"""Test-output parsers against real output of pytest, jest, cargo test and go test, and the
JUnit XML reports pytest --junitxml writes.

The captures and their expected counts (known from the sample projects' source, checked against
each tool's own summary) are in tests/race/captured/; make_captures.sh there regenerates them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoring.race_dimensions import TestCounts, score_tests
from scoring.race_parsers import (
    MAX_JUNIT_CHARS,
    PARSERS,
    parse_junit_xml,
    parse_test_output,
    score_tests_report,
)

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
        passed=e["passed"],
        failed=e["failed"],
        errors=e["errors"],
        skipped=e["skipped"],
        xfailed=e.get("xfailed", 0),
        xpassed=e.get("xpassed", 0),
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
    result = score_tests_report(report, parse_test_output("", 0))
    assert result.score == score
    assert result.notes == ["tests: output not parsed: scored by the exit code"]


def test_score_tests_report_from_real_runs_against_a_real_baseline():
    baseline = parse_test_output((CAPTURED / "pytest_pass.txt").read_text(), 0)
    agent = parse_test_output((CAPTURED / "pytest_mixed.txt").read_text(), 1)
    assert agent.counts is not None and baseline.counts is not None
    # 4 of 7 pass, 0 new tests, 3 fewer passing than the baseline's 7.
    result = score_tests_report(agent, baseline)
    assert result.score == pytest.approx(4 / 7 * 100 - 3 / 7 * 50)
    assert result.score == score_tests(agent.counts, baseline.counts)
    assert result.notes == []
    broken = parse_test_output((CAPTURED / "cargo_compile_error.txt").read_text(), 101)
    assert broken.counts == TestCounts(passed=0, errors=1)
    assert score_tests_report(broken, baseline).score == 0.0


@pytest.mark.parametrize("baseline_text", ["make: *** [test] Error 2\n", ""])
def test_an_unparsed_baseline_is_not_zero_tests(baseline_text: str):
    # Real agent output: 4 passed, 2 failed, 1 error (skips aside); the baseline's is not read.
    agent = parse_test_output((CAPTURED / "pytest_mixed.txt").read_text(), 1)
    baseline = parse_test_output(baseline_text, 2)
    assert baseline.counts is None
    result = score_tests_report(agent, baseline)
    # Pass rate only: 4/7. (A baseline of 0 tests would add 7/7*10 = 10 for "new" tests.)
    assert result.score == pytest.approx(4 / 7 * 100)
    assert result.notes == [
        "tests: the baseline's output was not parsed: pass rate only (no new-test bonus, no "
        "regression penalty)"
    ]
    assert score_tests_report(agent, None).score == pytest.approx(4 / 7 * 100)


# -- JUnit XML -------------------------------------------------------------------------------------


def test_junit_from_real_pytest_reports_matches_pytest_own_summary():
    # The same projects run with and without --junitxml: the two parsers agree.
    for xml, text in [
        ("junit_pytest_pass.xml", "pytest_pass.txt"),
        ("junit_pytest_mixed.xml", "pytest_mixed.txt"),
        ("junit_pytest_collect_error.xml", "pytest_collect_error.txt"),
    ]:
        from_xml = parse_junit_xml((CAPTURED / xml).read_text())
        assert (
            from_xml is not None
            and from_xml == parse_test_output((CAPTURED / text).read_text(), 0, "pytest").counts
        ), xml


JUNIT_BY_HAND = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="8" failures="1" errors="1">
  <testsuite name="unit" tests="5">
    <testcase classname="a" name="ok1" time="0.1"/>
    <testcase classname="a" name="ok2"><system-out>fine</system-out></testcase>
    <testcase classname="a" name="bad"><failure message="boom">trace</failure></testcase>
    <testcase classname="a" name="broken"><error type="Crash"/></testcase>
    <testcase classname="a" name="later"><skipped/></testcase>
  </testsuite>
  <testsuite name="nested">
    <testsuite name="inner">
      <testcase classname="b" name="ok3"/>
      <testcase classname="b" name="bad_and_teardown"><failure/><error/></testcase>
    </testsuite>
  </testsuite>
  <testsuite name="empty"/>
</testsuites>
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # 3 plain, 2 with <failure> (one also has <error>: still one failed test), 1 <error>,
        # 1 <skipped>; nested suites are walked; suite attributes are not read.
        (JUNIT_BY_HAND, TestCounts(passed=3, failed=2, errors=1, skipped=1)),
        ('<testsuite name="x"><testcase name="t"/></testsuite>', TestCounts(passed=1)),
        ("\ufeff  <testsuites/>", TestCounts(passed=0)),  # BOM and blanks; no test case at all
        (  # a namespaced writer
            '<t:testsuite xmlns:t="urn:x"><t:testcase name="a"><t:failure/></t:testcase>'
            "</t:testsuite>",
            TestCounts(passed=0, failed=1),
        ),
    ],
)
def test_junit_counts_by_hand(text: str, expected: TestCounts):
    assert parse_junit_xml(text) == expected
    assert parse_test_output(text, 1).runner == "junit"


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<testsuite><testcase name="&lol2;"/></testsuite>
"""


@pytest.mark.parametrize(
    "text",
    [
        BILLION_LAUGHS,
        '<!DOCTYPE testsuite SYSTEM "http://example.invalid/x.dtd"><testsuite/>',
        "<html><body>not a report</body></html>",
        "<testsuite><testcase>",  # truncated
        "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
        "",
        "<testsuite>" + "<testcase/>" * (MAX_JUNIT_CHARS // 11) + "</testsuite>",
    ],
    ids=["entities", "doctype", "html", "truncated", "cargo", "empty", "too-large"],
)
def test_junit_refuses_what_is_not_a_plain_report(text: str):
    assert parse_junit_xml(text) is None
