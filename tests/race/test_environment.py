"""A race's own Python environment (docs/race.md, "The race's environment"): the checks of a
repository whose package shares its name with one installed in Arena's environment (markupsafe,
a dependency of Arena's, in a src/ layout as pallets/markupsafe has it) see the repository's
package, its declared pytest and ruff, and nothing of Arena; the environment is built once per
declaration and reused. Real git, the real bubblewrap jail, real pip installing real wheels (from
the folder scripts/install-test-tools fills, with no index)."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

from tests.needs import require_bwrap, unavailable
from tests.race.projects import commit, git
from workers.race.check import CheckCommands, CheckError, PythonEnvironment, run_check
from workers.race.environment import EnvironmentFailed, declared_requirements, environment_key
from workers.sandbox.local import LocalSandbox

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".test-tools" / "race-wheels"
PYPROJECT = """\
[project]
name = "markupsafe"
version = "0.1"
dependencies = []

[project.optional-dependencies]
test = ["pytest"]

[dependency-groups]
dev = ["ruff"]
"""
PACKAGE = 'def escape_attr(text):\n    return text.replace(\'"\', "&quot;")\n'
TEST = (
    "from markupsafe import escape_attr\n\n\n"
    "def test_escape_attr():\n"
    "    assert escape_attr('a\"b') == 'a&quot;b'\n"
)
COMMANDS = CheckCommands(
    build='python -c "import markupsafe, sys; print(markupsafe.__file__, sys.prefix)"',
    tests="python -m pytest -q -p no:cacheprovider",
    lint="ruff check --no-cache .",
    timeout_s=120,
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "markupsafe"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    files = {"pyproject.toml": PYPROJECT, "src/markupsafe/__init__.py": PACKAGE}
    commit(repo, {**files, "tests/test_escape.py": TEST}, "escape_attr")
    git(repo, "checkout", "-q", "-b", "syntax-error")
    commit(repo, {"src/markupsafe/__init__.py": "def escape_attr(text)\n"}, "broken")
    git(repo, "checkout", "-q", "main")
    return repo


@pytest.fixture
def wheels(monkeypatch: pytest.MonkeyPatch) -> Path:
    if not (WHEELS / ".complete").is_file():
        unavailable(
            f"no wheels in {WHEELS} for a race's environment: run scripts/install-test-tools"
        )
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # the folder only: no index, no network
    monkeypatch.setenv("PIP_FIND_LINKS", str(WHEELS))
    return WHEELS


def check(repo: Path, ref: str, envs: Path | None, tmp_path: Path) -> dict[str, object]:
    environment = PythonEnvironment(cache_root=envs) if envs else None
    result = run_check(
        str(repo),
        ref,
        "main",
        COMMANDS,
        LocalSandbox(),
        workdir_root=tmp_path,
        echo=lambda _: None,
        environment=environment,
    )
    return result.model_dump(mode="json")


def test_the_declared_requirements_and_the_key(repo: Path) -> None:
    # The default: the groups that say test (the test extra), not dev beside it (issue 36).
    assert declared_requirements(repo) == ["pytest"]
    key = environment_key(repo, None)
    assert environment_key(repo, "make setup") != key  # a setup command is another environment
    (repo / "requirements-test.txt").write_text("# tools\nmypy  # types\n-r other.txt\n")
    assert declared_requirements(repo) == ["pytest", "mypy"]
    assert environment_key(repo, None) != key  # a branch that changes them gets its own


def test_checks_run_in_the_repositorys_environment_not_arenas(
    repo: Path, wheels: Path, tmp_path: Path
) -> None:
    require_bwrap()
    assert importlib.util.find_spec("markupsafe") is not None  # Arena's own has one
    envs = tmp_path / "envs"
    base = check(repo, "main", envs, tmp_path)
    build = base["build"]
    assert isinstance(build, dict) and build["exit_code"] == 0, build
    # The repository's package from its src/, under the race's interpreter prefix.
    assert "/src/markupsafe/__init__.py" in build["output_tail"]
    assert str(envs) in build["output_tail"]
    tests = base["tests"]
    assert isinstance(tests, dict) and tests["counts"]["passed"] == 1, tests
    assert "hypothesis" not in tests["output_tail"]  # none of Arena's pytest plugins
    lint = base["lint"]
    assert isinstance(lint, dict) and lint["exit_code"] == 0, lint
    first = base["environment"]
    assert isinstance(first, dict) and not first["reused"]

    broken = check(repo, "syntax-error", envs, tmp_path)
    build = broken["build"]
    assert isinstance(build, dict) and build["exit_code"] != 0 and broken["tests_skipped"]
    again = broken["environment"]
    assert isinstance(again, dict) and again["reused"] and again["key"] == first["key"]
    assert again["duration_s"] < first["duration_s"]
    print(f"environment built in {first['duration_s']:.2f}s, reused in {again['duration_s']:.3f}s")


def test_with_the_workers_environment_arena_shadows_the_project(repo: Path, tmp_path: Path) -> None:
    """What the race's environment fixes: with the worker's tools, a syntax error in the
    repository's package builds, because `import markupsafe` finds Arena's."""
    require_bwrap()
    broken = check(repo, "syntax-error", None, tmp_path)
    build = broken["build"]
    assert isinstance(build, dict) and build["exit_code"] == 0
    assert "/src/markupsafe/" not in build["output_tail"]
    assert (
        os.path.dirname(importlib.util.find_spec("markupsafe").origin or "") in build["output_tail"]
    )


def test_an_environment_that_cannot_be_built_says_why_once(
    repo: Path, wheels: Path, tmp_path: Path
) -> None:
    """A requirement with no wheel: the check is an error naming it; the race's next check of
    the same declarations fails at once with the same reason instead of building again."""
    require_bwrap()
    text = (
        (repo / "pyproject.toml").read_text().replace('test = ["pytest"]', 'test = ["nosuch-pkg"]')
    )
    commit(repo, {"pyproject.toml": text}, "a requirement nobody has")
    envs = tmp_path / "envs"
    with pytest.raises(
        CheckError, match=r"environment: installing the requirements failed.*nosuch"
    ):
        check(repo, "main", envs, tmp_path)
    started = time.perf_counter()
    with pytest.raises(CheckError, match="this environment's build failed"):
        check(repo, "main", envs, tmp_path)
    assert time.perf_counter() - started < 5
    assert not any((p / ".arena-ready").exists() for p in envs.iterdir() if p.is_dir())


# -- what a hostile branch could do with it -----------------------------------------------------


def test_a_branch_cannot_have_the_worker_fetch_an_address_or_read_a_file(
    repo: Path, tmp_path: Path
) -> None:
    """A direct reference would have the worker's pip (outside the jail) fetch any URL or read
    any path the branch names: refused before pip runs, naming it."""
    for declared in ("evil @ https://example.invalid/evil.whl", "file:///etc/shadow", "./vendor"):
        (repo / "requirements.txt").write_text(f"{declared}\n")
        with pytest.raises(EnvironmentFailed, match="only requirements by name"):
            declared_requirements(repo)


def test_a_branch_cannot_pass_the_workers_pip_an_option(repo: Path, tmp_path: Path) -> None:
    """pyproject.toml's lists reach the worker's pip, outside the jail: an entry that is an
    option (`-r/etc/passwd` would have pip read a file of the worker's and quote its lines in
    the error) or not a list of strings is refused naming it, before pip runs."""
    (repo / "requirements.txt").unlink(missing_ok=True)
    text = (repo / "pyproject.toml").read_text()
    for entry in ('"-r/etc/passwd"', '"--index-url=http://example.invalid"', '"pytest; ;"'):
        (repo / "pyproject.toml").write_text(
            text.replace("dependencies = []", f"dependencies = [{entry}]")
        )
        with pytest.raises(EnvironmentFailed, match="not a requirement by name"):
            declared_requirements(repo)
    for shape in ('dependencies = "-r/etc/passwd"', "dependencies = [{a = 1}]"):
        (repo / "pyproject.toml").write_text(text.replace("dependencies = []", shape))
        with pytest.raises(EnvironmentFailed, match=r"\[project\] dependencies is not a list"):
            declared_requirements(repo)


def test_a_setup_command_has_the_environments_own_pip(
    repo: Path, wheels: Path, tmp_path: Path
) -> None:
    """`pip install -e .` in a setup command installs into the race's environment: it has a pip
    of its own then (and only then), first on PATH."""
    require_bwrap()
    envs = tmp_path / "envs"
    environment = PythonEnvironment(cache_root=envs, setup_command="pip --version")
    lines: list[str] = []
    result = run_check(
        str(repo),
        "main",
        "main",
        COMMANDS,
        LocalSandbox(),
        workdir_root=tmp_path,
        echo=lines.append,
        environment=environment,
    )
    assert result.build is not None and result.build.exit_code == 0
    made = result.environment
    assert made is not None and not made.reused
    assert any("== setup: pip --version" in line and "exit 0" in line for line in lines)
    # pip says where it runs from: the environment's own site-packages.
    assert any(f"from {envs / made.key}/lib/python" in line for line in lines), lines
    without = check(repo, "main", tmp_path / "other-envs", tmp_path)["environment"]
    assert isinstance(without, dict)
    assert not list(
        (tmp_path / "other-envs" / without["key"]).glob("lib/python*/site-packages/pip")
    )


def test_with_a_setup_command_no_two_commits_share_an_environment(repo: Path) -> None:
    """A setup command may run the checkout's code with the environment writable: an agent's
    branch must not prepare the environment another check (the baseline's) then runs in."""
    assert environment_key(repo, None, "a" * 40) == environment_key(repo, None, "b" * 40)
    with_setup = environment_key(repo, "pip install -e .", "a" * 40)
    assert with_setup != environment_key(repo, "pip install -e .", "b" * 40)


def test_environments_unused_for_days_are_removed_when_another_is_built(tmp_path: Path) -> None:
    """The cache does not grow for ever: each use touches an environment's marker, and a build
    removes those no check has used for UNUSED_KEPT_S, but never one whose lock is held."""
    from workers.race.env_cache import READY, UNUSED_KEPT_S, prune
    from workers.race.env_cache import locked as _locked

    now = time.time()
    for key, age in (("fresh", 60.0), ("stale", UNUSED_KEPT_S + 60), ("busy", UNUSED_KEPT_S * 2)):
        (tmp_path / key).mkdir()
        (tmp_path / key / READY).write_text(key)
        os.utime(tmp_path / key / READY, (now - age, now - age))
    (tmp_path / "building").mkdir()  # no marker yet: a build in progress
    with _locked(tmp_path / "busy.lock"):
        assert prune(tmp_path, now) == ["stale"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["building", "busy", "fresh"]
    assert prune(tmp_path, now) == ["busy"]  # its lock released
