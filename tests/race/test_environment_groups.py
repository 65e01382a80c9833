"""What goes into a race's environment (issue 36, Build 1 and 2): the runtime dependencies, the
groups the race names (by default those whose name says test, else dev: not docs, lint, typing),
and the tools the commands name; what it holds is on record, name → version, in each check's
result, and `environment.pin_tools` pins declared tools that give no version.

Before (c3f317a): every extra, every group and every requirements*.txt went in (pallets'
itsdangerous: sphinx, tox, pre-commit, mypy and pyright for commands that needed pytest and
ruff), `{include-group = ...}` entries were dropped, nothing said which versions were installed,
and there was no way to choose. Real git, the real bubblewrap jail, real pip installing real
wheels from the folder scripts/install-test-tools fills (no index: a docs group's sphinx, not
there, would fail the build if it were installed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from tasks.store import Store
from tasks.workloads.base import UnitResult
from tasks.workloads.race_environments import environments_of, format_environments
from tests.api.conftest import AUTH, api_settings, client
from tests.conftest import RACE_WHEELS
from tests.integration.conftest import db, redis_url
from tests.needs import require_bwrap, unavailable
from tests.race.projects import commit, git, make_feature_repo
from tests.race.test_submission import accepted, place, refused
from workers.race.check import CheckCommands, PythonEnvironment, run_check
from workers.race.environment import TOOL_PINS
from workers.race.requirements import EnvironmentOptions, UnknownGroup, select
from workers.sandbox.local import LocalSandbox

__all__ = ["api_settings", "client", "db", "place", "redis_url"]  # fixtures
PYPROJECT = """\
[project]
name = "shop"
version = "0.1"
dependencies = ["packaging>=20"]

[project.optional-dependencies]
test = ["pytest"]
docs = ["sphinx"]
all = ["shop[test,docs]"]

[dependency-groups]
tests = ["pytest", "pytest-xdist ; python_version >= '3.9'"]
dev = [{include-group = "tests"}, "ruff"]
docs = ["furo"]
lint = ["ruff", "mypy"]
typing = ["pyright"]
"""
COMMANDS = ("python -c 'import shop'", "python -m pytest -q", "ruff check .")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "requirements.txt").write_text("attrs\n")
    (tmp_path / "requirements-docs.txt").write_text("sphinx-autobuild\n")
    return tmp_path


def test_by_default_runtime_and_the_groups_that_say_test(checkout: Path) -> None:
    chosen = select(checkout, COMMANDS, EnvironmentOptions())
    # Not dev beside test groups (it is the developer's everything); not docs, lint, typing,
    # requirements-docs.txt.
    assert chosen.groups == ["test", "tests"]
    assert chosen.requirements == [
        "packaging>=20",
        "attrs",
        "pytest",
        'pytest-xdist; python_version >= "3.9"',
        TOOL_PINS["ruff"],  # the lint command names it; only dev and lint declare it
    ]
    assert chosen.added_tools == [TOOL_PINS["ruff"]]
    # Where no group says test, those that say dev: dev's include of tests resolved.
    text = PYPROJECT.replace('test = ["pytest"]', 'check = ["pytest"]').replace("tests =", "unit =")
    (checkout / "pyproject.toml").write_text(text.replace('"tests"}', '"unit"}'))
    dev = select(checkout, COMMANDS, EnvironmentOptions())
    assert dev.groups == ["dev"] and dev.added_tools == []
    assert dev.requirements[2:] == ["pytest", 'pytest-xdist; python_version >= "3.9"', "ruff"]
    (checkout / "pyproject.toml").write_text(PYPROJECT)
    # A tool a command names that only a group not chosen declares comes at Arena's pin.
    mypy = select(checkout, (*COMMANDS, "mypy src"), EnvironmentOptions())
    assert mypy.added_tools == [TOOL_PINS["ruff"], TOOL_PINS["mypy"]]


def test_named_groups_and_extras_and_the_projects_own_extras(checkout: Path) -> None:
    docs = select(checkout, (), EnvironmentOptions(groups=["docs"]))
    # The extra, the group and requirements-docs.txt of the same name are one group.
    assert docs.requirements == ["packaging>=20", "attrs", "sphinx", "furo", "sphinx-autobuild"]
    # `all = ["shop[test,docs]"]` names the project's own extras: expanded, never fetched.
    every = select(checkout, (), EnvironmentOptions(groups=["all", "Lint"]))
    assert every.groups == ["all", "lint"]
    assert "shop" not in " ".join(every.requirements)
    assert every.requirements == [
        "packaging>=20",
        "attrs",
        "sphinx",
        "furo",
        "sphinx-autobuild",
        "pytest",
        "ruff",
        "mypy",
    ]


def test_pip_compiles_requirements_folder_is_groups_by_file(tmp_path: Path) -> None:
    """pallets/itsdangerous 2.2.0 (its release's layout) declares its groups as pip-compile
    files in requirements/: tests.txt is freezegun and pytest with what they need, dev.txt
    everything (sphinx, tox, pre-commit, mypy, pyright). Before: the folder was not read, so
    the race had no freezegun and its tests failed to import."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "itsdangerous"\nversion = "2.2.0"\n'
    )
    folder = tmp_path / "requirements"
    folder.mkdir()
    (folder / "tests.in").write_text("pytest\nfreezegun\n")
    (folder / "tests.txt").write_text(
        "#\n#    pip-compile tests.in\n#\nfreezegun==1.4.0\n    # via -r tests.in\n"
        "pytest==8.1.1\n    # via -r tests.in\nsix==1.16.0\n    # via python-dateutil\n"
    )
    (folder / "dev.txt").write_text("sphinx==7.2.6\ntox==4.14.2\nmypy==1.9.0\n")
    (folder / "docs.txt").write_text("sphinx==7.2.6\n")
    chosen = select(tmp_path, COMMANDS, EnvironmentOptions())
    assert chosen.groups == ["tests"]
    assert chosen.requirements == [
        "freezegun==1.4.0",
        "pytest==8.1.1",
        "six==1.16.0",
        TOOL_PINS["ruff"],
    ]
    docs = select(tmp_path, (), EnvironmentOptions(groups=["docs", "dev"]))
    assert docs.requirements == ["sphinx==7.2.6", "tox==4.14.2", "mypy==1.9.0"]


def test_a_group_the_commit_does_not_declare_is_refused_naming_the_field(checkout: Path) -> None:
    with pytest.raises(UnknownGroup) as refused_group:
        select(checkout, (), EnvironmentOptions(groups=["tests", "tset"]))
    assert str(refused_group.value) == (
        "environment.groups[1]: 'tset' is not a dependency group, extra or "
        "requirements file of this commit (it declares: all, dev, docs, lint, test, "
        "tests, typing)"
    )


def test_pin_tools_pins_the_declared_tools_that_give_no_version(checkout: Path) -> None:
    text = PYPROJECT.replace('lint = ["ruff", "mypy"]', 'lint = ["ruff>=0.5", "mypy"]')
    (checkout / "pyproject.toml").write_text(text)
    floating = select(checkout, COMMANDS, EnvironmentOptions(groups=["tests", "lint"]))
    assert "pytest" in floating.requirements and floating.pinned_tools == []
    pinned = select(
        checkout, COMMANDS, EnvironmentOptions(groups=["tests", "lint"], pin_tools=True)
    )
    # pytest and mypy gave no version: Arena's pins; ruff>=0.5 is the commit's own choice.
    assert pinned.pinned_tools == [TOOL_PINS["pytest"], TOOL_PINS["mypy"]]
    assert pinned.requirements == [
        "packaging>=20",
        "attrs",
        TOOL_PINS["pytest"],
        'pytest-xdist; python_version >= "3.9"',
        "ruff>=0.5",
        TOOL_PINS["mypy"],
    ]


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        (
            {"groups": ["tests", "no such"]},
            "scoring.environment.groups[1]: String should match pattern",
        ),
        ("node", "scoring.environment: 'node' is not an environment kind (python)"),
        (
            {"groups": ["tset"]},
            "scoring.environment.groups[0]: 'tset' is not a dependency group, extra or "
            "requirements file of this commit (it declares: docs, tests)",
        ),
        ({"pin_tools": True, "grups": ["tests"]}, "scoring.environment.grups: unknown field"),
    ],
)
def test_bad_environment_groups_are_one_line_naming_the_field(
    place: Path, environment: dict[str, Any] | str, expected: str
) -> None:
    """Before: `environment` took only the word "python"; a misspelt group is now refused at
    submission against the base's own declarations, nothing stored (the fixture checks)."""
    repo = place / "project" / "repo"
    commit(repo, {"pyproject.toml": '[dependency-groups]\ntests = ["pytest"]\ndocs = []\n'}, "g")
    spec = {
        "workload": "race",
        "task": "t",
        "repo": "../repo",
        "agents": [{"name": "a", "branch": "feat"}],
        "scoring": {"test_command": "true", "environment": environment},
    }
    path = place / "project" / "specs" / "race.yaml"
    path.write_text(yaml.safe_dump(spec))
    line = refused("race", "run", str(path))
    assert line.startswith(expected), line


def test_the_group_flags_choose_the_environment_too(place: Path) -> None:
    """`arena race run --group NAME --pin-tools` over the flags' scoring block: checked as the
    spec's table is, against the base's declarations."""
    repo = place / "project" / "repo"
    files = {"pyproject.toml": '[dependency-groups]\ntests = ["pytest"]\n'}
    commit(repo, {**files, "requirements/lint.txt": "ruff\n"}, "groups")
    flags = ["race", "run", "--repo", str(repo), "--task", "t", "--agent", "a=feat"]
    flags += ["--test-command", "true"]
    line = refused(*flags, "--group", "tests", "--group", "tset")
    assert line == (
        "scoring.environment.groups[1]: 'tset' is not a dependency group, extra or "
        "requirements file of this commit (it declares: lint, tests)"
    )
    assert refused(*flags, "--group", "no such").startswith("--group: String should match")
    accepted(*flags, "--group", "tests", "--group", "lint", "--pin-tools")


@pytest.mark.integration
def test_the_api_refuses_a_group_the_base_does_not_declare_with_422(
    tmp_path: Path, client: TestClient, db: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_feature_repo(tmp_path / "roots" / "repo", None)
    git(repo, "checkout", "-q", "main")
    commit(repo, {"pyproject.toml": '[dependency-groups]\ntests = ["pytest"]\n'}, "groups")
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(tmp_path / "roots"))
    before = {k: db.r.dump(k) for k in db.r.keys("*")}
    spec = {
        "workload": "race",
        "task": "t",
        "repo": str(repo),
        "agents": [{"name": "a", "branch": "feat"}],
        "scoring": {"test_command": "true", "environment": {"groups": ["test"]}},
    }
    response = client.post("/batches", json=spec, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == (
        "scoring.environment.groups[0]: 'test' is not a dependency group, extra or "
        "requirements file of this commit (it declares: tests)"
    )
    assert {k: db.r.dump(k) for k in db.r.keys("*")} == before
    spec["scoring"]["environment"] = {"groups": ["tests"], "pin_tools": True}
    assert client.post("/batches", json=spec, headers=AUTH).is_success


def test_the_environment_holds_what_was_chosen_and_says_which_versions(tmp_path: Path) -> None:
    require_bwrap()
    if not (RACE_WHEELS / ".complete").is_file():
        unavailable(f"no wheels in {RACE_WHEELS}: run scripts/install-test-tools")
    repo = tmp_path / "shop"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    pyproject = '[project]\nname = "shop"\nversion = "0.1"\ndependencies = []\n\n'
    pyproject += '[dependency-groups]\ntests = ["pytest"]\ndocs = ["sphinx"]\nlint = ["mypy"]\n'
    test = "import shop\n\n\ndef test_shop():\n    assert shop.VALUE == 1\n"
    files = {"pyproject.toml": pyproject, "shop.py": "VALUE = 1\n", "tests/test_shop.py": test}
    commit(repo, files, "shop")
    commands = CheckCommands(
        build=COMMANDS[0], tests="python -m pytest -q -p no:cacheprovider", lint=None, timeout_s=60
    )
    results, lines = [], []
    for agent in ("@baseline", "a"):
        made = run_check(
            str(repo),
            "main",
            "main",
            commands,
            LocalSandbox(),
            role="baseline" if agent == "@baseline" else "agent",
            workdir_root=tmp_path,
            echo=lines.append,
            environment=PythonEnvironment(cache_root=tmp_path / "envs"),
        ).model_dump(mode="json")
        results.append(
            UnitResult(unit_id=agent, agent=agent, item="race", episode=0, status="ok", result=made)
        )
    first, again = (r.result["environment"] for r in results)
    assert results[0].result["tests"]["counts"]["passed"] == 1
    # Only the runtime and the tests group: sphinx and mypy (not in the wheel folder) were not
    # asked for, else the build had failed.
    assert first["groups"] == ["tests"] and first["requirements"] == ["pytest"]
    pytest_version = TOOL_PINS["pytest"].split("==")[1]
    assert first["tools"] == {"pytest": pytest_version}
    assert first["installed"]["pytest"] == pytest_version
    assert set(first["installed"]) == {"iniconfig", "packaging", "pluggy", "pygments", "pytest"}
    assert first["size_bytes"] > 0 and not first["reused"]
    assert again["reused"] and again["installed"] == first["installed"]
    built = next(line for line in lines if "built in" in line)
    assert f"tools: pytest {pytest_version})" in built and "distributions" in built
    assert any(line.startswith("== installed: iniconfig ") for line in "\n".join(lines).split("\n"))
    # The race's summary (`--json`) and its text layout carry them, once per environment.
    summary = {"environments": environments_of(results)}
    assert next(iter(summary["environments"].values()))["used_by"] == ["@baseline", "a"]
    text = "\n".join(format_environments(summary))
    assert f"  tools: pytest {pytest_version}" in text
    assert f"pytest {pytest_version}" in text.split("installed: ")[1]
