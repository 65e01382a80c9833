"""Tests by name: which tests one run passed, failed, skipped (`cases`: name -> outcome), read
from what the runner says of each test (a JUnit XML report, pytest's `-v` or `-rA` lines, jest's
`--json` report, `cargo test`'s per-test lines, `go test -json` or `-v`), and what a branch did
to the baseline's tests (`compare_cases`): the broken, skipped and missing ones a race names.

Beyond the seed, which compares counts only: a branch that breaks one test and adds two passes
more tests than the baseline, so the seed's regression term does not see it. The score keeps the
seed's formula; the race's verdict holds such a branch for review (scoring/race.py). Pure: text
in, names out. Formats are checked against real captured output in tests/race/captured/.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import Field
from pydantic_core import from_json

from scoring._common import StrictModel

CaseOutcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
Cases = dict[str, CaseOutcome]
# Bounds on what a check keeps (its result is stored whole): far above real suites (tens of
# thousands of tests, names of some 100 characters); a name longer than MAX_NAME_CHARS is cut (a
# parametrised id can carry a whole input). Over either bound, no names are kept at all.
MAX_CASES = 100_000
MAX_NAME_CHARS = 500
MAX_NAMES_CHARS = 8_000_000
# The worse outcome wins when a runner reports one test twice (pytest: failed in the call and
# errored in teardown; a name repeated by two binaries or packages).
_SEVERITY: dict[str, int] = {
    "passed": 0,
    "xpassed": 1,
    "skipped": 2,
    "xfailed": 3,
    "error": 4,
    "failed": 5,
}
RAN = frozenset({"passed", "failed", "error"})  # what "the baseline ran" means
NOT_RUN = frozenset({"skipped", "xfailed"})
FAILING = frozenset({"failed", "error"})
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _Collected:
    """Names gathered one at a time, each kept at its worst outcome, within the bounds."""

    def __init__(self) -> None:
        self.cases: Cases = {}
        self.chars = 0
        self.overflow = False

    def add(self, name: str, outcome: CaseOutcome) -> None:
        name = name.strip()[:MAX_NAME_CHARS]
        if not name:
            return
        known = self.cases.get(name)
        if known is None:
            self.chars += len(name)
            if len(self.cases) >= MAX_CASES or self.chars > MAX_NAMES_CHARS:
                self.overflow = True
                return
        if known is None or _SEVERITY[outcome] > _SEVERITY[known]:
            self.cases[name] = outcome

    def result(self) -> Cases | None:
        return None if self.overflow or not self.cases else self.cases


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def junit_root(text: str) -> ET.Element | None:
    """A JUnit XML report's root element (<testsuites> or <testsuite>), or None."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    return root if _local(root.tag) in ("testsuites", "testsuite") else None


def junit_cases(text: str) -> Cases | None:
    """Every <testcase> as `classname::name` (pytest: 'tests.test_x::test_a[1]',
    'tests.test_x.TestY::test_b'), its outcome as scoring.race_parsers.parse_junit_xml counts
    it. The caller has refused what parse_junit_xml refuses (size, declarations)."""
    root = junit_root(text)
    if root is None:
        return None
    found = _Collected()
    for case in root.iter():
        if _local(case.tag) != "testcase":
            continue
        children = {_local(child.tag): child for child in case}
        outcome: CaseOutcome = "passed"
        if "failure" in children:
            outcome = "failed"
        elif "error" in children:
            outcome = "error"
        elif "skipped" in children:
            xfail = children["skipped"].get("type") == "pytest.xfail"
            outcome = "xfailed" if xfail else "skipped"
        classname, name = case.get("classname") or "", case.get("name") or ""
        found.add(f"{classname}::{name}" if classname else name, outcome)
    return found.result()


_PYTEST_WORDS: dict[str, CaseOutcome] = {
    "PASSED": "passed",
    "FAILED": "failed",
    "ERROR": "error",
    "SKIPPED": "skipped",
    "XFAIL": "xfailed",
    "XPASS": "xpassed",
}
_WORD = "(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)"
# -v: "test_a.py::test_x PASSED    [ 11%]" (a reason in brackets after SKIPPED and XFAIL).
_PYTEST_VERBOSE = re.compile(rf"^(\S+::\S.*?) {_WORD}(?: \(.*\))?\s+\[\s*\d+%\]$")
# -rA's short summary: "PASSED test_a.py::test_x", "FAILED test_a.py::test_y - assert 1 == 2".
_PYTEST_SUMMARY = re.compile(rf"^{_WORD} (\S+::\S.*?)(?: - .*)?$")
_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$")


def pytest_cases(text: str) -> Cases | None:
    """From `-v` lines, or from the short test summary of `-rA` (which names skipped tests by
    file and line only: those are left out). None unless some test is named PASSED: pytest's
    default summary lists only the failures, which is not every test."""
    found = _Collected()
    in_summary = False
    for line in _ANSI.sub("", text).splitlines():
        line = line.rstrip()
        if _SUMMARY_HEADER.match(line):
            in_summary = True
            continue
        verbose = _PYTEST_VERBOSE.match(line)
        if verbose:
            found.add(verbose.group(1), _PYTEST_WORDS[verbose.group(2)])
        elif in_summary and (summary := _PYTEST_SUMMARY.match(line)):
            found.add(summary.group(2), _PYTEST_WORDS[summary.group(1)])
    cases = found.result()
    return cases if cases and "passed" in cases.values() else None


_JEST_STATUS: dict[str, CaseOutcome] = {
    "passed": "passed",
    "failed": "failed",
    "pending": "skipped",
    "skipped": "skipped",
    "todo": "skipped",
    "disabled": "skipped",
    "focused": "passed",
}


def _relative(path: str, root: str | None) -> str:
    """A suite's absolute path inside the checkout as a path in the repository: every check
    runs in a checkout of its own, so only the relative path names the same suite twice."""
    if root:
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def _jest_report(text: str) -> dict[str, object] | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and '"testResults"' in line:
            try:
                report = from_json(line)
            except ValueError:
                continue
            if isinstance(report, dict):
                return report
    return None


def jest_cases(text: str, root: str | None = None) -> Cases | None:
    """From the report `jest --json` prints on one line: 'file › describe › test'; a suite that
    failed to run (no assertion results, a failure message) is one error named by its file."""
    report = _jest_report(text)
    suites = report.get("testResults") if report is not None else None
    if not isinstance(suites, list):
        return None
    found = _Collected()
    for suite in suites:
        if not isinstance(suite, dict):
            continue
        file = _relative(str(suite.get("name") or suite.get("testFilePath") or ""), root)
        assertions = suite.get("assertionResults")
        assertions = assertions if isinstance(assertions, list) else []
        if not assertions and suite.get("status") == "failed":
            found.add(file, "error")
        for test in assertions:
            if not isinstance(test, dict):
                continue
            ancestors = test.get("ancestorTitles")
            titles = [*map(str, ancestors if isinstance(ancestors, list) else [])]
            titles.append(str(test.get("title", "")))
            status = _JEST_STATUS.get(str(test.get("status")), "error")
            found.add(" › ".join([file, *titles]), status)
    return found.result()


_CARGO_BINARY = re.compile(r"^\s*Running (?:unittests )?(\S+)(?: \(.*\))?$")
_CARGO_DOCTESTS = re.compile(r"^\s*Doc-tests (\S+)$")
_CARGO_TEST = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)(?:,.*)?$")
_CARGO_OUTCOME: dict[str, CaseOutcome] = {"ok": "passed", "FAILED": "failed", "ignored": "skipped"}


def cargo_cases(text: str) -> Cases | None:
    """From `cargo test`'s 'test NAME ... ok' lines, each named by its test binary's source
    ('src/lib.rs::tests::adds', 'tests/api.rs::round_trip', 'doc-tests crate::src/lib.rs - add
    (line 3)'): the same name can live in two binaries."""
    found = _Collected()
    binary = ""
    for line in _ANSI.sub("", text).splitlines():
        line = line.rstrip()
        if running := _CARGO_BINARY.match(line):
            binary = running.group(1)
        elif doctests := _CARGO_DOCTESTS.match(line):
            binary = f"doc-tests {doctests.group(1)}"
        elif test := _CARGO_TEST.match(line):
            name = f"{binary}::{test.group(1)}" if binary else test.group(1)
            found.add(name, _CARGO_OUTCOME[test.group(2)])
    return found.result()


_GO_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(")
_GO_PACKAGE = re.compile(r"^(?:ok|FAIL)\s*\t(\S+)(?:.*?(\[(?:build|setup) failed\]))?")
_GO_OUTCOME: dict[str, CaseOutcome] = {
    "PASS": "passed",
    "FAIL": "failed",
    "SKIP": "skipped",
    "pass": "passed",
    "fail": "failed",
    "skip": "skipped",
}


def go_events(text: str) -> list[dict[str, object]]:
    """The events of `go test -json`, one JSON object a line (a line that is not one, such as
    the compiler's messages and 'FAIL pkg [build failed]' before Go 1.24, is left out)."""
    events = []
    for line in text.splitlines():
        if line.startswith("{") and '"Action"' in line:
            try:
                event = from_json(line)
            except ValueError:
                continue
            # Every event of go's names its package: another tool's JSON line is not one.
            if isinstance(event, dict) and isinstance(event.get("Package"), str):
                events.append(event)
    return events


def go_broken_packages(text: str, events: list[dict[str, object]]) -> set[str]:
    """The packages whose tests could not run: '[build failed]' or '[setup failed]' in the
    plain output (Go 1.19 to 1.23), or a -json build failure event (Go 1.24 on)."""
    broken = {
        m.group(1)
        for m in map(_GO_PACKAGE.match, _ANSI.sub("", text).splitlines())
        if m and m.group(2)
    }
    broken |= {
        str(e.get("Package"))
        for e in events
        if e.get("Action") == "fail" and not e.get("Test") and e.get("FailedBuild")
    }
    return broken


def _go_json_cases(text: str, events: list[dict[str, object]]) -> Cases | None:
    found = _Collected()
    for event in events:
        outcome = _GO_OUTCOME.get(str(event.get("Action")))
        if outcome is not None and event.get("Test"):
            found.add(f"{event.get('Package')}::{event.get('Test')}", outcome)
    for package in go_broken_packages(text, events):
        found.add(package, "error")
    return found.result()


def go_cases(text: str) -> Cases | None:
    """From `go test -json`'s events, or `go test -v`'s '--- PASS: TestX' lines (subtests too:
    'TestT/case'), each named by its package ('example.com/m/calc::TestAdd'); a package that
    does not build is one error named by the package."""
    events = go_events(text)
    if events:
        return _go_json_cases(text, events)
    lines = _ANSI.sub("", text).splitlines()
    if not any(line.startswith("=== RUN") for line in lines):
        return None  # without -v only the failures are listed, which is not every test
    found = _Collected()
    pending: list[tuple[str, CaseOutcome]] = []
    for line in lines:
        if result := _GO_RESULT.match(line):
            pending.append((result.group(2), _GO_OUTCOME[result.group(1)]))
        elif package := _GO_PACKAGE.match(line):
            for name, outcome in pending:
                found.add(f"{package.group(1)}::{name}", outcome)
            if package.group(2):
                found.add(package.group(1), "error")
            pending = []
    return found.result()


CASE_PARSERS: dict[str, Callable[[str, str | None], Cases | None]] = {
    "pytest": lambda text, _root: pytest_cases(text),
    "jest": jest_cases,
    "cargo": lambda text, _root: cargo_cases(text),
    "go": lambda text, _root: go_cases(text),
}


def parse_test_cases(text: str, runner: str, root: str | None = None) -> Cases | None:
    """The tests named in a test command's output by `runner` (the parser that read its counts;
    scoring.race_parsers), suite paths made relative to `root` (the checkout); None when that
    runner's output does not name every test."""
    parser = CASE_PARSERS.get(runner)
    return parser(text, root) if parser else None


# -- a branch against the baseline -----------------------------------------------------------------


class TestChanges(StrictModel):
    """What a branch did to the tests of the baseline, by name, sorted."""

    __test__ = False

    broken: list[str] = Field(default_factory=list)  # passed on the baseline; failed or errored
    skipped: list[str] = Field(default_factory=list)  # ran on the baseline; skipped or xfailed
    missing: list[str] = Field(default_factory=list)  # passed on the baseline; not run at all
    # The baseline's tests are named and this branch's are not (its runner named none, or too
    # many): nothing can be compared, so nothing can be said to be unbroken.
    unnamed: bool = False

    @property
    def holds(self) -> bool:
        """Whether a person must look before this branch is merged."""
        return bool(self.broken or self.skipped or self.missing or self.unnamed)

    def describe(self, limit: int = 5) -> str:
        """'broke 1 baseline test (t::a); skipped 2 (t::b, t::c)': '' when nothing changed."""
        parts = []
        for verb, names in (
            ("broke", self.broken),
            ("skipped", self.skipped),
            ("no longer runs", self.missing),
        ):
            if names:
                shown = ", ".join(names[:limit])
                more = f", and {len(names) - limit} more" if len(names) > limit else ""
                noun = "baseline test" if len(names) == 1 else "baseline tests"
                parts.append(f"{verb} {len(names)} {noun} ({shown}{more})")
        if self.unnamed:
            parts.append("its tests are not named, so none can be compared with the baseline's")
        return "; ".join(parts)


def compare_cases(
    baseline: Mapping[str, str] | None, branch: Mapping[str, str] | None
) -> TestChanges | None:
    """A branch's tests against the baseline's: None when the baseline's are not named (there
    is nothing to compare with). A test that failed on the baseline and fails on the branch is
    not broken; one the branch adds is in none of the lists."""
    if baseline is None:
        return None
    if branch is None:
        return TestChanges(unnamed=True)
    broken, skipped, missing = [], [], []
    for name, before in baseline.items():
        after = branch.get(name)
        if after is None:
            if before == "passed":
                missing.append(name)
        elif before == "passed" and after in FAILING:
            broken.append(name)
        elif before in RAN and after in NOT_RUN:
            skipped.append(name)
    return TestChanges(broken=sorted(broken), skipped=sorted(skipped), missing=sorted(missing))
