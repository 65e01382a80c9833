"""pytest's xfailed and xpassed tests are their own counts, never folded into skipped, and count
neither for nor against (the seed's tests score reads passed and failed). Checked on the output
the real pytest prints and the JUnit report it writes for a tiny project run here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scoring.race_dimensions import TestCounts, score_tests
from scoring.race_parsers import parse_junit_xml, parse_test_output

PROJECT = """\
import pytest


def test_ok():
    assert True


@pytest.mark.skip(reason="later")
def test_skip():
    pass


@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False


@pytest.mark.xfail(reason="fixed meanwhile")
def test_xpass():
    assert True


@pytest.mark.xfail(strict=True, reason="strict")
def test_xpass_strict():
    assert True
"""
# Arena's own plugins off: they change no count, and the output is plain pytest's.
INI = "[pytest]\naddopts = -p no:cacheprovider -p no:xdist -p no:hypothesispytest -p no:anyio\n"


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "test_x.py").write_text(PROJECT)
    (folder / "pytest.ini").write_text(INI)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("flags", [(), ("-q",), ("-v",)], ids=["plain", "quiet", "verbose"])
def test_pytest_output_reports_xfailed_and_xpassed_apart(tmp_path: Path, flags: tuple[str, ...]):
    done = run_pytest(tmp_path, *flags)
    # pytest's own line: "1 failed, 1 passed, 1 skipped, 1 xfailed, 1 xpassed in 0.04s"
    assert "1 skipped, 1 xfailed, 1 xpassed" in done.stdout, done.stdout
    report = parse_test_output(done.stdout + done.stderr, done.returncode)
    # A strict xpass is pytest's own failure; a plain xpass and an xfail count neither way.
    expected = TestCounts(passed=1, failed=1, skipped=1, xfailed=1, xpassed=1)
    assert (report.runner, report.counts) == ("pytest", expected)
    assert report.counts is not None and report.counts.total == 2


def test_junit_report_marks_xfail_apart(tmp_path: Path):
    run_pytest(tmp_path, "-q", "--junitxml=report.xml")
    counts = parse_junit_xml((tmp_path / "report.xml").read_text())
    # The report writes a plain xpass as a passing <testcase> with no child: it reads as passed.
    assert counts == TestCounts(passed=2, failed=1, skipped=1, xfailed=1)


def test_xfail_and_xpass_change_no_score():
    plain = TestCounts(passed=4, failed=2, errors=1, skipped=1)
    marked = plain.model_copy(update={"xfailed": 3, "xpassed": 2})
    assert marked.total == plain.total == 7
    assert score_tests(marked, plain) == score_tests(plain, plain)
    assert score_tests(plain, marked) == score_tests(plain, plain)


def test_race_results_show_xfailed_and_xpassed_apart():
    from tasks.workloads.race_view import format_results

    def row(rank: int, name: str, counts: dict[str, int] | None) -> dict[str, object]:
        tests = {"exit_code": 0, "timed_out": False, "counts": counts, "runner": "pytest"}
        return {
            "rank": rank,
            "name": name,
            "branch": f"agent-{name}",
            "composite": 90.0 - rank,
            "scores": {"build": 100.0, "tests": 80.0},
            "notes": [],
            "measures": {"tests": tests},
        }

    counts = TestCounts(passed=4, failed=1, skipped=1, xfailed=2, xpassed=1)
    summary = {
        "task": "t",
        "base": "main",
        "verdict": "review",
        "errors": {},
        "agents": [row(1, "A", counts.model_dump()), row(2, "B", None)],
    }
    text = format_results(summary, "b1")
    assert "\nTests:\n  A: 4 passed, 1 failed, 0 errors, 1 skipped, 2 xfailed, 1 xpassed" in text
    assert "  B:" not in text.split("Tests:")[1]  # no parsed counts: exit code only
