"""The names of the tests a check's test command ran, and how each ended (scoring/race_tests.py),
so the reducer can tell which of the baseline's tests a branch broke or skipped.

pytest is asked for a JUnit XML report whatever the command looks like: `--junitxml` goes into
the command's PYTEST_ADDOPTS (pytest reads it on every run, `python -m pytest` or `pytest`,
behind `make test` or `cd sub &&`), pointing at a file of a random name in the checkout, the
one folder a sandboxed command may write. The report is read for names only: the counts stay
those of the command's own output (a report cannot tell a non-strict xpass from a pass, so its
counts could differ from what the user sees), and the file is removed before the lint runs.
Other runners name their tests in their own output: jest with `--json`, `cargo test`,
`go test -v`. Where no runner names every test, the check keeps no names.
"""

from __future__ import annotations

import os
import secrets
import shlex
from collections.abc import Mapping
from pathlib import Path

from scoring.race_parsers import parse_junit_xml
from scoring.race_tests import Cases, junit_cases, parse_test_cases

MAX_REPORT_BYTES = 16 * 1024 * 1024  # a report of tens of thousands of tests is a few MB
REPORT_PREFIX = ".arena-tests-"


def report_path(workdir: Path) -> Path:
    """Where the test command's pytest writes its report: the checkout's real path (the jail
    binds it there, the Docker sandbox mounts it at the worker's own path), a name no
    repository has."""
    return Path(os.path.realpath(workdir)) / f"{REPORT_PREFIX}{secrets.token_hex(8)}.xml"


def pytest_report_env(report: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the test command runs with (the sandbox scrubs it as ever): `base`
    (default: the worker's) with `--junitxml=REPORT` after any PYTEST_ADDOPTS it has. A
    command that names its own `--junitxml` wins: the command line comes after."""
    env = dict(os.environ if base is None else base)
    options = env.get("PYTEST_ADDOPTS", "")
    env["PYTEST_ADDOPTS"] = f"{options} --junitxml={shlex.quote(str(report))}".strip()
    return env


def read_report(workdir: Path, path: Path) -> str | None:
    """A report's text, when it is a file inside the checkout (not a link out of it) no larger
    than MAX_REPORT_BYTES; None otherwise."""
    try:
        real = path.resolve()
        if not real.is_relative_to(Path(workdir).resolve()) or not real.is_file():
            return None
        if real.stat().st_size > MAX_REPORT_BYTES:
            return None
        return real.read_text(errors="replace")
    except OSError:
        return None


def report_cases(text: str | None) -> Cases | None:
    """The tests a JUnit report names; None for what parse_junit_xml refuses (not a report,
    declarations, too big)."""
    if text is None or parse_junit_xml(text) is None:
        return None
    return junit_cases(text)


def named_cases(
    output: str, runner: str, workdir: Path, own_report: Path, junit_xml: str | None
) -> Cases | None:
    """The tests the command named: from the report the race names (`junit_xml`), else from
    the one Arena asked pytest for, else from the output of the runner that read the counts.
    The report Arena asked for is removed."""
    named = report_cases(read_report(workdir, workdir / junit_xml)) if junit_xml else None
    if named is None:
        named = report_cases(read_report(workdir, own_report))
    own_report.unlink(missing_ok=True)
    if named is None:
        named = parse_test_cases(output, runner, os.path.realpath(workdir))
    return named
