"""Everything a race names is checked at submission (issue 22, item 3), and the flag form of
`arena race run` gives the whole scoring block (item 5).

Real git repositories in temporary folders; the CLI runs in-process (arena.cli.main.main) with
Redis pointing where nothing listens, so a spec that passes validation ends "cannot reach Redis"
(exit 3, no wait) and one refused before it ends with its own line: nothing stored, nothing started
(the data folder stays unborn). The API's refusal is checked on a real Redis, byte for byte.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from arena.service import races
from arena.service.race_input import ScoringFlags
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import Unit, UnitResult
from tasks.workloads.race_view import format_results
from tests.api.conftest import AUTH, api_settings, client
from tests.cli.test_malformed_input import arena
from tests.integration.conftest import db, redis_url
from tests.race.projects import git, make_feature_repo

__all__ = ["api_settings", "client", "db", "redis_url"]  # fixtures
NO_REDIS = "redis://127.0.0.1:1/0"
UNREACHABLE = "cannot reach Redis"


HYDRA = (
    '[scoring]\ntest_command = "pytest"\nlint_command = "ruff check ."\n'
    "timeout_per_check_seconds = 30\n[scoring.weights]\nbuild = 40\nspeed = 5\n"
)


def make_repo(path: Path, *, hydra: bool = False) -> Path:
    """main and a branch `feat` one commit ahead; hydra.toml on main only if asked."""
    return make_feature_repo(path, HYDRA if hydra else None)


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """tmp/project/repo (no hydra.toml), tmp/project/specs, and the current directory
    tmp/elsewhere/deeper; no roots set (the operator's CLI names any local repository)."""
    for name in [n for n in os.environ if n.startswith("ARENA_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ARENA_REDIS_URL", NO_REDIS)
    monkeypatch.setenv("ARENA_REDIS_RETRY_S", "0")  # valid: exit 3 at once, no wait
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "data"))
    make_repo(tmp_path / "project" / "repo")
    (tmp_path / "project" / "specs").mkdir()
    cwd = tmp_path / "elsewhere" / "deeper"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    yield tmp_path
    assert not (tmp_path / "data").exists(), "a refused race started or stored something"


def race(repo: str, *agents: tuple[str, str], **extra: Any) -> dict[str, Any]:
    spec = {
        "workload": "race",
        "task": "t",
        "repo": repo,
        "scoring": {"test_command": "true"},
        "agents": [{"name": n, "branch": b} for n, b in agents],
    }
    return {**spec, **extra}


def spec_file(place: Path, spec: dict[str, Any]) -> str:
    path = place / "project" / "specs" / "race.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def accepted(*argv: str) -> None:
    """Valid: it got as far as connecting to Redis (exit 3: the cluster unreachable)."""
    code, out, err = arena(*argv)
    assert code == 3 and UNREACHABLE in err, (code, out, err)


def refused(*argv: str) -> str:
    """Exit 2, one line `arena: error: ...`, before anything connects."""
    code, out, err = arena(*argv)
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("arena: error: "), (code, err)
    assert UNREACHABLE not in lines[0], "got as far as connecting"
    return lines[0].removeprefix("arena: error: ")


# -- item 3: the repository, base and branches checked at submission ---------------------------


def test_a_relative_repo_in_a_spec_file_is_relative_to_the_file(place: Path) -> None:
    """`repo: ../repo` beside the spec names tmp/project/repo whatever the current directory
    (before: resolved against the current directory, where nothing is)."""
    path = spec_file(place, race("../repo", ("a", "feat")))
    accepted("race", "run", path)
    accepted("race", "run", os.path.relpath(path))  # the file named relatively, too
    accepted("run", path)  # `arena run` reads a race spec file the same way


def test_repo_on_the_command_line_stays_relative_to_the_current_directory(place: Path) -> None:
    args = ["--task", "t", "--agent", "a=feat", "--test-command", "true"]
    accepted("race", "run", "--repo", "../../project/repo", *args)
    line = refused("race", "run", "--repo", "../repo", *args)
    assert line == "repo: '../repo' is not a git repository"
    # --repo overrides the spec file's repo, relative to here, not to the file.
    path = spec_file(place, race("nowhere", ("a", "feat")))
    accepted("race", "run", path, "--repo", "../../project/repo")


@pytest.mark.parametrize(
    ("agents", "base", "expected"),
    [
        (
            [("a", "feat"), ("z", "agent-zz")],
            "main",
            "agents[1].branch: 'agent-zz' is not a branch, tag or commit of the repository",
        ),
        ([("a", "feat")], "mian", "base: 'mian' is not a branch, tag or commit of the repository"),
    ],
)
def test_a_missing_branch_or_base_is_one_line_and_nothing_runs(
    place: Path, agents: list[tuple[str, str]], base: str, expected: str
) -> None:
    """Before: the misspelt branch became an error unit after the race (and the other agent
    was still auto-merged); a misspelt base ran five failing checks."""
    assert refused("race", "run", spec_file(place, race("../repo", *agents, base=base))) == expected
    flags = [f"--agent={n}={b}" for n, b in agents]
    repo = str(place / "project" / "repo")
    line = refused("race", "run", "--repo", repo, "--task", "t", "--base", base, *flags)
    assert line == expected or base == "main", line  # no hydra.toml: the missing base is said
    flags += ["--test-command", "true"]
    line = refused("race", "run", "--repo", repo, "--task", "t", "--base", base, *flags)
    assert line == expected


def test_a_missing_repository_is_one_line(place: Path) -> None:
    line = refused("race", "run", spec_file(place, race("../gone", ("a", "feat"))))
    assert line.startswith("repo: ") and "gone" in line


@pytest.mark.integration
def test_the_api_refuses_a_missing_branch_with_422_and_stores_nothing(
    tmp_path: Path, client: TestClient, db: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "roots" / "repo")
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(tmp_path / "roots"))
    before = {k: db.r.dump(k) for k in db.r.keys("*")}
    spec = race(str(repo), ("a", "feat"), ("z", "agent-zz"))
    response = client.post("/batches", json=spec, headers=AUTH)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail == "agents[1].branch: 'agent-zz' is not a branch, tag or commit of the repository"
    assert {k: db.r.dump(k) for k in db.r.keys("*")} == before
    spec = race(str(repo), ("a", "feat"), base="nope")
    response = client.post("/batches", json=spec, headers=AUTH)
    assert response.status_code == 422 and response.json()["detail"].startswith("base: 'nope'")
    assert client.post("/batches", json=race(str(repo), ("a", "feat")), headers=AUTH).is_success


def test_every_ref_is_fingerprinted_by_its_commit(place: Path) -> None:
    repo = place / "project" / "repo"
    batch = validate_batch(race(str(repo), ("a", "feat")), asker="operator")
    commits = {k: fp.digest for k, fp in batch.identity.agents.items()}
    assert commits == {
        "@baseline": git(repo, "rev-parse", "main").strip(),
        "a": git(repo, "rev-parse", "feat").strip(),
    }
    assert {fp.kind for fp in batch.identity.agents.values()} == {"commit"}


# -- item 5: the flag form complete -----------------------------------------------------------


def flag_race(place: Path, *extra: str, spec: str | None = None) -> dict[str, Any]:
    """The spec `arena race run` would validate, from --repo/--task/--agent and the flags."""
    repo = None if spec else str(place / "project" / "repo")
    agents = [] if spec else ["a=feat", "b=feat"]
    options: dict[str, Any] = {"weights": [], "durations": []}
    for option in extra:
        key, _, value = option.removeprefix("--").partition("=")
        if key in ("weight", "duration"):
            options[f"{key}s"].append(value)
        else:
            options[key.replace("-", "_")] = float(value) if key == "timeout" else value
    flags = ScoringFlags(
        **{
            **options,
            "weights": tuple(options["weights"]),
            "durations": tuple(options["durations"]),
        }
    )
    return races.race_spec(spec, repo, None if spec else "t", None, agents, flags)


def test_the_flags_give_the_scoring_block_without_hydra_toml(place: Path) -> None:
    data = flag_race(
        place,
        "--build-command=python -c 1",
        "--test-command=python -m pytest -q",
        "--lint-command=ruff check .",
        "--timeout=45",
        "--weight=speed=20",
        "--weight=diff_size=0",
        "--duration=a=30",
        "--duration=b=60.5",
        "--setup-command=pip install --no-deps -e .",
    )
    batch = validate_batch(data, asker="operator")
    params = batch.params
    assert params.setup_command == "pip install --no-deps -e ."
    assert (params.build_command, params.test_command, params.lint_command) == (
        "python -c 1",
        "python -m pytest -q",
        "ruff check .",
    )
    assert params.timeout_per_check_seconds == 45
    assert params.weights.model_dump() == dict(build=30, tests=30, lint=15, diff_size=0, speed=20)
    assert [a.duration() for a in batch.agents] == [30, 60.5]
    # And through the command line itself.
    given = {"--test-command": "true", "--timeout": "10", "--weight": "tests=50"}
    flags = [part for option, value in given.items() for part in (option, value)]
    accepted(
        "race",
        "run",
        "--repo",
        "../../project/repo",
        "--task",
        "t",
        "--agent",
        "a=feat",
        *flags,
        "--duration",
        "a=5",
    )


def test_the_flags_override_hydra_toml_and_a_spec_files_scoring(place: Path) -> None:
    make_repo(place / "hydra" / "repo", hydra=True)
    merged = races.race_spec(
        None,
        str(place / "hydra" / "repo"),
        "t",
        None,
        ["a=feat"],
        ScoringFlags(test_command="true", weights=("speed=0",)),
    )
    params = validate_batch(merged, asker="operator").params
    assert params.test_command == "true"  # the flag
    assert params.lint_command == "ruff check ." and params.timeout_per_check_seconds == 30
    assert (params.weights.build, params.weights.speed, params.weights.tests) == (40, 0, 30)
    # A spec file's block and its agents' times, overridden the same way.
    spec = race("../repo", ("a", "feat"), ("b", "feat"))
    spec["scoring"] = {"test_command": "false", "timeout_per_check_seconds": 60}
    spec["agents"][0] |= {
        "started_at": "2026-01-01T00:00:00Z",
        "completed_at": "2026-01-01T00:01:00Z",
    }
    spec["agents"][1]["duration_s"] = 7
    data = flag_race(place, "--timeout=5", "--duration=a=12", spec=spec_file(place, spec))
    batch = validate_batch(data, asker="operator")
    assert (batch.params.test_command, batch.params.timeout_per_check_seconds) == ("false", 5)
    assert [a.duration() for a in batch.agents] == [12, 7]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--timeout", "0"], "--timeout: "),
        (["--timeout", "nan"], "--timeout: "),
        (["--timeout", "99999"], "--timeout: "),
        (["--timeout", "soon"], "'--timeout'"),
        (["--test-command", ""], "--test-command: "),
        (["--build-command", "x" * 5000], "--build-command: "),
        (["--weight", "speed"], "--weight: 'speed' is not DIM=WEIGHT"),
        (["--weight", "speed=fast"], "--weight: 'speed=fast' is not DIM=WEIGHT"),
        (["--weight", "speed=inf"], "--weight: 'speed=inf' is not DIM=WEIGHT"),
        (["--weight", "style=5"], "--weight: 'style' is not a dimension"),
        (["--weight", "speed=-1"], "--weight: "),
        (["--weight", "speed=1", "--weight", "speed=2"], "--weight: 'speed' is given twice"),
        (
            [f"--weight={d}=0" for d in ("build", "tests", "lint", "diff_size", "speed")],
            "--weight: at least one weight must be positive",
        ),
        (["--duration", "a"], "--duration: 'a' is not NAME=SECONDS"),
        (["--duration", "a=-3", "--duration", "b=1"], "--duration: a: "),
        (["--duration", "zed=3"], "--duration: no agent 'zed' (agents: a, b)"),
        (["--duration", "a=3"], "--duration: give one for every agent"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it(place: Path, flags: list[str], expected: str) -> None:
    base = ["race", "run", "--repo", "../../project/repo", "--task", "t"]
    agents = ["--agent", "a=feat", "--agent", "b=feat"]
    line = refused(*base, *agents, "--test-command", "true", *flags)
    assert expected in line and line.count(":") >= 1, line


# -- a race in which some check could not run is never auto-merged ----------------------------


def test_a_race_with_an_error_unit_is_reviewed_not_auto_merged(place: Path) -> None:
    """The branch was there at submission, but its check could not run (here: an error result,
    as a vanished commit or a missing tool gives): the other agent is ranked with the scores it
    earns, and the verdict is review, saying why (before: auto-merge)."""
    repo = place / "project" / "repo"
    batch = validate_batch(race(str(repo), ("a", "feat"), ("z", "feat")), asker="operator")
    units = get_workload("race").expand(batch)
    tests = {"exit_code": 0, "timed_out": False, "counts": {"passed": 6}, "runner": "pytest"}
    ok = {"commit": "0" * 40, "build": None, "tests": tests, "lint": None}
    diff = {"lines_added": 1, "lines_removed": 0, "files_changed": 1}

    def result(unit: Unit, **given: Any) -> UnitResult:
        return UnitResult(unit_id=unit.id, agent=unit.agent, item="race", episode=0, **given)

    results = [
        result(units[0], status="ok", result={**ok, "diff": diff}),
        result(units[1], status="ok", result={**ok, "diff": diff}),
        result(units[2], status="error", reason="commit 0123456789ab is not in the repository"),
    ]
    reduced = get_workload("race").reduce(batch, results).summary
    assert [a["composite"] for a in reduced["agents"]] == [100.0]
    assert (reduced["winner"], reduced["verdict"]) == ("a", "review")
    assert reduced["review_reason"] == "z could not be checked"
    assert "Verdict: review (z could not be checked)" in format_results(reduced, "b1")
    without = get_workload("race").reduce(batch, results[:2]).summary
    assert (without["verdict"], without["review_reason"]) == ("auto-merge", None)
