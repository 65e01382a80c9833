"""Real git repositories for the race workload's tests, built on the fly, with hand-written facts.

`make_python_repo(root)` and `make_cargo_repo(root)` each build a plain repository whose base
branch is `main` and whose other branches are the agents' work. `RaceRepo.facts` holds, for every
branch (`main`, the baseline, included), what the race's checks must measure on it
(seeds/race-scoring-engine.md): build exit status, test pass/fail counts, lint findings and
`git diff --numstat main...BRANCH` sums. Every number below was written by hand from the file
contents in this module; tests/race/test_projects.py runs the real tools on every branch and
proves each one.

Determinism: fixed author/committer identities and dates, no global or system git config
(`GIT_CONFIG_GLOBAL=/dev/null`, `GIT_CONFIG_NOSYSTEM=1`, every other `GIT_*` variable of the
caller dropped), no hooks, no signing: the same commits (SHAs) on every build and every machine.

Shape of both repositories: `main` gets an initial commit; every branch forks from it; then `main`
gets one more commit (a CHANGELOG.md) that no branch has. So the three-dot diff the race uses
(`main...BRANCH`: what the branch changed since it left main) differs from the two-dot one
(`main..BRANCH`, which would also count CHANGELOG.md as deleted). The baseline facts are those of
`main`'s tip (the CHANGELOG changes no build, test or lint result).

Lint counts: ruff reports findings without severities, so every ruff finding is a lint *error*
(`lint_warnings` is 0). For clippy, `warning:` diagnostics count as warnings and `error:`
diagnostics as errors, cargo's summary lines ("`crate` (lib) generated 1 warning", "could not
compile") excluded.

Commands run in a checkout of the branch with the worker's virtualenv bin directory first on PATH
(`tool_env()` builds such an environment; `run_command()` runs one check with a timeout that
kills the whole process group). They write no caches into the checkout: pytest runs with
`-p no:cacheprovider`, ruff with `--no-cache`; `python -m compileall` and pytest do write
`__pycache__/`, which the repository's .gitignore ignores; cargo's `target/` is ignored too (tests
point CARGO_TARGET_DIR outside the checkout), and Cargo.lock is committed so cargo never writes it.
The Python sample's pytest.ini blocks the pytest plugins of Arena's own virtualenv (hypothesis,
xdist, anyio): they change no count but cost over a second per run.

Do not share one CARGO_TARGET_DIR between checkouts of different branches: every branch is the
same crate, cargo's build hash ignores the checkout's path, and freshness is judged by mtimes, so
a checkout made before another branch's build reuses that branch's binary (cargo 1.95:
`breaks-test` then reports 3 passed). One target folder per checkout (outside it) is safe.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE = "main"
AUTHOR_NAME = "Arena Race Fixture"
AUTHOR_EMAIL = "race-fixture@arena.invalid"
CARGO_HOME_BIN = Path("/root/.cargo/bin")
# The crate name as cargo prints it in its diagnostics and summary lines.
CRATE_NAME = "race_sample"

# Branch names, base first, in the order they are created.
PYTHON_BRANCHES = (
    "main",
    "clean",
    "broken-build",
    "adds-tests",
    "breaks-test",
    "lint-errors",
    "huge-diff",
    "hanging-test",
)
CARGO_BRANCHES = ("main", "clean", "breaks-test", "broken-build", "adds-tests", "lint-warning")


@dataclass(frozen=True)
class BranchFacts:
    """What the race's checks measure on one branch (written by hand, proved by the tests)."""

    build_ok: bool
    tests_passed: int | None  # None where tests do not run to completion (build broken, hangs)
    tests_failed: int | None
    # Findings of the linter: ruff → every finding is an error; clippy → `error:` diagnostics are
    # errors, `warning:` ones warnings (summary lines excluded). None where lint is not run
    # (the build failed: the race skips tests and lint).
    lint_errors: int | None
    lint_warnings: int | None
    # `git diff --numstat main...BRANCH` sums (0 for main itself).
    lines_added: int
    lines_removed: int
    files_changed: int
    hangs: bool = False  # the test command never ends on its own


@dataclass(frozen=True)
class RaceRepo:
    path: Path  # a plain (non-bare) repository with `main` checked out
    base: str  # "main"
    # The race spec's commands, keyed as in hydra.toml's [scoring] table:
    # build_command, test_command, lint_command.
    commands: dict[str, str]
    facts: dict[str, BranchFacts]  # branch name -> facts; "main" included (the baseline)
    # hydra.toml's timeout_per_check_seconds (enough for every check but the hanging test).
    timeout_per_check_seconds: int = 120


# ------------------------------------------------------------------------------------- git ----


def git_env() -> dict[str, str]:
    """The caller's environment without any GIT_* variable (a hook's GIT_INDEX_FILE, GIT_DIR…),
    with no global or system config and the fixture identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME=AUTHOR_NAME,
        GIT_AUTHOR_EMAIL=AUTHOR_EMAIL,
        GIT_COMMITTER_NAME=AUTHOR_NAME,
        GIT_COMMITTER_EMAIL=AUTHOR_EMAIL,
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
        TZ="UTC",
    )
    return env


GIT_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "tag.gpgsign=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.fileMode=true",
    "-c",
    "init.defaultBranch=main",
    "-c",
    "advice.detachedHead=false",
)


def git(repo: Path, *args: str, date: str | None = None) -> str:
    """Run git in `repo` with the deterministic environment; return its stdout."""
    env = git_env()
    if date is not None:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    done = subprocess.run(
        ["git", *GIT_CONFIG, *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done.stdout


def _write(repo: Path, files: Mapping[str, str | None]) -> None:
    """Write (or, for None, delete) files relative to the repository root."""
    for rel, text in files.items():
        target = repo / rel
        if text is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode())


def _commit(repo: Path, message: str, files: Mapping[str, str | None], date: str) -> None:
    _write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", message, date=date)


def commit(repo: Path, files: Mapping[str, str | None], message: str) -> None:
    """Write (None: delete) `files` in `repo` and commit them all on its current branch."""
    _write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", message)


def _date(minute: int) -> str:
    """Commit dates: 2026-11-26 09:MM UTC, one minute per commit, in creation order."""
    return f"2026-11-26T09:{minute:02d}:00+00:00"


def _init(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty")
    git(root, "init", "-q", "-b", BASE)
    return root


def _edit(text: str, old: str, new: str) -> str:
    """Replace the one occurrence of `old` (the branch contents are edits of main's)."""
    if text.count(old) != 1:
        raise ValueError(f"expected exactly one {old!r}")
    return text.replace(old, new)


def _hydra_toml(commands: Mapping[str, str], timeout: int) -> str:
    return (
        "[scoring]\n"
        "weights = { build = 30, tests = 30, lint = 15, diff_size = 15, speed = 10 }\n"
        f'build_command = "{commands["build_command"]}"\n'
        f'test_command = "{commands["test_command"]}"\n'
        f'lint_command = "{commands["lint_command"]}"\n'
        f"timeout_per_check_seconds = {timeout}\n"
        "\n"
        "[scoring.thresholds]\n"
        "auto_merge_minimum = 85.0\n"
        "fail_maximum = 30.0\n"
    )


# The commit that main gets after every branch has forked (3 lines).
CHANGELOG = "# Changelog\n\n- Unreleased: nothing yet.\n"


# ---------------------------------------------------------------------------------- python ----

PYTHON_COMMANDS = {
    "build_command": "python -m compileall -q calc",
    "test_command": "python -m pytest -q -p no:cacheprovider tests",
    "lint_command": "ruff check --no-cache --no-fix calc tests",
}
PYTHON_TIMEOUT_S = 10

# Rules pinned (ruff's defaults change between releases); concise output: one line per finding.
PY_RUFF_TOML = """\
line-length = 100
target-version = "py311"
output-format = "concise"

[lint]
preview = false
select = ["E", "F", "W"]
"""
# Pins pytest's rootdir to the checkout (no ini file from a parent folder can apply) and keeps
# the plugins of the worker's virtualenv (Arena's dev tools) out: hypothesis alone adds a second
# to every run. Blocking a plugin that is not installed is a no-op.
PY_PYTEST_INI = """\
[pytest]
testpaths = tests
addopts = -p no:hypothesispytest -p no:xdist -p no:xdist.looponfail -p no:anyio
"""
PY_GITIGNORE = "__pycache__/\n*.pyc\n"
PY_INIT = '"""calc: small arithmetic helpers for race-scoring tests."""\n'
PY_ARITH = '''\
"""Integer arithmetic."""


def add(a: int, b: int) -> int:
    return a + b


def subtract(a: int, b: int) -> int:
    return a - b


def multiply(a: int, b: int) -> int:
    return a * b


def divide(a: int, b: int) -> float:
    if b == 0:
        raise ZeroDivisionError("divide by zero")
    return a / b
'''
# 6 tests; only test_multiply calls multiply().
PY_TEST_ARITH = """\
import pytest

from calc.arith import add, divide, multiply, subtract


def test_add() -> None:
    assert add(2, 3) == 5


def test_add_negative() -> None:
    assert add(-2, -3) == -5


def test_subtract() -> None:
    assert subtract(7, 4) == 3


def test_multiply() -> None:
    assert multiply(6, 7) == 42


def test_divide() -> None:
    assert divide(7, 2) == 3.5


def test_divide_by_zero() -> None:
    with pytest.raises(ZeroDivisionError):
        divide(1, 0)
"""
# 7 lines.
PY_STATS = '''\
"""Summary statistics."""


def mean(values: list[float]) -> float:
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)
'''
# 12 lines, 2 tests.
PY_TEST_STATS = """\
import pytest

from calc.stats import mean


def test_mean() -> None:
    assert mean([1.0, 2.0, 3.0]) == 2.0


def test_mean_of_nothing() -> None:
    with pytest.raises(ValueError):
        mean([])
"""
# 11 lines, exactly 3 ruff findings: F401 `os`, F401 `sys`, F841 `count`.
PY_STATS_LINT = '''\
"""Summary statistics."""

import os
import sys


def mean(values: list[float]) -> float:
    count = len(values)
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)
'''
# 5 lines: never ends on its own.
PY_TEST_HANG = """\
import time


def test_hangs() -> None:
    time.sleep(3600)
"""

PY_MAIN_FILES = {
    ".gitignore": PY_GITIGNORE,
    "hydra.toml": _hydra_toml(PYTHON_COMMANDS, PYTHON_TIMEOUT_S),
    "pytest.ini": PY_PYTEST_INI,
    "ruff.toml": PY_RUFF_TOML,
    "calc/__init__.py": PY_INIT,
    "calc/arith.py": PY_ARITH,
    "tests/test_arith.py": PY_TEST_ARITH,
}

# branch -> its commits (message, files); facts written by hand next to each.
PY_BRANCH_COMMITS: dict[str, list[tuple[str, dict[str, str | None]]]] = {
    # New calc/stats.py (+7) and a reworded calc/__init__.py docstring (+1 -1).
    "clean": [
        (
            "Add mean()",
            {
                "calc/stats.py": PY_STATS,
                "calc/__init__.py": _edit(PY_INIT, "arithmetic", "arithmetic and statistics"),
            },
        )
    ],
    # `return a + b` -> `return a +`: a syntax error (+1 -1).
    "broken-build": [
        ("Break add()", {"calc/arith.py": _edit(PY_ARITH, "return a + b\n", "return a +\n")})
    ],
    # Two commits: calc/stats.py (+7), then tests/test_stats.py (+12, 2 passing tests).
    "adds-tests": [
        ("Add mean()", {"calc/stats.py": PY_STATS}),
        ("Test mean()", {"tests/test_stats.py": PY_TEST_STATS}),
    ],
    # multiply() off by one: test_multiply fails, the 5 others pass (+1 -1).
    "breaks-test": [
        (
            "Change multiply()",
            {"calc/arith.py": _edit(PY_ARITH, "return a * b\n", "return a * b + 1\n")},
        )
    ],
    # calc/stats.py with 3 ruff findings (+11).
    "lint-errors": [("Add mean()", {"calc/stats.py": PY_STATS_LINT})],
    # "huge-diff" is made by make_huge_python_branch().
    # tests/test_hang.py (+5): pytest never finishes.
    "hanging-test": [("Add a slow test", {"tests/test_hang.py": PY_TEST_HANG})],
}

PY_FACTS = {
    "main": BranchFacts(True, 6, 0, 0, 0, 0, 0, 0),
    "clean": BranchFacts(True, 6, 0, 0, 0, lines_added=8, lines_removed=1, files_changed=2),
    "broken-build": BranchFacts(False, None, None, None, None, 1, 1, 1),
    "adds-tests": BranchFacts(True, 8, 0, 0, 0, lines_added=19, lines_removed=0, files_changed=2),
    "breaks-test": BranchFacts(True, 5, 1, 0, 0, lines_added=1, lines_removed=1, files_changed=1),
    "lint-errors": BranchFacts(True, 6, 0, 3, 0, lines_added=11, lines_removed=0, files_changed=1),
    "hanging-test": BranchFacts(True, None, None, 0, 0, 5, 0, 1, hangs=True),
}


def make_huge_python_branch(
    repo: Path,
    branch: str = "huge-diff",
    *,
    files: int = 20,
    lines_per_file: int = 35,
    base: str = BASE,
    date: str = "2026-11-26T09:40:00+00:00",
) -> BranchFacts:
    """Fork `branch` from `base` in the Python sample repo with `files` new modules
    calc/tables/table_NN.py of `lines_per_file` lines each (a docstring, then constants): a huge
    diff that builds, keeps the tests passing and is ruff clean. Returns its facts; leaves `base`
    checked out."""
    if files < 1 or lines_per_file < 1:
        raise ValueError("files and lines_per_file must be at least 1")
    modules: dict[str, str | None] = {}
    for f in range(1, files + 1):
        lines = [f'"""Lookup table {f:02d}."""'] + [
            f"T{f:02d}_{i:04d} = {f * i}" for i in range(1, lines_per_file)
        ]
        modules[f"calc/tables/table_{f:02d}.py"] = "\n".join(lines) + "\n"
    git(repo, "checkout", "-q", "-b", branch, base)
    _commit(repo, f"Add {files} lookup tables", modules, date)
    git(repo, "checkout", "-q", base)
    return BranchFacts(
        True, 6, 0, 0, 0, lines_added=files * lines_per_file, lines_removed=0, files_changed=files
    )


def make_python_repo(root: Path) -> RaceRepo:
    """The pytest + ruff sample (6 tests on main, ruff clean) with the branches of
    PYTHON_BRANCHES; `root` must be empty or absent."""
    repo = _init(root)
    _commit(repo, "Initial calc package", PY_MAIN_FILES, _date(0))
    facts = {"main": PY_FACTS["main"]}
    minute = 10
    for branch in PYTHON_BRANCHES[1:]:
        if branch == "huge-diff":
            facts[branch] = make_huge_python_branch(repo, branch, date=_date(minute))
            minute += 1
            continue
        git(repo, "checkout", "-q", "-b", branch, BASE)
        for message, files in PY_BRANCH_COMMITS[branch]:
            _commit(repo, message, files, _date(minute))
            minute += 1
        facts[branch] = PY_FACTS[branch]
    git(repo, "checkout", "-q", BASE)
    _commit(repo, "Add a changelog", {"CHANGELOG.md": CHANGELOG}, _date(59))
    return RaceRepo(repo, BASE, dict(PYTHON_COMMANDS), facts, PYTHON_TIMEOUT_S)


# ----------------------------------------------------------------------------------- cargo ----

CARGO_COMMANDS = {
    "build_command": "cargo build --offline --quiet",
    "test_command": "cargo test --offline",
    "lint_command": "cargo clippy --offline --quiet",
}
CARGO_TIMEOUT_S = 120

RS_CARGO_TOML = f"""\
[package]
name = "{CRATE_NAME}"
version = "0.1.0"
edition = "2021"

[dependencies]
"""
# Committed so that cargo never writes one into the checkout; version 3 reads on every cargo
# since 1.53 and is kept as is by newer ones.
RS_CARGO_LOCK = f"""\
# This file is automatically @generated by Cargo.
# It is not intended for manual editing.
version = 3

[[package]]
name = "{CRATE_NAME}"
version = "0.1.0"
"""
RS_GITIGNORE = "/target\n"
# 3 unit tests; only `multiplies` calls multiply(). No doc comments with code: doc-tests run 0.
RS_LIB = """\
//! Integer arithmetic for race-scoring tests.

pub fn add(a: i64, b: i64) -> i64 {
    a + b
}

pub fn subtract(a: i64, b: i64) -> i64 {
    a - b
}

pub fn multiply(a: i64, b: i64) -> i64 {
    a * b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 3), 5);
    }

    #[test]
    fn subtracts() {
        assert_eq!(subtract(7, 4), 3);
    }

    #[test]
    fn multiplies() {
        assert_eq!(multiply(6, 7), 42);
    }
}
"""
RS_AFTER_MULTIPLY = "    a * b\n}\n"
# +4 lines (a blank line and the function).
RS_NEGATE = "\npub fn negate(a: i64) -> i64 {\n    -a\n}\n"
# +4 lines; clippy::needless_return: exactly 1 warning.
RS_NEGATE_RETURN = "\npub fn negate(a: i64) -> i64 {\n    return -a;\n}\n"
RS_LAST_TEST = "        assert_eq!(multiply(6, 7), 42);\n    }\n"
# +10 lines: 2 passing tests.
RS_NEGATE_TESTS = """
    #[test]
    fn negates() {
        assert_eq!(negate(5), -5);
    }

    #[test]
    fn negates_twice() {
        assert_eq!(negate(negate(9)), 9);
    }
"""
RS_LIB_NEGATE = _edit(RS_LIB, RS_AFTER_MULTIPLY, RS_AFTER_MULTIPLY + RS_NEGATE)

RS_MAIN_FILES = {
    ".gitignore": RS_GITIGNORE,
    "hydra.toml": _hydra_toml(CARGO_COMMANDS, CARGO_TIMEOUT_S),
    "Cargo.toml": RS_CARGO_TOML,
    "Cargo.lock": RS_CARGO_LOCK,
    "src/lib.rs": RS_LIB,
}

RS_BRANCH_COMMITS: dict[str, list[tuple[str, dict[str, str | None]]]] = {
    # negate() (+4).
    "clean": [("Add negate()", {"src/lib.rs": RS_LIB_NEGATE})],
    # multiply() off by one: `multiplies` fails, 2 pass (+1 -1).
    "breaks-test": [
        ("Change multiply()", {"src/lib.rs": _edit(RS_LIB, "    a * b\n", "    a * b + 1\n")})
    ],
    # add() returns a bool where an i64 is due: error[E0308] mismatched types (+1 -1).
    "broken-build": [
        ("Change add()", {"src/lib.rs": _edit(RS_LIB, "    a + b\n", "    a == b\n")})
    ],
    # Two commits: negate() (+4), then 2 tests (+10).
    "adds-tests": [
        ("Add negate()", {"src/lib.rs": RS_LIB_NEGATE}),
        (
            "Test negate()",
            {"src/lib.rs": _edit(RS_LIB_NEGATE, RS_LAST_TEST, RS_LAST_TEST + RS_NEGATE_TESTS)},
        ),
    ],
    # negate() with a needless `return` (+4).
    "lint-warning": [
        (
            "Add negate()",
            {"src/lib.rs": _edit(RS_LIB, RS_AFTER_MULTIPLY, RS_AFTER_MULTIPLY + RS_NEGATE_RETURN)},
        )
    ],
}

RS_FACTS = {
    "main": BranchFacts(True, 3, 0, 0, 0, 0, 0, 0),
    "clean": BranchFacts(True, 3, 0, 0, 0, lines_added=4, lines_removed=0, files_changed=1),
    "breaks-test": BranchFacts(True, 2, 1, 0, 0, lines_added=1, lines_removed=1, files_changed=1),
    "broken-build": BranchFacts(False, None, None, None, None, 1, 1, 1),
    "adds-tests": BranchFacts(True, 5, 0, 0, 0, lines_added=14, lines_removed=0, files_changed=1),
    "lint-warning": BranchFacts(True, 3, 0, 0, 1, lines_added=4, lines_removed=0, files_changed=1),
}


def make_cargo_repo(root: Path) -> RaceRepo:
    """The cargo library crate (no dependencies, 3 unit tests on main, clippy clean) with the
    branches of CARGO_BRANCHES; `root` must be empty or absent."""
    repo = _init(root)
    _commit(repo, "Initial crate", RS_MAIN_FILES, _date(0))
    minute = 10
    for branch in CARGO_BRANCHES[1:]:
        git(repo, "checkout", "-q", "-b", branch, BASE)
        for message, files in RS_BRANCH_COMMITS[branch]:
            _commit(repo, message, files, _date(minute))
            minute += 1
    git(repo, "checkout", "-q", BASE)
    _commit(repo, "Add a changelog", {"CHANGELOG.md": CHANGELOG}, _date(59))
    return RaceRepo(repo, BASE, dict(CARGO_COMMANDS), dict(RS_FACTS), CARGO_TIMEOUT_S)


# ------------------------------------------------------------------------ checks and specs ----


def cargo_bin_dir() -> Path | None:
    """The folder holding `cargo` and `cargo-clippy` (PATH first, then ~/.cargo/bin), or None."""
    found = shutil.which("cargo")
    candidates = [Path(found).parent] if found else []
    candidates.append(CARGO_HOME_BIN)
    for folder in candidates:
        if (folder / "cargo").is_file() and (folder / "cargo-clippy").is_file():
            return folder
    return None


def cargo_available() -> bool:
    """Whether cargo and clippy can run here (tests skip without them, fail under CI=true)."""
    folder = cargo_bin_dir()
    if folder is None:
        return False
    env = tool_env()
    for args in (["cargo", "--version"], ["cargo", "clippy", "--version"]):
        try:
            done = subprocess.run(
                [str(folder / args[0]), *args[1:]], env=env, capture_output=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        if done.returncode != 0:
            return False
    return True


# Variables of the caller that would change what the tools print or where they write.
_TOOL_ENV_DROP = (
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PY_COLORS",
    "FORCE_COLOR",
    "RUFF_OUTPUT_FORMAT",
    "RUFF_CACHE_DIR",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUST_BACKTRACE",
    "RUST_TEST_THREADS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TERM_COLOR",
    "CARGO_TERM_VERBOSE",
    "CARGO_TERM_QUIET",
)


def tool_env(venv_bin: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment the checks run in: the caller's, less variables that change the tools'
    output (and every GIT_*), with the virtualenv's bin folder (default: this interpreter's) then
    cargo's first on PATH, colours off; `extra` is added last (e.g. CARGO_TARGET_DIR)."""
    env = {
        k: v for k, v in os.environ.items() if k not in _TOOL_ENV_DROP and not k.startswith("GIT_")
    }
    path = [str(venv_bin or Path(sys.executable).parent)]
    if CARGO_HOME_BIN.is_dir():
        path.append(str(CARGO_HOME_BIN))
    path.append(env.get("PATH", os.defpath))
    env.update(PATH=os.pathsep.join(path), NO_COLOR="1", CARGO_TERM_COLOR="never", **extra)
    return env


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None when it timed out (the process group was killed)
    output: str  # stdout and stderr together
    timed_out: bool


def run_command(command: str, cwd: Path, env: Mapping[str, str], timeout_s: float) -> CommandResult:
    """Run `command` with `sh -c` in `cwd`; on timeout kill its whole process group (the shell's
    children too, so no orphan keeps the output pipe open)."""
    proc = subprocess.Popen(
        ["sh", "-c", command],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        return CommandResult(None, out, True)
    return CommandResult(proc.returncode, out, False)


def checkout(repo: RaceRepo, branch: str, dest: Path) -> Path:
    """A fresh `git worktree` of `branch` (detached, so `main` can be checked out too) at `dest`."""
    git(repo.path, "worktree", "add", "-q", "--detach", str(dest), branch)
    return dest


SPEC_STARTED_AT = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)


def agent_duration_s(index: int) -> int:
    """The duration of the agent at `index` in agent_spec_entries(): 30, 45, 60, 75, … seconds."""
    return 30 + 15 * index


def agent_spec_entries(repo: RaceRepo, branches: Sequence[str]) -> list[dict[str, str]]:
    """Race-spec agents for `branches`, in order, named after their branch: all start at
    2026-11-26T10:00:00Z and take agent_duration_s(i) seconds (30 s, 45 s, 60 s, …), so the
    fastest is the first and speed is `30 / duration × 100`."""
    unknown = [b for b in branches if b not in repo.facts]
    if unknown:
        raise KeyError(f"not branches of {repo.path}: {unknown}")
    if len(set(branches)) != len(branches):
        raise ValueError(f"duplicate branches: {list(branches)}")
    return [
        {
            "name": branch,
            "branch": branch,
            "started_at": _utc(SPEC_STARTED_AT),
            "completed_at": _utc(SPEC_STARTED_AT + timedelta(seconds=agent_duration_s(i))),
        }
        for i, branch in enumerate(branches)
    ]


def _utc(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_feature_repo(path: Path, hydra: str | None = None) -> Path:
    """A tiny repository: main (with `hydra` as its hydra.toml, if given) and a branch `feat`
    one commit ahead."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if hydra is not None:
        (path / "hydra.toml").write_text(hydra)
    (path / "a.txt").write_text("one\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    git(path, "checkout", "-q", "-b", "feat")
    (path / "a.txt").write_text("one\ntwo\n")
    git(path, "commit", "-q", "-am", "feat")
    git(path, "checkout", "-q", "main")
    return path


def extract_all(archive: tarfile.TarFile, folder: Path) -> None:
    """Every member of a source release under `folder`, through tarfile's data filter where this
    Python has it (3.11.4 and later; CI's system Python is 3.11.2): elsewhere a member that is a
    link or a device, or would land outside `folder`, is refused."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(folder, filter="data")
        return
    root = folder.resolve()
    for member in archive.getmembers():
        inside = (root / member.name).resolve().is_relative_to(root)
        if not inside or not (member.isfile() or member.isdir()):
            raise ValueError(f"{member.name}: not a plain file or folder under {folder}")
    archive.extractall(folder)
