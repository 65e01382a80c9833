"""Lint-output parsers against real output of ruff, flake8, cargo clippy and eslint.

The captures and their expected counts (written by hand from the sample sources in
make_captures.sh, each finding named in the case's note) are in tests/race/captured/
(lint_manifest.json); `SECTIONS=lint bash make_captures.sh` regenerates them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoring.race_dimensions import LintCounts, score_lint, score_lint_outcome
from scoring.race_lint import (
    LINT_PARSERS,
    LintReport,
    parse_clippy,
    parse_eslint,
    parse_flake8,
    parse_lint_output,
    parse_ruff,
)

CAPTURED = Path(__file__).with_name("captured")
MANIFEST = json.loads((CAPTURED / "lint_manifest.json").read_text())
# When no linter is named, these outputs cannot be told apart from another linter's:
# ruff --quiet prints flake8's line format (same codes, no summary), and flake8 and eslint print
# nothing when clean (so only the exit code tells).
AUTO_DETECTED_AS = {
    "ruff_dirty_quiet.txt": "flake8",
    "flake8_clean.txt": "exit-code",
    "eslint_clean.txt": "exit-code",
}
# flake8's parser also reads ruff's concise lines (the same format); ruff claims them first.
ALSO_READ_BY = {"ruff": {"flake8"}}


def case_id(case: dict) -> str:
    return str(case["file"])


def text_of(case: dict) -> str:
    return (CAPTURED / case["file"]).read_text()


def expected(case: dict) -> LintCounts:
    return LintCounts(**case["expected"])


def test_every_linter_is_captured_clean_and_dirty():
    assert {c["linter"] for c in MANIFEST} == set(LINT_PARSERS)
    assert all((CAPTURED / c["file"]).is_file() for c in MANIFEST)
    for linter in LINT_PARSERS:
        counts = [expected(c) for c in MANIFEST if c["linter"] == linter]
        assert LintCounts(errors=0, warnings=0) in counts, linter
        assert any(c.errors for c in counts), linter


@pytest.mark.parametrize("case", MANIFEST, ids=case_id)
def test_named_linter_reads_the_real_output(case: dict):
    report = parse_lint_output(text_of(case), case["exit_code"], linter=case["linter"])
    assert (report.linter, report.counts) == (case["linter"], expected(case))
    assert report.exit_code == case["exit_code"]


@pytest.mark.parametrize("case", MANIFEST, ids=case_id)
def test_auto_detection_picks_the_right_linter(case: dict):
    report = parse_lint_output(text_of(case), case["exit_code"])
    linter = AUTO_DETECTED_AS.get(case["file"], case["linter"])
    assert report.linter == linter
    assert report.counts == (None if linter == "exit-code" else expected(case))


@pytest.mark.parametrize("case", MANIFEST, ids=case_id)
def test_other_parsers_do_not_claim_the_output(case: dict):
    text = text_of(case)
    for name, parser in LINT_PARSERS.items():
        if name != case["linter"] and name not in ALSO_READ_BY.get(case["linter"], set()):
            assert parser(text) is None, f"{name} parser claims {case['file']}"


def test_cargo_summaries_are_not_findings():
    text = (CAPTURED / "clippy_deny.txt").read_text()
    # The real output holds both summaries, yet 1 error and 4 warnings are counted.
    assert "warning: `arena_lint` (lib) generated 4 warnings" in text
    assert "error: could not compile `arena_lint` (lib) due to 1 previous error" in text
    assert parse_clippy(text) == LintCounts(errors=1, warnings=4)
    denied = (CAPTURED / "clippy_warnings_denied.txt").read_text()
    assert "due to 4 previous errors" in denied
    assert parse_clippy(denied) == LintCounts(errors=4, warnings=0)


def test_colour_escapes_do_not_hide_findings():
    for name, parser in [
        ("clippy_deny_color.txt", parse_clippy),
        ("eslint_dirty_color.txt", parse_eslint),
    ]:
        text = (CAPTURED / name).read_text()
        assert "\x1b[" in text
        plain = (CAPTURED / name.replace("_color", "")).read_text()
        assert parser(text) == parser(plain) != LintCounts(errors=0, warnings=0)


def test_ruff_counts_what_remains_after_fix():
    text = (CAPTURED / "ruff_fix.txt").read_text()
    assert "Found 6 errors (2 fixed, 4 remaining)." in text
    assert parse_ruff(text) == LintCounts(errors=4, warnings=0)


def test_flake8_grades_w_and_c_as_warnings_everything_else_as_errors():
    text = "\n".join(
        [
            "./a.py:1:1: F401 'os' imported but unused",
            "./a.py:2:80: E501 line too long (88 > 79 characters)",
            "./a.py:3:1: W391 blank line at end of file",
            "./a.py:4:1: C901 'f' is too complex (12)",
            "./a.py:5:1: B006 Do not use mutable data structures for argument defaults",
            "3",  # what --count adds
        ]
    )
    assert parse_flake8(text) == LintCounts(errors=3, warnings=2)


@pytest.mark.parametrize("linter", ["flake8", "pycodestyle", "eslint"])
def test_silent_linters_are_clean_only_when_named_and_exit_0(linter: str):
    clean = parse_lint_output("\n", 0, linter)
    assert clean.counts == LintCounts(errors=0, warnings=0)
    assert clean.linter == ("flake8" if linter == "pycodestyle" else linter)
    # Silent but failing (a crash, a bad configuration): only the exit code tells.
    assert parse_lint_output("", 2, linter) == LintReport(
        linter="exit-code", exit_code=2, counts=None
    )
    assert parse_lint_output("", 0).linter == "exit-code"


@pytest.mark.parametrize(
    ("text", "exit_code", "linter"),
    [
        ("ruff failed\n  Cause: Failed to parse pyproject.toml\n", 2, "ruff"),
        ("error: could not find `Cargo.toml` in `/tmp` or any parent directory\n", 101, "clippy"),
        ("Oops! Something went wrong! :(\n\nESLint: 10.15.0\n", 2, "eslint"),
        ("Traceback (most recent call last):\n  ...\nImportError: x\n", 1, "flake8"),
        ("make: *** [lint] Error 1\n", 2, None),
    ],
)
def test_unrecognised_output_falls_back_to_the_exit_code(text, exit_code, linter):
    report = parse_lint_output(text, exit_code, linter)
    assert (report.linter, report.counts) == ("exit-code", None)
    assert score_lint_outcome(report.outcome(), None).score == 0.0


def test_unknown_linter_name_is_refused():
    with pytest.raises(ValueError, match=r"linter: no parser for 'pylint' \(known: ruff, "):
        parse_lint_output("", 0, "pylint")


def test_lint_reports_score_against_a_real_baseline():
    dirty = parse_lint_output((CAPTURED / "flake8_dirty.txt").read_text(), 1, "flake8")
    clean = parse_lint_output((CAPTURED / "flake8_clean.txt").read_text(), 0, "flake8")
    syntax = parse_lint_output((CAPTURED / "flake8_syntax_error.txt").read_text(), 1, "flake8")
    # Against a clean baseline: 6 new errors, 2 new warnings: 100 - 60 - 4 = 36.
    result = score_lint_outcome(dirty.outcome(), clean.outcome())
    assert (result.score, result.notes) == (36, [])
    # The dirty tree as baseline, the syntax-error one (2 errors) as the agent: no new error,
    # no new warning, 8 - 2 = 6 issues resolved: 106 clamps to 100.
    assert score_lint_outcome(syntax.outcome(), dirty.outcome()).score == 100
    assert dirty.counts is not None and syntax.counts is not None
    assert score_lint(syntax.counts, dirty.counts) == 100
    # A timed-out run scores 0 whatever it printed.
    assert score_lint_outcome(clean.outcome(timed_out=True), clean.outcome()).score == 0
