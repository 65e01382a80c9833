"""The race sample repositories are what their facts say: proved with the real tools.

For every branch of both samples (tests/race/projects.py): a fresh `git worktree` of the branch,
the race's checks in its order (build; when it passes, tests then lint), each tool's own summary
read here with a few lines of regex (independently of scoring/race_parsers.py), and
`git diff --numstat main...BRANCH`; the measured BranchFacts must equal the hand-written ones.

CARGO_TARGET_DIR: one per checkout, outside it (tmp_path/target), never one shared by the
session. Every branch is the same crate (same name and version), and cargo's build hash does not
include the checkout's path, so branches would share one fingerprint whose freshness is judged
by file mtimes: a checkout made before another branch's build looks up to date and cargo reuses
the other branch's binary (seen with cargo 1.95: `breaks-test` reported 3 passed). The sample
has no dependencies, so a shared folder would save nothing anyway (about 0.5 s per branch).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from tests.race.projects import (
    CARGO_BRANCHES,
    CRATE_NAME,
    PYTHON_BRANCHES,
    BranchFacts,
    CommandResult,
    RaceRepo,
    agent_spec_entries,
    checkout,
    git,
    make_cargo_repo,
    make_huge_python_branch,
    make_python_repo,
    run_command,
    tool_env,
)

HANG_TIMEOUT_S = 5  # the hanging test must still be running after this

# The commits every build makes (the same on every machine and git version: content, identity
# and dates are fixed). A change to a sample's content changes these: update them with it.
PYTHON_SHAS = {
    "main": "80c1d0168caab632702b9d2327adebb734db46f1",
    "clean": "9dee1fc54c02d4724804836fd79abcee3c9596b6",
    "broken-build": "c8aa3dc3ca3204e1f174eea59c94ef5a3adbd4c4",
    "adds-tests": "a808b870724f44914e4513553c6c63815b065e1e",
    "breaks-test": "d7d19c48c050a1e65edcd40200daa52f4648b763",
    "lint-errors": "70572adc62677c1d1269e8511d3a13889a9088aa",
    "huge-diff": "f1d8a63be6caa4c0f8a0891e0c1091a3be4f1735",
    "hanging-test": "76c46df6154e14babdb9441f7de76f99221c33cc",
}
CARGO_SHAS = {
    "main": "a538e13aa759fd354c78317e84108bcf0c97d95f",
    "clean": "e128f4ac99e8a64f7583d3d230f67071c9a1affd",
    "breaks-test": "4aac83312d46abac92a9584c13b526e0e6f30f82",
    "broken-build": "3231a163e84c863d8d61b242a1c48271b043eff4",
    "adds-tests": "8f2a64ae5b2c01d3c9ad38903f36e3ebcf379547",
    "lint-warning": "bb40b4dc10ed19ceab6d1edc4ba7927959ebf033",
}


# ---------------------------------------------------------------- reading the tools' output ----


def pytest_counts(output: str) -> tuple[int, int]:
    """(passed, failed) from pytest's last line, e.g. `1 failed, 5 passed in 0.05s`."""
    last = [line for line in output.splitlines() if line.strip()][-1]
    summary = re.fullmatch(r"=*\s*(.+?) in [\d.]+s(?: \([^)]*\))?\s*=*", last)
    assert summary, f"no pytest summary line in:\n{output}"
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", summary.group(1))}
    assert set(counts) <= {"passed", "failed"}, f"unexpected outcomes {counts}:\n{output}"
    return counts.get("passed", 0), counts.get("failed", 0)


def ruff_findings(output: str) -> int:
    """Findings of `ruff check` (concise format: `path:row:col: CODE message`), checked against
    its own `Found N errors.` / `All checks passed!` line."""
    findings = re.findall(r"^\S+:\d+:\d+: [A-Z]+\d+ ", output, re.MULTILINE)
    total = re.search(r"^Found (\d+) errors?\.$", output, re.MULTILINE)
    if total:
        assert int(total.group(1)) == len(findings), output
    else:
        assert "All checks passed!" in output and not findings, output
    return len(findings)


def cargo_test_counts(output: str) -> tuple[int, int]:
    """(passed, failed) summed over every `test result:` line (unit tests, doc-tests)."""
    results = re.findall(
        r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed;", output, re.MULTILINE
    )
    assert results, f"no `test result:` line in:\n{output}"
    return sum(int(p) for p, _ in results), sum(int(f) for _, f in results)


CLIPPY_SUMMARY = re.compile(
    rf"`{CRATE_NAME}` \(.+\) generated \d+|could not compile|build failed|\d+ warnings? emitted"
    r"|aborting due to"
)


def clippy_diagnostics(output: str) -> tuple[int, int]:
    """(errors, warnings): clippy's `error:` / `warning:` diagnostics, summary lines excluded."""
    errors = warnings = 0
    for level, message in re.findall(
        r"^(error|warning)(?:\[[^\]]+\])?: (.*)$", output, re.MULTILINE
    ):
        if CLIPPY_SUMMARY.match(message):
            continue
        if level == "error":
            errors += 1
        else:
            warnings += 1
    return errors, warnings


def numstat(where: Path, spec: str) -> tuple[int, int, int]:
    """(lines added, lines removed, files changed) of `git diff --numstat SPEC`."""
    added = removed = files = 0
    for line in git(where, "diff", "--numstat", spec).splitlines():
        a, r, _path = line.split("\t")
        added, removed, files = added + int(a), removed + int(r), files + 1
    return added, removed, files


# -------------------------------------------------------------------- running the checks ----


def run(
    repo: RaceRepo, key: str, worktree: Path, env: dict[str, str], timeout: float
) -> CommandResult:
    result = run_command(repo.commands[key], worktree, env, timeout)
    print(f"$ {repo.commands[key]}  -> {result.exit_code}\n{result.output}")
    return result


def measure(
    repo: RaceRepo, branch: str, worktree: Path, env: dict[str, str], cargo: bool
) -> BranchFacts:
    """What the race's checks find in `worktree` (a checkout of `branch`)."""
    timeout = repo.timeout_per_check_seconds
    added, removed, files = numstat(worktree, f"{repo.base}...{branch}")
    measured = BranchFacts(False, None, None, None, None, added, removed, files)
    build = run(repo, "build_command", worktree, env, timeout)
    assert not build.timed_out
    if build.exit_code != 0:
        return measured  # the race runs neither tests nor lint
    measured = replace(measured, build_ok=True)

    hangs = repo.facts[branch].hangs
    tests = run(repo, "test_command", worktree, env, HANG_TIMEOUT_S if hangs else timeout)
    if tests.timed_out:
        measured = replace(measured, hangs=True)
    else:
        passed, failed = (cargo_test_counts if cargo else pytest_counts)(tests.output)
        assert (tests.exit_code == 0) == (failed == 0), "exit status and summary disagree"
        measured = replace(measured, tests_passed=passed, tests_failed=failed)

    lint = run(repo, "lint_command", worktree, env, timeout)
    assert not lint.timed_out
    if cargo:
        errors, warnings = clippy_diagnostics(lint.output)
        assert (lint.exit_code == 0) == (errors == 0), "clippy's exit status and errors disagree"
    else:
        errors, warnings = ruff_findings(lint.output), 0
        assert (lint.exit_code == 0) == (errors == 0), "ruff's exit status and findings disagree"
    return replace(measured, lint_errors=errors, lint_warnings=warnings)


def leftovers(worktree: Path) -> list[str]:
    """What the checks left in the checkout besides __pycache__/ (ignored): must be nothing."""
    status = git(worktree, "status", "--porcelain", "--ignored", "--untracked-files=all")
    return [line for line in status.splitlines() if "__pycache__/" not in line]


@pytest.mark.parametrize("branch", PYTHON_BRANCHES)
def test_python_branch_facts(python_race_repo: RaceRepo, branch: str, tmp_path: Path) -> None:
    repo = python_race_repo
    worktree = checkout(repo, branch, tmp_path / "checkout")
    measured = measure(repo, branch, worktree, tool_env(), cargo=False)
    assert measured == repo.facts[branch]
    assert leftovers(worktree) == []


@pytest.mark.cargo
@pytest.mark.parametrize("branch", CARGO_BRANCHES)
def test_cargo_branch_facts(cargo_race_repo: RaceRepo, branch: str, tmp_path: Path) -> None:
    repo = cargo_race_repo
    worktree = checkout(repo, branch, tmp_path / "checkout")
    env = tool_env(CARGO_TARGET_DIR=str(tmp_path / "target"))
    measured = measure(repo, branch, worktree, env, cargo=True)
    assert measured == repo.facts[branch]
    assert leftovers(worktree) == []  # Cargo.lock untouched, no target/ in the checkout


# ----------------------------------------------------------------------- the repositories ----


@pytest.fixture(params=["python", "cargo"])
def any_repo(request: pytest.FixtureRequest) -> RaceRepo:
    repo: RaceRepo = request.getfixturevalue(f"{request.param}_race_repo")
    return repo


def refs(repo: Path) -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
    return dict(line.split() for line in out.splitlines())


def test_repository_shape(any_repo: RaceRepo) -> None:
    repo = any_repo
    branches = PYTHON_BRANCHES if "calc" in repo.commands["build_command"] else CARGO_BRANCHES
    assert repo.base == "main" and list(repo.facts) == list(branches)
    assert set(refs(repo.path)) == set(branches)
    assert git(repo.path, "rev-parse", "--is-bare-repository").strip() == "false"
    assert git(repo.path, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert git(repo.path, "status", "--porcelain").strip() == ""
    main = repo.facts["main"]
    assert main.build_ok and (main.lines_added, main.lines_removed, main.files_changed) == (0, 0, 0)
    assert main.tests_failed == 0 and main.lint_errors == 0 and main.lint_warnings == 0


def test_hydra_toml_holds_the_commands(any_repo: RaceRepo) -> None:
    config = tomllib.loads((any_repo.path / "hydra.toml").read_text())["scoring"]
    assert {k: config[k] for k in any_repo.commands} == any_repo.commands
    assert set(any_repo.commands) == {"build_command", "test_command", "lint_command"}
    assert config["weights"] == {"build": 30, "tests": 30, "lint": 15, "diff_size": 15, "speed": 10}
    assert config["timeout_per_check_seconds"] == any_repo.timeout_per_check_seconds
    assert config["thresholds"] == {"auto_merge_minimum": 85.0, "fail_maximum": 30.0}


def test_three_dots_is_not_two_dots(any_repo: RaceRepo) -> None:
    """main moved on after the branches forked (CHANGELOG.md): the two-dot diff would also count
    that file as removed by every branch; the facts are the three-dot diff."""
    for branch in any_repo.facts:
        if branch == "main":
            continue
        facts = any_repo.facts[branch]
        three = numstat(any_repo.path, f"main...{branch}")
        assert three == (facts.lines_added, facts.lines_removed, facts.files_changed), branch
        two = numstat(any_repo.path, f"main..{branch}")
        assert two == (three[0], three[1] + 3, three[2] + 1), branch


def test_commits_are_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same SHAs on every build, whatever the caller's git environment says."""
    first = (
        refs(make_python_repo(tmp_path / "py1").path),
        refs(make_cargo_repo(tmp_path / "rs1").path),
    )
    for name, value in {
        "GIT_AUTHOR_NAME": "Someone Else",
        "GIT_COMMITTER_DATE": "2001-01-01T00:00:00+00:00",
        "GIT_DIR": str(tmp_path / "elsewhere"),
        "GIT_INDEX_FILE": str(tmp_path / "other-index"),  # as inside a git hook
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "user.name",
        "GIT_CONFIG_VALUE_0": "Config Person",
        "TZ": "America/New_York",
    }.items():
        monkeypatch.setenv(name, value)
    second = (
        refs(make_python_repo(tmp_path / "py2").path),
        refs(make_cargo_repo(tmp_path / "rs2").path),
    )
    assert first == second
    assert first == (PYTHON_SHAS, CARGO_SHAS)


def test_commit_identity_and_dates(python_race_repo: RaceRepo) -> None:
    log = git(python_race_repo.path, "log", "--all", "--format=%an <%ae> %cn <%ce> %aI %cI")
    identities = {line.rsplit(" ", 2)[0] for line in log.splitlines()}
    fixture = "Arena Race Fixture <race-fixture@arena.invalid>"
    assert identities == {f"{fixture} {fixture}"}
    assert all(line.split()[-1].startswith("2026-11-26T09:") for line in log.splitlines())


def test_huge_branch_builder_counts(tmp_path: Path) -> None:
    repo = make_python_repo(tmp_path / "repo")
    facts = make_huge_python_branch(repo.path, "bigger", files=3, lines_per_file=2)
    assert numstat(repo.path, "main...bigger") == (6, 0, 3)
    assert facts == BranchFacts(True, 6, 0, 0, 0, 6, 0, 3)
    assert git(repo.path, "symbolic-ref", "--short", "HEAD").strip() == "main"


# ------------------------------------------------------------------------------ the spec ----


def test_agent_spec_entries(python_race_repo: RaceRepo) -> None:
    entries = agent_spec_entries(python_race_repo, ["clean", "broken-build", "adds-tests"])
    assert entries == [
        {
            "name": "clean",
            "branch": "clean",
            "started_at": "2026-11-26T10:00:00Z",
            "completed_at": "2026-11-26T10:00:30Z",
        },
        {
            "name": "broken-build",
            "branch": "broken-build",
            "started_at": "2026-11-26T10:00:00Z",
            "completed_at": "2026-11-26T10:00:45Z",
        },
        {
            "name": "adds-tests",
            "branch": "adds-tests",
            "started_at": "2026-11-26T10:00:00Z",
            "completed_at": "2026-11-26T10:01:00Z",
        },
    ]
    with pytest.raises(KeyError, match="nope"):
        agent_spec_entries(python_race_repo, ["clean", "nope"])
    with pytest.raises(ValueError, match="duplicate"):
        agent_spec_entries(python_race_repo, ["clean", "clean"])


def test_run_command_kills_the_whole_group(tmp_path: Path) -> None:
    """A timed-out check returns promptly even when the shell's child keeps the pipe open."""
    result = run_command("sleep 3600 | cat; echo never", tmp_path, tool_env(), 0.5)
    assert result.timed_out and result.exit_code is None and "never" not in result.output
