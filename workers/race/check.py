"""One race check: a fresh checkout of a branch (or the base), its build, tests and lint run
through a sandbox, and its diff against the base (seeds/race-scoring-engine.md, "Evaluation
Pipeline"). Scores are not computed here: tests and lint need the baseline and speed needs
every agent, so the reducer scores once every check is in (scoring/race.py).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from scoring.race_dimensions import LintCounts, TestCounts
from scoring.race_lint import parse_lint_output
from scoring.race_measures import DiffStats
from scoring.race_parsers import RunnerName, parse_junit_xml, parse_test_output
from scoring.race_tests import CaseOutcome
from workers.race.builders import builder_for
from workers.race.environment import (
    CacheBounds,
    EnvironmentFailed,
    EnvironmentOptions,
    EnvironmentRun,
    python_environment,
)
from workers.race.git import (
    GIT_TIMEOUT_S,
    GitError,
    checkout,
    clone,
    commit_of,
    diff_stats,
    git,
)
from workers.race.named_tests import named_cases, pytest_report_env, report_path
from workers.race.node_env import NODE_DECLARING, NodeBinSession, node_environment, wants_node
from workers.sandbox import (
    CommandResult,
    Sandbox,
    SandboxLimits,
    SandboxSession,
    SandboxUnavailable,
)
from workers.sandbox.base import URL_WITH_USER

TAIL_CHARS = 2_000  # of each command's output, kept with the result; the whole goes to the log
MAX_JUNIT_BYTES = 16 * 1024 * 1024
EXIT_NOT_FOUND = 127  # what sh returns for a command it cannot find


# What an agent's check says when its environment, the base's (the branch declares the same),
# cannot be built; the reducer reads the race as failed at the start (race_reduce.py).
BASE_ENVIRONMENT_FAILED = "the base's environment could not be built"
# The files whose contents make an environment (workers/race/environment.py, declaring_files).
DECLARING = (
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    ":(glob)requirements*.txt",
    ":(glob)requirements/*.txt",
)


class CheckError(RuntimeError):
    """The check cannot measure this branch (no such branch, a command not installed): the
    unit is an error result with this reason, and the race reduces the others."""


class CheckCommands(BaseModel):
    """What a race runs; a command left out (None) is not measured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    build: str | None = None
    tests: str | None = None
    lint: str | None = None
    timeout_s: float = 120.0
    test_runner: RunnerName | None = None  # None: recognised from the output
    junit_xml: str | None = None  # a report the test command writes (path in the checkout)
    linter: str | None = None  # None: recognised from the output


class CommandRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output_tail: str
    output_bytes: int


class TestsRun(CommandRun):
    __test__ = False  # not a pytest class

    runner: str  # the parser that read the counts, or "exit-code"
    counts: TestCounts | None
    # Each test by name and how it ended, where the runner names every test (named_tests.py);
    # None where it does not. The reducer compares them with the baseline's.
    cases: dict[str, CaseOutcome] | None = None


class LintRun(CommandRun):
    linter: str
    counts: LintCounts | None


class CheckResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["agent", "baseline"]
    ref: str
    commit: str
    base_commit: str
    build: CommandRun | None = None
    tests: TestsRun | None = None
    lint: LintRun | None = None
    tests_skipped: bool = False  # the build failed: tests and lint were not run
    diff: DiffStats
    checkout_s: float
    environment: EnvironmentRun | None = None  # the race's own, when it declares one
    node_environment: EnvironmentRun | None = None  # a package.json's (node_env.py)


class PythonEnvironment(BaseModel):
    """A race's commands run in a virtual environment made from what the checked commit
    declares (workers/race/environment.py), kept under `cache_root`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_root: Path
    setup_command: str | None = None
    bounds: CacheBounds = CacheBounds()
    options: EnvironmentOptions = EnvironmentOptions()  # the groups, pin_tools


# `ruff check` (also `python -m ruff check`, `.venv/bin/ruff check`), not `myruff check`.
_RUFF_CHECK = re.compile(r"(?<![\w.-])(ruff\s+check)(?=\s|$|;|&|\|)")
_FIX_MODE = re.compile(r"\s--(?:no-)?fix(?:-only)?(?=\s|=|$)|\s--diff(?=\s|$)")


def without_fixes(command: str) -> str:
    """The lint command with ruff's no-fix mode (`ruff check --no-fix`): a `fix = true` in the
    repository's config would otherwise fix the checkout and report only what remains (and
    where the committed files are read-only, report E902 for a top-level file it could not
    write instead of its findings). A command that names a fix mode itself (`--fix`,
    `--no-fix`, `--fix-only`, `--diff`) is kept as written."""
    if _FIX_MODE.search(command):
        return command
    return _RUFF_CHECK.sub(r"\1 --no-fix", command)


def committed_paths(workdir: Path, commit: str) -> list[str]:
    """The top-level paths of `commit`'s tree (what the lint must see as committed); what the
    build and tests made beside them (caches, `target/`) stays writable."""
    names = git("ls-tree", "-z", "--name-only", commit, cwd=workdir).split("\0")
    return [name for name in names if name and name != ".git"]


def forget_credentials(workdir: Path, repo: str) -> None:
    """A repository URL with a user or password is kept by the clone in .git/config, which the
    commands can read: the checkout forgets its origin (everything is checked out by now)."""
    if URL_WITH_USER.search(repo):
        git("remote", "remove", "origin", cwd=workdir)


def _run(
    session: SandboxSession,
    which: str,
    command: str,
    commands: CheckCommands,
    echo: Callable[[str], None],
    read_only: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    done = session.run(command, commands.timeout_s, env=env, read_only=read_only)
    status = "timed out" if done.timed_out else f"exit {done.exit_code}"
    echo(f"== {which}: {command} ({status}, {done.duration_s:.2f}s)")
    echo(done.output.rstrip("\n"))
    if done.infrastructure:  # no engine, no image: retried on resubmission, not scored
        raise SandboxUnavailable(f"{which} command could not run: {done.error}")
    if done.error is not None:  # could not start, or killed by the sandbox (out of memory)
        failed = "could not start" if done.exit_code is None else "failed"
        raise CheckError(f"{which} command {failed}: {done.error}")
    if done.exit_code == EXIT_NOT_FOUND and not done.timed_out:
        last = done.output.strip().splitlines()[-1:] or ["command not found"]
        raise CheckError(f"{which} command {command!r}: not installed ({last[0][:200]})")
    return done


def _fields(done: CommandResult) -> dict[str, object]:
    return {
        "command": done.command,
        "exit_code": done.exit_code,
        "timed_out": done.timed_out,
        "duration_s": done.duration_s,
        "output_tail": done.output[-TAIL_CHARS:],
        "output_bytes": done.output_bytes,
    }


def _junit_counts(workdir: Path, relative: str) -> TestCounts | None:
    path = (workdir / relative).resolve()
    if not path.is_relative_to(workdir.resolve()) or not path.is_file():
        return None
    if path.stat().st_size > MAX_JUNIT_BYTES:
        return None
    return parse_junit_xml(path.read_text(errors="replace"))


def _tests(
    done: CommandResult, workdir: Path, commands: CheckCommands, own_report: Path
) -> TestsRun:
    counts = _junit_counts(workdir, commands.junit_xml) if commands.junit_xml else None
    runner, found = "junit", counts
    if counts is None:
        report = parse_test_output(done.output, done.exit_code or 0, commands.test_runner)
        runner, found = report.runner, report.counts
    cases = named_cases(done.output, runner, workdir, own_report, commands.junit_xml)
    return TestsRun.model_validate(
        {**_fields(done), "runner": runner, "counts": found, "cases": cases}
    )


def run_check(
    repo: str,
    ref: str,
    base: str,
    commands: CheckCommands,
    sandbox: Sandbox,
    *,
    role: Literal["agent", "baseline"] = "agent",
    expected_commit: str | None = None,
    limits: SandboxLimits | None = None,
    workdir_root: Path | None = None,
    echo: Callable[[str], None] = print,
    environment: PythonEnvironment | None = None,
    git_timeout_s: float = GIT_TIMEOUT_S,
) -> CheckResult:
    """Check `ref` of `repo` (at `expected_commit`, the commit resolved at submission, when
    given) against `base`; the checkout is removed afterwards whatever happens."""
    refused = sandbox.unavailable()
    if refused is not None:  # no clone for nothing: the unit is an infrastructure error
        raise SandboxUnavailable(refused)
    started = time.perf_counter()
    if workdir_root is not None:  # a work dir the operator named but nothing made yet
        workdir_root.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="arena-race-", dir=workdir_root))
    try:
        workdir = root / "checkout"
        # The clone first: it is what tells whether the branch exists on the worker's side.
        clone(repo, workdir, timeout_s=git_timeout_s)
        commit = expected_commit or commit_of(workdir, ref)
        if commit is None:
            raise CheckError(f"branch {ref!r} not found in {repo}")
        base_commit = commit_of(workdir, base)
        if base_commit is None:
            raise CheckError(f"base {base!r} not found in {repo}")
        checkout(workdir, commit)
        forget_credentials(workdir, repo)
        result = CheckResult(
            role=role,
            ref=ref,
            commit=commit,
            base_commit=base_commit,
            diff=diff_stats(workdir, base_commit, commit)
            if role == "agent"
            else DiffStats(lines_added=0, lines_removed=0, files_changed=0),
            checkout_s=time.perf_counter() - started,
        )
        if environment is not None:
            sandbox, result.environment = _in_environment(
                workdir, result, environment, sandbox, limits, commands, echo
            )
            if wants_node(workdir):
                result.node_environment = _in_node_environment(
                    workdir, result, environment, commands, echo
                )
        _measure(result, workdir, commands, sandbox, limits, echo)
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _in_environment(
    workdir: Path,
    result: CheckResult,
    environment: PythonEnvironment,
    sandbox: Sandbox,
    limits: SandboxLimits | None,
    commands: CheckCommands,
    echo: Callable[[str], None],
) -> tuple[Sandbox, EnvironmentRun]:
    """The sandbox that runs the commands in the checkout's environment, and how it was had.
    An agent's branch that declares what the base declares (and no setup command, which would
    key its environment by its commit) has the base's environment: its failure says so."""
    try:
        builder = builder_for(sandbox, workdir, limits, commands.timeout_s)
        env, run = python_environment(
            workdir,
            environment.cache_root,
            environment.setup_command,
            builder,
            echo,
            result.commit,
            (commands.build, commands.tests, commands.lint),
            environment.bounds,
            environment.options,
        )
    except EnvironmentFailed as exc:
        # A branch still at the base's commit fails in the base's own words, as the baseline.
        shared = result.role == "agent" and environment.setup_command is None
        if shared and result.commit != result.base_commit and declares_as_base(workdir, result):
            raise CheckError(f"environment: {BASE_ENVIRONMENT_FAILED}: {exc}") from None
        raise CheckError(f"environment: {exc}") from None
    return builder.sandbox_in(env), run


def _in_node_environment(
    workdir: Path,
    result: CheckResult,
    environment: PythonEnvironment,
    commands: CheckCommands,
    echo: Callable[[str], None],
) -> EnvironmentRun:
    """The checkout's Node environment, in its node_modules (node_env.py); failing as the base's
    when the branch has the base's package files."""
    named = (commands.build, commands.tests, commands.lint)
    try:
        return node_environment(workdir, environment.cache_root, echo, named, environment.bounds)
    except EnvironmentFailed as exc:
        shared = result.role == "agent" and result.commit != result.base_commit
        if shared and declares_as_base(workdir, result, NODE_DECLARING):
            raise CheckError(f"environment: {BASE_ENVIRONMENT_FAILED}: {exc}") from None
        raise CheckError(f"environment: {exc}") from None


def declares_as_base(workdir: Path, result: CheckResult, names: Sequence[str] = DECLARING) -> bool:
    """Whether the checked commit has the base's declaring files (environment.declaring_files'
    names, or `names`); False when git cannot tell."""
    args = ("--name-only", "--end-of-options", result.base_commit, result.commit, "--", *names)
    try:
        return not git("diff", *args, cwd=workdir).strip()
    except GitError:
        return False


def _measure(
    result: CheckResult,
    workdir: Path,
    commands: CheckCommands,
    sandbox: Sandbox,
    limits: SandboxLimits | None,
    echo: Callable[[str], None],
) -> None:
    """Build, then tests and lint unless the build failed (the seed's short-circuit; the
    baseline is measured whole, so every agent is compared with the same numbers). The three
    run in one sandbox session: the Docker sandbox starts one container for them all."""
    count = sum(1 for c in (commands.build, commands.tests, commands.lint) if c)
    with sandbox.session(workdir, limits, budget_s=count * commands.timeout_s) as session:
        if result.node_environment is not None:  # its node_modules/.bin first on PATH
            session = NodeBinSession(session, workdir)
        _measure_in(result, workdir, commands, session, echo)


def _measure_in(
    result: CheckResult,
    workdir: Path,
    commands: CheckCommands,
    session: SandboxSession,
    echo: Callable[[str], None],
) -> None:
    if commands.build:
        done = _run(session, "build", commands.build, commands, echo)
        result.build = CommandRun.model_validate(_fields(done))
        if (done.exit_code != 0 or done.timed_out) and result.role == "agent":
            result.tests_skipped = True
            echo("== build failed: tests and lint not run")
            return
    if commands.tests:
        own = report_path(workdir)  # pytest's JUnit report, for the tests' names
        done = _run(session, "tests", commands.tests, commands, echo, env=pytest_report_env(own))
        result.tests = _tests(done, workdir, commands, own)
    if commands.lint:
        # The linter reads what was committed: the committed paths are read-only to it, and
        # ruff, which would fix them under a `fix = true` config, runs in its no-fix mode.
        committed = committed_paths(workdir, result.commit)
        lint = without_fixes(commands.lint)
        done = _run(session, "lint", lint, commands, echo, committed)
        report = parse_lint_output(done.output, done.exit_code or 0, commands.linter)
        result.lint = LintRun.model_validate(
            {**_fields(done), "linter": report.linter, "counts": report.counts}
        )
