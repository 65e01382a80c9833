"""Test-output parsers for the race's tests dimension: pytest, jest, cargo test, go test.

Each parser returns counts, or None when the text is not that runner's; ``parse_test_output``
tries them (or the one named) and otherwise falls back to the exit code, as the rubric says.
Formats are checked against real captured output in tests/race/captured/.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from scoring._common import StrictModel
from scoring.race import TestCounts, score_tests, score_tests_exit_code

RunnerName = Literal["pytest", "jest", "cargo", "go"]

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
        counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
        for number, word in _PYTEST_ITEM.findall(match.group("body")):
            if word in ("error", "errors"):
                counts["errors"] += int(number)
            elif word in ("passed", "failed"):
                counts[word] += int(number)
            elif word in ("skipped", "xfailed", "xpassed"):
                # Expected failures and unexpected passes do not count for or against.
                counts["skipped"] += int(number)
        return TestCounts(**counts)
    return None


def parse_jest(text: str) -> TestCounts | None:
    lines = _lines(text)
    tests = next((m for m in map(_JEST_TESTS.match, reversed(lines)) if m), None)
    if tests is None and not any(_JEST_SUITES.match(line) for line in lines):
        return None
    found = {w: int(n) for n, w in _JEST_ITEM.findall(tests.group("body"))} if tests else {}
    # A suite that fails to load runs none of its tests; count it as an error so it cannot vanish.
    broken_suites = sum("Test suite failed to run" in line for line in lines)
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


def parse_go(text: str) -> TestCounts | None:
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


PARSERS: dict[RunnerName, Callable[[str], TestCounts | None]] = {
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


def parse_test_output(text: str, exit_code: int, runner: RunnerName | None = None) -> TestReport:
    candidates = [runner] if runner else list(PARSERS)
    for name in candidates:
        counts = PARSERS[name](text)
        if counts is not None:
            return TestReport(runner=name, exit_code=exit_code, counts=counts)
    return TestReport(runner="exit-code", exit_code=exit_code, counts=None)


def score_tests_report(agent: TestReport, baseline: TestReport) -> float:
    """The tests score: the rubric's formula when the agent's counts are known, else exit code."""
    if agent.counts is None:
        return score_tests_exit_code(agent.exit_code)
    return score_tests(agent.counts, baseline.counts or TestCounts(passed=0))
