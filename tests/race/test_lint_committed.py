"""A race's linter reads what was committed (issue 22, item 2): a repository whose ruff config
says `fix = true` has its committed unused import counted, and the checkout is unchanged after
the lint, whatever the lint command tries. Real git, the real ruff, the real bubblewrap jail."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.needs import require_bwrap
from tests.race.projects import git
from workers.race.check import CheckCommands, run_check, without_fixes
from workers.sandbox import CommandResult
from workers.sandbox.local import LocalSandbox

PYPROJECT = '[project]\nname = "fixme"\nversion = "0.1"\n\n[tool.ruff]\nfix = true\n'
MODULE = "import os\nimport sys\n\n\ndef argv() -> list[str]:\n    return sys.argv\n"


class Watching(LocalSandbox):
    """The local sandbox, noting each command and the module's text right after it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def run(  # type: ignore[override]
        self,
        command: str,
        workdir: Path,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        *args: Any,
        read_only: Sequence[str] = (),
        **kwargs: Any,
    ) -> CommandResult:
        done = super().run(command, workdir, timeout_s, env, *args, read_only=read_only, **kwargs)
        self.seen.append((command, (workdir / "fixme" / "__init__.py").read_text()))
        return done


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "fixme").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "fixme" / "__init__.py").write_text(MODULE)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "an unused import, committed")
    return repo


def check(repo: Path, lint: str, tmp_path: Path) -> tuple[Any, Watching]:
    require_bwrap()
    if shutil.which("ruff", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("no ruff beside this interpreter")
    sandbox = Watching()
    commands = CheckCommands(build="true", lint=lint, timeout_s=60)
    work = tmp_path / "work"
    work.mkdir()
    result = run_check(
        str(repo), "main", "main", commands, sandbox, workdir_root=work, echo=lambda _: None
    )
    return result, sandbox


def test_a_committed_finding_counts_under_fix_true(repo: Path, tmp_path: Path):
    result, sandbox = check(repo, "ruff check --output-format=concise .", tmp_path)
    lint = result.lint
    # What ran: ruff's no-fix mode; what it found: the committed F401, exit 1 (not 0, "fixed").
    assert lint.command == "ruff check --no-fix --output-format=concise ."
    assert (lint.exit_code, lint.linter) == (1, "ruff"), lint.output_tail
    assert lint.counts is not None and (lint.counts.errors, lint.counts.warnings) == (1, 0)
    assert "F401" in lint.output_tail and "fixed" not in lint.output_tail
    assert sandbox.seen[-1] == (lint.command, MODULE)  # the checkout as committed


def test_a_lint_command_cannot_change_what_was_committed(repo: Path, tmp_path: Path):
    """Even one that names --fix, or writes a committed file itself: the writes fail, the file
    is as committed; what the lint writes beside the committed files (ruff's cache) it may."""
    lint = (
        "echo x >> fixme/__init__.py; rm -f pyproject.toml; mkdir -p fixme/new; "
        "ruff check --fix --output-format=concise .; ls -a"
    )
    result, sandbox = check(repo, lint, tmp_path)
    output = result.lint.output_tail
    assert "Read-only file system" in output, output
    assert sandbox.seen[-1] == (lint, MODULE)
    assert ".ruff_cache" in output.split()  # written beside the committed paths
    # ruff, its fix refused in a read-only folder, reports the committed finding.
    assert "F401" in output


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ruff check .", "ruff check --no-fix ."),
        ("python -m ruff check src", "python -m ruff check --no-fix src"),
        (".venv/bin/ruff check . && ruff format --check .", None),
        ("ruff check --fix .", "ruff check --fix ."),
        ("ruff check --no-fix .", "ruff check --no-fix ."),
        ("ruff check --diff .", "ruff check --diff ."),
        ("flake8 .", "flake8 ."),
        ("myruff check .", "myruff check ."),
    ],
)
def test_ruff_runs_in_its_no_fix_mode(command: str, expected: str | None):
    if expected is None:
        expected = ".venv/bin/ruff check --no-fix . && ruff format --check ."
    assert without_fixes(command) == expected
