"""Lint-output parsers for the race's lint dimension: ruff, flake8 (and pycodestyle), cargo clippy,
eslint (stylish, its default format).

Each parser returns the errors and warnings it reads, or None when the text is not that linter's;
``parse_lint_output`` tries the one named, or each in turn, and otherwise falls back to the exit
code (scoring.race_dimensions.score_lint_outcome: 0 → 100, else 0). Formats are checked against
real captured output in tests/race/captured/ (lint_manifest.json). Pure: text in, counts out.

What counts as an error and what as a warning:

- ruff: every finding is an error. Ruff has no severity levels: each finding breaks a rule the
  project selected and fails the run (exit 1), and its summary calls them all errors
  ("Found 6 errors."). Its W rules bear pycodestyle's "warning" codes but ruff reports and exits
  on them exactly as on the others, so the same W291 is an error under ruff and a warning under
  flake8. The summary is the count (after --fix: the remaining ones); without it (--quiet), one
  finding per location line.
- flake8 / pycodestyle: one finding per ``path:line:col: CODE message`` line; W (pycodestyle's
  warnings) and C (mccabe's complexity, flake8-comprehensions) codes are warnings, every other
  code (E, F, and plugins' codes) an error. flake8 prints nothing when clean.
- cargo clippy: one finding per ``warning: ...`` / ``error: ...`` / ``error[E0277]: ...``
  diagnostic line, as rustc and clippy grade it (deny-by-default lints and ``-D warnings`` make
  errors). cargo's summaries are not findings: ``warning: `crate` (lib) generated N warnings``,
  ``error: could not compile ...``, ``aborting due to ...``, ``N warnings emitted``, ``build
  failed, waiting for other jobs``. cargo replays the cached diagnostics of an unchanged crate, so
  a second run counts the same.
- eslint (stylish): the ``✖ N problems (E errors, W warnings)`` summary, else one finding per
  ``line:col  error|warning  message  rule`` line. eslint prints nothing when clean.

A clean run is 0/0 when its format is recognised: ruff's "All checks passed!", cargo's status
lines without a diagnostic, and, for flake8 and eslint (which print nothing then), an empty output
with exit 0 when the linter is named. Otherwise an unrecognised output falls back to the exit code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from scoring._common import StrictModel
from scoring.race_dimensions import LintCounts, LintOutcome

LinterName = Literal["ruff", "flake8", "clippy", "eslint"]
# Other names a caller may give a linter whose output one of the parsers reads.
ALIASES: dict[str, LinterName] = {"pycodestyle": "flake8", "cargo-clippy": "clippy"}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _lines(text: str) -> list[str]:
    return _ANSI.sub("", text).splitlines()


# -- ruff ------------------------------------------------------------------------------------------

_RUFF_FOUND = re.compile(r"^Found (\d+) errors?(?: \((\d+) fixed, (\d+) remaining\))?\.\s*$")
_RUFF_CLEAN = re.compile(r"^All checks passed!\s*$")
_RUFF_CONCISE = re.compile(r"^\S[^:]*:\d+:\d+: (?:[A-Z]+\d+|[a-z-]+:)")
_RUFF_ARROW = re.compile(r"^\s*--> \S+:\d+:\d+\s*$")


def parse_ruff(text: str) -> LintCounts | None:
    """The summary ('Found 6 errors.', after --fix its remaining count; 'All checks passed!')."""
    for line in reversed(_lines(text)):
        found = _RUFF_FOUND.match(line)
        if found:
            remaining = found.group(3)
            return LintCounts(errors=int(remaining or found.group(1)), warnings=0)
        if _RUFF_CLEAN.match(line):
            return LintCounts(errors=0, warnings=0)
    return None


def parse_ruff_findings(text: str) -> LintCounts | None:
    """ruff --quiet leaves out the summary: one finding per location (a concise line, or the full
    format's ' --> path:line:col' under each finding's header). Only when ruff is named: flake8's
    lines and rustc's arrows look the same."""
    lines = _lines(text)
    located = sum(1 for line in lines if _RUFF_CONCISE.match(line) or _RUFF_ARROW.match(line))
    return LintCounts(errors=located, warnings=0) if located else None


# -- flake8 / pycodestyle --------------------------------------------------------------------------

_FLAKE8_LINE = re.compile(r"^[^\s:][^:]*:\d+:\d+: (?P<code>[A-Z]+)\d+ ")
_FLAKE8_WARNING_PREFIXES = ("W", "C")


def parse_flake8(text: str) -> LintCounts | None:
    codes = [m.group("code") for m in map(_FLAKE8_LINE.match, _lines(text)) if m]
    if not codes:
        return None
    warnings = sum(1 for code in codes if code.startswith(_FLAKE8_WARNING_PREFIXES))
    return LintCounts(errors=len(codes) - warnings, warnings=warnings)


# -- cargo clippy ----------------------------------------------------------------------------------

_CARGO_MARKER = re.compile(
    r"^\s*(?:(?:Checking|Compiling|Blocking|Finished)\s|--> \S+\.rs:\d+)"
    r"|^(?:warning|error): (?:`[^`]+` \(.+\) generated \d+ warnings?|could not compile)"
)
_RUST_DIAGNOSTIC = re.compile(r"^(?P<level>warning|error)(?:\[[\w:-]+\])?: (?P<message>.*)$")
_CARGO_SUMMARY = re.compile(
    r"^(?:`[^`]+` \(.+\) generated \d+ warnings?"
    r"|could not compile "
    r"|aborting due to "
    r"|\d+ warnings? emitted"
    r"|build failed, waiting for other jobs)"
)


def parse_clippy(text: str) -> LintCounts | None:
    lines = _lines(text)
    if not any(_CARGO_MARKER.match(line) for line in lines):
        return None
    counts = {"warning": 0, "error": 0}
    for line in lines:
        diagnostic = _RUST_DIAGNOSTIC.match(line)
        if diagnostic and not _CARGO_SUMMARY.match(diagnostic.group("message")):
            counts[diagnostic.group("level")] += 1
    return LintCounts(errors=counts["error"], warnings=counts["warning"])


# -- eslint (stylish) ------------------------------------------------------------------------------

_ESLINT_SUMMARY = re.compile(r"^✖ (\d+) problems? \((\d+) errors?, (\d+) warnings?\)")
_ESLINT_FINDING = re.compile(r"^\s+\d+:\d+\s+(?P<level>error|warning)\s{2,}\S")


def parse_eslint(text: str) -> LintCounts | None:
    lines = _lines(text)
    for line in reversed(lines):
        summary = _ESLINT_SUMMARY.match(line)
        if summary:
            return LintCounts(errors=int(summary.group(2)), warnings=int(summary.group(3)))
    levels = [m.group("level") for m in map(_ESLINT_FINDING.match, lines) if m]
    if not levels:
        return None
    return LintCounts(errors=levels.count("error"), warnings=levels.count("warning"))


# -- any linter ------------------------------------------------------------------------------------

# Tried in this order when no linter is named: the most distinctive formats first (flake8's bare
# 'path:line:col: CODE' lines are also ruff's concise ones; ruff claims them by its summary).
LINT_PARSERS: dict[LinterName, Callable[[str], LintCounts | None]] = {
    "ruff": parse_ruff,
    "clippy": parse_clippy,
    "eslint": parse_eslint,
    "flake8": parse_flake8,
}
# Read only when the linter is named, after its own parser found nothing.
NAMED_ONLY_PARSERS: dict[LinterName, Callable[[str], LintCounts | None]] = {
    "ruff": parse_ruff_findings,
}
# Linters that print nothing at all when they find nothing.
SILENT_WHEN_CLEAN: frozenset[LinterName] = frozenset({"flake8", "eslint"})


class LintReport(StrictModel):
    """What a lint command produced: parsed counts, or None when only the exit code tells."""

    linter: LinterName | Literal["exit-code"]
    exit_code: int
    counts: LintCounts | None

    def outcome(self, timed_out: bool = False) -> LintOutcome:
        """As the race's raw measures hold it (scoring.race_dimensions.LintOutcome)."""
        return LintOutcome(
            exit_code=self.exit_code, timed_out=timed_out, counts=self.counts, linter=self.linter
        )


_BY_NAME: dict[str, LinterName] = {**{name: name for name in LINT_PARSERS}, **ALIASES}


def linter_name(name: str) -> LinterName:
    """A linter's parser name from the name a caller gives it; ValueError if none reads it."""
    if name not in _BY_NAME:
        raise ValueError(f"linter: no parser for {name!r} (known: {', '.join(_BY_NAME)})")
    return _BY_NAME[name]


def parse_lint_output(text: str, exit_code: int, linter: str | None = None) -> LintReport:
    """Counts from a lint command's output (the linter named, or each parser in turn), else the
    exit-code fallback (linter "exit-code", counts None)."""
    if linter is not None:
        name = linter_name(linter)
        counts = LINT_PARSERS[name](text)
        if counts is None and name in NAMED_ONLY_PARSERS:
            counts = NAMED_ONLY_PARSERS[name](text)
        if counts is None and name in SILENT_WHEN_CLEAN and exit_code == 0 and not text.strip():
            counts = LintCounts(errors=0, warnings=0)
        if counts is not None:
            return LintReport(linter=name, exit_code=exit_code, counts=counts)
        return LintReport(linter="exit-code", exit_code=exit_code, counts=None)
    for candidate, parser in LINT_PARSERS.items():
        counts = parser(text)
        if counts is not None:
            return LintReport(linter=candidate, exit_code=exit_code, counts=counts)
    return LintReport(linter="exit-code", exit_code=exit_code, counts=None)
