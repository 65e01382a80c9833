"""A race's environment on a real public Python repository (issue 36, Build 1 and 2): pallets/click
8.5.1, as its release's sdist has it (src/ layout, 8 dependency groups: dev, docs, docs-auto,
gha-update, pre-commit, tests, tests-random, typing, the layout pallets' itsdangerous has), raced
with the obvious commands. Before (c3f317a) every group went in (sphinx, tox, pre-commit, mypy,
pyright, ...) and nothing recorded which versions; now the default is the runtime, the groups
named test (not dev: ruff, tox, tox-uv) and the named tools, a race may name fewer, and what was
installed is in the summary and layout.

The sdist comes from the folder scripts/install-test-tools fills, the wheels from the race wheel
folder, no index (tests/conftest.py): a group that was not chosen (sphinx, tox) would fail the
build, since none of its wheels is there."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from tasks.execute import execute_batch
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.race_view import format_results
from tests.conftest import RACE_WHEELS
from tests.needs import require_bwrap, unavailable
from tests.race.projects import commit, extract_all, git
from workers.race.environment import TOOL_PINS
from workers.race.requirements import EnvironmentOptions, select

ROOT = Path(__file__).resolve().parents[2]
REPOS = ROOT / ".test-tools" / "race-repos"
SDIST = REPOS / "click-8.5.1.tar.gz"
COMMANDS = ('python -c "import click"', "python -m pytest -q tests/test_basic.py", "ruff check .")
VERSION = {tool: TOOL_PINS[tool].split("==")[1] for tool in ("pytest", "ruff")}


@pytest.fixture(scope="module")
def click_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """click 8.5.1 on main, and an agent's branch `a-docs` that changes a docstring."""
    if not SDIST.is_file():
        unavailable(f"no {SDIST.name} in {SDIST.parent}: run scripts/install-test-tools")
    folder = tmp_path_factory.mktemp("click")
    with tarfile.open(SDIST) as archive:
        extract_all(archive, folder)
    repo = folder / "click-8.5.1"
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", "click 8.5.1")
    git(repo, "checkout", "-q", "-b", "a-docs")
    text = (repo / "src" / "click" / "__init__.py").read_text()
    commit(repo, {"src/click/__init__.py": text.replace('"""', '""" ', 1)}, "a docstring")
    git(repo, "checkout", "-q", "main")
    return repo


def test_the_default_is_the_runtime_the_test_groups_and_the_named_tools(click_repo: Path) -> None:
    """What issue 36 asked of itsdangerous: pytest and ruff (click has no runtime dependency on
    Linux), not tox, tox-uv, sphinx, mypy or pyright."""
    chosen = select(click_repo, COMMANDS, EnvironmentOptions())
    assert chosen.groups == ["tests", "tests-random"]
    assert chosen.requirements == ["pytest", "pytest-randomly", "pytest-xdist", TOOL_PINS["ruff"]]
    every = select(click_repo, COMMANDS, EnvironmentOptions(groups=list(_all_groups())))
    assert {"sphinx", "pre-commit", "mypy", "pyright"} <= {
        r.split(";")[0] for r in every.requirements
    }


def _all_groups() -> tuple[str, ...]:
    return (
        "dev",
        "docs",
        "docs-auto",
        "gha-update",
        "pre-commit",
        "tests",
        "tests-random",
        "typing",
    )


def test_a_race_of_click_records_what_its_environment_holds(
    click_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    if not (RACE_WHEELS / ".complete").is_file():
        unavailable(f"no wheels in {RACE_WHEELS}: run scripts/install-test-tools")
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(click_repo.parent))
    monkeypatch.setenv("ARENA_WORK_DIR", str(tmp_path / "work"))
    build, tests, lint = COMMANDS
    spec = {
        "workload": "race",
        "task": "touch a docstring",
        "repo": str(click_repo),
        "agents": [{"name": "A", "branch": "a-docs"}],
        "scoring": {
            "build_command": build,
            "test_command": tests,
            "lint_command": lint,
            "environment": {"groups": ["tests"], "pin_tools": True},
        },
    }
    batch = validate_batch(spec)
    results = execute_batch(batch)
    assert [r.status for r in results] == ["ok", "ok"], [r.reason for r in results]
    summary = get_workload("race").reduce(batch, results).summary
    counts = summary["agents"][0]["measures"]["tests"]["counts"]
    assert counts["passed"] > 50 and counts["failed"] == 0  # click's own tests, in its own env
    (recorded,) = summary["environments"].values()
    assert recorded["used_by"] == ["@baseline", "A"]
    # The tests group (pytest, pinned: click gives no version) and ruff the lint command names.
    assert recorded["groups"] == ["tests"]
    assert recorded["requirements"] == [TOOL_PINS["pytest"], TOOL_PINS["ruff"]]
    assert recorded["pinned_tools"] == [TOOL_PINS["pytest"]]
    assert recorded["tools"] == VERSION
    assert set(recorded["installed"]) == {
        "iniconfig",
        "packaging",
        "pluggy",
        "pygments",
        "pytest",
        "ruff",
    }
    layout = format_results(summary, batch.batch_id)
    assert f"  tools: pytest {VERSION['pytest']}, ruff {VERSION['ruff']}" in layout
    assert "groups tests; 6 distributions" in layout


# pallets/itsdangerous 2.2.0's locked requirements/tests.txt: what its environment holds, with
# ruff at Arena's pin for the lint command (the repository declares ruff only in dev.txt).
ITSDANGEROUS_ENVIRONMENT = {
    "freezegun": "1.4.0",
    "iniconfig": "2.0.0",
    "packaging": "24.0",
    "pluggy": "1.4.0",
    "pytest": "8.1.1",
    "python-dateutil": "2.9.0.post0",
    "six": "1.16.0",
    "ruff": VERSION["ruff"],
}


def test_itsdangerous_races_with_its_tests_lock_not_every_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repository issue 36 raced, as released (requirements/*.txt from pip-compile): its
    environment is its tests.txt and ruff, not sphinx, tox, pre-commit, mypy or pyright (the
    issue's 134 packages), and its 2.2.0 suite passes there; before, requirements/ was not
    read and the suite could not import freezegun."""
    require_bwrap()
    if not (REPOS / "wheels" / ".complete").is_file() or not (RACE_WHEELS / ".complete").is_file():
        unavailable(f"no itsdangerous wheels in {REPOS}: run scripts/install-test-tools")
    monkeypatch.setenv("PIP_FIND_LINKS", f"{RACE_WHEELS} {REPOS / 'wheels'}")
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(tmp_path))
    monkeypatch.setenv("ARENA_WORK_DIR", str(tmp_path / "work"))
    with tarfile.open(REPOS / "itsdangerous-2.2.0.tar.gz") as archive:
        extract_all(archive, tmp_path)
    repo = tmp_path / "itsdangerous-2.2.0"
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", "itsdangerous 2.2.0")
    git(repo, "branch", "a")
    spec = {
        "workload": "race",
        "task": "nothing",
        "repo": str(repo),
        "agents": [{"name": "A", "branch": "a"}],
        "scoring": {
            "build_command": 'python -c "import itsdangerous"',
            "test_command": "python -m pytest -q -p no:cacheprovider",
            "lint_command": "ruff check .",
        },
    }
    batch = validate_batch(spec)
    results = execute_batch(batch)
    assert [r.status for r in results] == ["ok", "ok"], [r.reason for r in results]
    summary = get_workload("race").reduce(batch, results).summary
    counts = summary["agents"][0]["measures"]["tests"]["counts"]
    assert counts["passed"] > 250 and counts["failed"] == counts["errors"] == 0, counts
    (recorded,) = summary["environments"].values()
    assert recorded["groups"] == ["tests"]
    assert recorded["installed"] == dict(sorted(ITSDANGEROUS_ENVIRONMENT.items()))
    assert recorded["tools"] == {"pytest": "8.1.1", "ruff": VERSION["ruff"]}
