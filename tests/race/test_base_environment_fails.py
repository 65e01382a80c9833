"""A race whose base's environment cannot be built fails at the start, once, with the reason
(docs/race.md, "Errors"): verdict `failed`, nobody ranked or put on a board, `arena race run` and
`arena race results` exit 1 with one line, and the agents do not each build it again.

The base declares a requirement no wheel exists for (pip installs from the folder of test wheels
with no index, tests/conftest.py: it fails fast and offline). Agent `same` changed only code: it
has the base's environment, and its check says so. Agent `fixed` dropped the requirement: its
own environment builds and its check runs, but there is no baseline to score it against. Real
git, the real bubblewrap jail and pip, the embedded cluster (Redis and Celery workers)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from arena.service.races import failed_line
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import UnitResult
from tasks.workloads.race_view import format_results
from tests.integration.conftest import ROOT, arena
from tests.needs import require_bwrap
from tests.race.projects import commit, git

MISSING = "nosuch-pkg-arena"
PIP_SAYS = f"No matching distribution found for {MISSING}"
BASE_FAILED = "the base's environment could not be built: "
PYPROJECT = '[project]\nname = "calc"\nversion = "0.1"\ndependencies = [{}]\n'
CODE = "def add(a, b):\n    return a + b\n"
SCORING = {
    "build_command": 'python -c "import calc"',
    "test_command": 'python -c "import calc; assert calc.add(1, 2) == 3"',
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main declares the missing requirement; `same` changes code only, `fixed` drops it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(
        repo, {"pyproject.toml": PYPROJECT.format(f'"{MISSING}"'), "calc/__init__.py": CODE}, "c"
    )
    for branch, files in (
        ("same", {"calc/__init__.py": CODE + "\n\ndef sub(a, b):\n    return a - b\n"}),
        ("fixed", {"pyproject.toml": PYPROJECT.format(""), "calc/__init__.py": CODE + "# ok\n"}),
    ):
        git(repo, "checkout", "-q", "-b", branch, "main")
        commit(repo, files, branch)
    git(repo, "checkout", "-q", "main")
    return repo


def spec(repo: Path) -> dict[str, Any]:
    return {
        "workload": "race",
        "task": "add sub",
        "repo": str(repo),
        "scoring": SCORING,
        "agents": [{"name": "same", "branch": "same"}, {"name": "fixed", "branch": "fixed"}],
    }


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.integration
def test_a_race_whose_base_environment_cannot_be_built_fails_once(
    repo: Path, tmp_path: Path
) -> None:
    require_bwrap()
    (tmp_path / "race.yaml").write_text(yaml.safe_dump(spec(repo)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env |= {
        "ARENA_DATA_DIR": str(tmp_path / "data"),
        "ARENA_WORK_DIR": str(tmp_path / "work"),  # the environments: none from another test
        "ARENA_WORKERS": "2",
        "PYTHONPATH": str(ROOT),
    }
    (tmp_path / "work").mkdir()
    report = tmp_path / "report.json"
    started = time.monotonic()
    ran = arena(
        "race", "run", str(tmp_path / "race.yaml"), "--json", "--output-path", str(report), env=env
    )
    took = time.monotonic() - started
    assert ran.returncode == 1, ran.stderr
    summary = json.loads(ran.stdout)
    batch_id = summary["batch_id"]
    reason = summary["failed_reason"]
    assert summary["verdict"] == "failed" and reason.startswith(BASE_FAILED), summary
    assert reason.count(PIP_SAYS) == 1 and "this environment's build failed" not in reason
    assert (summary["agents"], summary["winner"], summary["measured"]) == ([], None, [])
    # `same` only repeated the base's failure, `fixed` ran: neither is an error of its own.
    assert set(summary["errors"]) == {"@baseline"}
    (line,) = lines(ran.stderr)
    assert line == f"arena: race {batch_id} failed: {reason}"

    units = {u["agent"]: u for u in json.loads(report.read_text())["units"]}
    assert units["same"]["reason"].startswith(f"CheckError: environment: {BASE_FAILED}")
    assert units["fixed"]["status"] == "ok"
    # The base's declarations were built once (by the baseline or `same`, whichever came first),
    # `fixed`'s own once: nobody built the base's again.
    logs = arena("race", "logs", batch_id, env=env).stdout
    assert logs.count(": building (") == 2, logs
    assert took < 120, f"{took:.1f}s"  # about 6 s here, the embedded cluster's start included

    shown = arena("race", "results", batch_id, env=env)
    assert shown.returncode == 1 and lines(shown.stderr) == [line], shown.stderr
    assert "Verdict: failed" in shown.stdout and MISSING not in shown.stdout, shown.stdout
    assert "Not scored" not in shown.stdout and "Winner" not in shown.stdout

    boards = arena("leaderboard", env=env)
    assert boards.returncode == 0 and not boards.stdout.strip(), boards.stdout
    assert arena("race", "merge", batch_id, env=env).returncode == 1  # nothing to merge


def test_the_reducer_fails_the_race_on_the_base_environment(repo: Path) -> None:
    """Hand-made results, as the race above gives them, plus an agent whose check failed for a
    reason of its own: that one stays listed; nothing is scored, no board entry."""
    agents = [*spec(repo)["agents"], {"name": "gone", "branch": "same"}]
    batch = validate_batch({**spec(repo), "agents": agents}, asker="operator")
    units = {u.agent: u for u in get_workload("race").expand(batch)}

    def result(agent: str, **fields: Any) -> UnitResult:
        return UnitResult(unit_id=units[agent].id, agent=agent, item="race", episode=0, **fields)

    pip = f"installing the requirements failed: ERROR: {PIP_SAYS}"
    ran = {"exit_code": 0, "timed_out": False}
    ok = {
        "commit": "0" * 40,
        "build": ran,
        "tests": {**ran, "counts": None, "runner": "exit-code"},
        "lint": None,
        "diff": {"lines_added": 1, "lines_removed": 0, "files_changed": 1},
    }
    results = [
        result(
            "@baseline",
            status="error",
            reason=f"CheckError: environment: {pip} (this environment's build failed)",
        ),
        result("same", status="error", reason=f"CheckError: environment: {BASE_FAILED}{pip}"),
        result("fixed", status="ok", result=ok),
        result("gone", status="error", reason="commit 0123456789ab is not in the repository"),
    ]
    reduced = get_workload("race").reduce(batch, results)
    summary = reduced.summary
    assert reduced.entries == []
    assert summary["verdict"] == "failed" and summary["failed_reason"] == BASE_FAILED + pip
    assert summary["agents"] == [] and summary["winner"] is None
    assert set(summary["errors"]) == {"@baseline", "gone"}
    assert failed_line("b1", summary) == f"race b1 failed: {BASE_FAILED}{pip}"
    text = format_results(summary, "b1")
    assert "Verdict: failed" in text and "gone: commit" in text and MISSING not in text

    # A baseline whose check could not run for another reason: scored as before, not failed.
    results[0] = result("@baseline", status="error", reason="commit 0123456789ab is gone")
    summary = get_workload("race").reduce(batch, results).summary
    assert (summary["verdict"], summary["failed_reason"], summary["winner"]) == (
        "review",
        None,
        "fixed",
    )
    assert failed_line("b1", summary) is None
