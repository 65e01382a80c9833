"""Test-output parsers for the race's tests dimension: pytest, jest, cargo test, go test, and
JUnit XML reports (pytest --junitxml and the many tools that write the same format).

Each parser returns counts, or None when the text is not that runner's; ``parse_test_output``
tries them (or the one named) and otherwise falls back to the exit code, as the rubric says.
Formats are checked against real captured output in tests/race/captured/. Pure: text in, counts
out (the reducer reads the files and runs the commands).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from scoring._common import StrictModel
from scoring.race_dimensions import DimensionResult, TestCounts, TestOutcome, score_tests_outcome
from scoring.race_tests import go_broken_packages, go_events, junit_root

RunnerName = Literal["junit", "pytest", "jest", "cargo", "go"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PYTEST_SUMMARY = re.compile(
    r"^=*\s*(?P<body>(?:\d+ \w+(?:, )?)+|no tests ran)(?: in [\d.]+s.*?)\s*=*\s*$"
)
_PYTEST_ITEM = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
_JEST_TESTS = re.compile(r"^Tests:\s+(?P<body>.*\d+ total)\s*$")
_JEST_SUITES = re.compile(r"^Test Suites:\s+.*\d+ total\s*$")
_JEST_ITEM = re.compile(r"(\d+) (passed|failed|skipped|todo|total)")
_CARGO_RESULT = re.compile(
    r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured"
)
_GO_TEST = re.compile(r"^--- (PASS|FAIL|SKIP): \S+")
_GO_PACKAGE = re.compile(r"^(ok|FAIL)\s*\t\S+\s*(\[\w+ failed\])?")


def _lines(text: str) -> list[str]:
    return _ANSI.sub("", text).splitlines()


def parse_pytest(text: str) -> TestCounts | None:
    for line in reversed(_lines(text)):
        match = _PYTEST_SUMMARY.match(line.strip())
        if not match:
            continue
        counts = dict.fromkeys(("passed", "failed", "errors", "skipped", "xfailed", "xpassed"), 0)
        for number, word in _PYTEST_ITEM.findall(match.group("body")):
            if word in ("error", "errors"):
                counts["errors"] += int(number)
            elif word != "deselected":
                # Expected failures and unexpected passes are their own counts: they count
                # neither for nor against (a strict xpass is reported by pytest as failed).
                counts[word] += int(number)
        return TestCounts(**counts)
    return None


def parse_jest(text: str) -> TestCounts | None:
    lines = _lines(text)
    tests = next((m for m in map(_JEST_TESTS.match, reversed(lines)) if m), None)
    if tests is None and not any(_JEST_SUITES.match(line) for line in lines):
        return None
    found = {w: int(n) for n, w in _JEST_ITEM.findall(tests.group("body"))} if tests else {}
    # A suite that fails to load runs none of its tests; count it as an error so it cannot vanish.
    # Not in the one-line report of `jest --json`, which repeats the message in its JSON.
    broken_suites = sum(
        "Test suite failed to run" in line and not line.startswith("{") for line in lines
    )
    return TestCounts(
        passed=found.get("passed", 0),
        failed=found.get("failed", 0),
        errors=broken_suites,
        skipped=found.get("skipped", 0) + found.get("todo", 0),
    )


def parse_cargo(text: str) -> TestCounts | None:
    lines = _lines(text)
    results = [m for m in map(_CARGO_RESULT.match, lines) if m]
    if not results:
        # The code did not compile: no test ran, which is one error rather than unknown output.
        compiled = not any(line.startswith("error: could not compile") for line in lines)
        return None if compiled else TestCounts(passed=0, errors=1)
    # One "test result" line per test binary (unit, each integration file, doc-tests): sum them.
    return TestCounts(
        passed=sum(int(m.group(1)) for m in results),
        failed=sum(int(m.group(2)) for m in results),
        skipped=sum(int(m.group(3)) for m in results),
    )


def parse_go_json(text: str) -> TestCounts | None:
    """`go test -json`: top-level tests' pass/fail/skip events (a subtest is part of its
    parent, as with -v), and one error per package that did not build."""
    events = go_events(text)
    if not events:
        return None
    outcomes = [
        str(e.get("Action")) for e in events if e.get("Test") and "/" not in str(e.get("Test"))
    ]
    return TestCounts(
        passed=outcomes.count("pass"),
        failed=outcomes.count("fail"),
        skipped=outcomes.count("skip"),
        errors=len(go_broken_packages(text, events)),
    )


def parse_go(text: str) -> TestCounts | None:
    from_events = parse_go_json(text)
    if from_events is not None:
        return from_events
    lines = _lines(text)
    packages = [m.groups() for m in map(_GO_PACKAGE.match, lines) if m]
    # A package that does not build runs none of its tests: one error each, -v or not.
    broken = sum(1 for _, note in packages if note in ("[build failed]", "[setup failed]"))
    # Top-level test lines only: an indented line is a subtest, already part of its parent.
    tests = [m.group(1) for m in map(_GO_TEST.match, lines) if m]
    if any(line.startswith("=== RUN") for line in lines):
        return TestCounts(
            passed=tests.count("PASS"),
            failed=tests.count("FAIL"),
            skipped=tests.count("SKIP"),
            errors=broken,
        )
    if not packages:
        return None
    # Without -v passing tests are not listed: count packages, as the rubric suggests.
    outcomes = [
        status for status, note in packages if note not in ("[build failed]", "[setup failed]")
    ]
    return TestCounts(passed=outcomes.count("ok"), failed=outcomes.count("FAIL"), errors=broken)


MAX_JUNIT_CHARS = 32 * 1024 * 1024  # far above a real report of thousands of tests
_XML_DECLARATIONS = re.compile(r"<!(DOCTYPE|ENTITY)", re.IGNORECASE)


def _local(tag: object) -> str:
    """The element's name without a namespace ('{urn:x}testcase' -> 'testcase')."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def parse_junit_xml(text: str) -> TestCounts | None:
    """Counts from a JUnit XML report: every <testcase>, with a <failure> child failed, else with
    an <error> child an error, else with a <skipped> child skipped (xfailed where pytest marks it
    type="pytest.xfail"), else passed (one outcome per test case: a failing test whose teardown
    also errors is one failure; pytest writes a non-strict xpass as a plain pass, so a report
    cannot tell it apart). The suites' own
    tests/failures attributes are not read: writers disagree on them.

    None when the text is not JUnit XML (not XML, or its root is neither <testsuites> nor
    <testsuite>), and for XML with a DOCTYPE or entity declarations (never expanded: a report
    has no use for them) or over MAX_JUNIT_CHARS.
    """
    if len(text) > MAX_JUNIT_CHARS or not text.lstrip("\ufeff \t\r\n").startswith("<"):
        return None
    if _XML_DECLARATIONS.search(text):
        return None
    root = junit_root(text)
    if root is None:
        return None
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "xfailed": 0}
    for case in root.iter():
        if _local(case.tag) != "testcase":
            continue
        children = {_local(child.tag): child for child in case}
        if "failure" in children:
            counts["failed"] += 1
        elif "error" in children:
            counts["errors"] += 1
        elif "skipped" in children:
            xfail = children["skipped"].get("type") == "pytest.xfail"
            counts["xfailed" if xfail else "skipped"] += 1
        else:
            counts["passed"] += 1
    return TestCounts(**counts)


PARSERS: dict[RunnerName, Callable[[str], TestCounts | None]] = {
    "junit": parse_junit_xml,
    "cargo": parse_cargo,
    "jest": parse_jest,
    "go": parse_go,
    "pytest": parse_pytest,
}


class TestReport(StrictModel):
    """What a test command produced: parsed counts, or None when only the exit code tells."""

    __test__ = False

    runner: RunnerName | Literal["exit-code"]
    exit_code: int
    counts: TestCounts | None

    def outcome(self, timed_out: bool = False) -> TestOutcome:
        """As the race's raw measures hold it (scoring.race_dimensions.TestOutcome)."""
        return TestOutcome(
            exit_code=self.exit_code, timed_out=timed_out, counts=self.counts, runner=self.runner
        )


def parse_test_output(text: str, exit_code: int, runner: RunnerName | None = None) -> TestReport:
    candidates = [runner] if runner else list(PARSERS)
    for name in candidates:
        counts = PARSERS[name](text)
        if counts is not None:
            return TestReport(runner=name, exit_code=exit_code, counts=counts)
    return TestReport(runner="exit-code", exit_code=exit_code, counts=None)


def score_tests_report(agent: TestReport, baseline: TestReport | None) -> DimensionResult:
    """The tests score (scoring.race_dimensions.score_tests_outcome): the rubric's formula when
    the agent's counts are known, without the baseline terms (and a note) when the baseline's are
    not, else the exit code."""
    return score_tests_outcome(agent.outcome(), baseline.outcome() if baseline else None)
