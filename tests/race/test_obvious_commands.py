"""Issue 22's first "Done when": a repository whose package shares its name with one in Arena's own
environment (markupsafe), raced with the commands a user writes first (`python -c "import
markupsafe"`, `python -m pytest -q`, `ruff check .` under a `fix = true` config) and nothing else,
gives every dimension the facts the real tools give when run by hand in a clean environment: the
syntax error fails the build, the broken test counts, the committed lint finding counts.

The race runs as users run it (validate_batch, the workload's units, its reducer) with the
default environment; the facts come from a virtual environment made here with `venv` and pip,
pytest and ruff installed at the versions Arena pins, the commands run in a plain checkout."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.execute import execute_batch
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.race_view import format_results
from tests.conftest import RACE_WHEELS
from tests.needs import require_bwrap, unavailable
from tests.race.projects import commit, git
from workers.race.environment import TOOL_PINS, base_python

BUILD = 'python -c "import markupsafe"'
TESTS = "python -m pytest -q"
LINT = "ruff check ."
PYPROJECT = """\
[project]
name = "markupsafe"
version = "0.1"
requires-python = ">=3.9"

[tool.ruff]
fix = true
"""
PACKAGE = 'def escape(text):\n    return text.replace("<", "&lt;")\n'
ESCAPE_ATTR = 'def escape_attr(text):\n    return escape(text).replace(\'"\', "&quot;")\n'
TESTS_FILE = (
    "from markupsafe import escape\n\n\n"
    "def test_escape():\n    assert escape('<a>') == '&lt;a>'\n\n\n"
    "def test_soft_str():\n    assert escape('plain') == 'plain'\n"
)
TEST_ATTR = (
    "from markupsafe import escape_attr\n\n\n"
    "def test_escape_attr():\n    assert escape_attr('\"<') == '&quot;&lt;'\n"
)
BRANCHES: dict[str, dict[str, str]] = {
    # A: escape_attr and its test.
    "a-clean": {
        "src/markupsafe/__init__.py": PACKAGE + "\n\n" + ESCAPE_ATTR,
        "tests/test_attr.py": TEST_ATTR,
    },
    # B: escape_attr, but escape now also escapes a letter: test_soft_str breaks.
    "b-breaks-test": {
        "src/markupsafe/__init__.py": PACKAGE.replace('"&lt;")', '"&lt;").replace("p", "&#112;")')
        + "\n\n"
        + ESCAPE_ATTR,
    },
    # C: a syntax error in the package (Arena's own markupsafe would import fine).
    "c-syntax-error": {"src/markupsafe/__init__.py": PACKAGE + "\n\ndef escape_attr(text)\n"},
    # D: correct, with an unused import committed (ruff's fix = true would remove it).
    "d-unused-import": {
        "src/markupsafe/__init__.py": "import os\n\n\n" + PACKAGE + "\n\n" + ESCAPE_ATTR,
        "tests/test_attr.py": TEST_ATTR,
    },
}


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    base = {
        "pyproject.toml": PYPROJECT,
        "src/markupsafe/__init__.py": PACKAGE,
        "tests/test_escape.py": TESTS_FILE,
    }
    commit(path, base, "markupsafe")
    for branch, files in BRANCHES.items():
        git(path, "checkout", "-q", "-b", branch, "main")
        commit(path, files, branch)
    git(path, "checkout", "-q", "main")
    return path


def clean_environment(folder: Path) -> Path:
    """A virtual environment made as a user would by hand: venv with pip, then pytest and ruff
    at Arena's pins (from the test wheels: no index)."""
    subprocess.run([base_python(), "-m", "venv", str(folder)], check=True, timeout=120)
    pins = [TOOL_PINS["pytest"], TOOL_PINS["ruff"]]
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index"]
    subprocess.run([*pip, "--find-links", str(RACE_WHEELS), *pins], check=True, timeout=300)
    return folder


def by_hand(repo: Path, branch: str, venv: Path, tmp_path: Path) -> dict[str, object]:
    """The facts of `branch`, the commands run in a plain checkout with the clean environment
    first on PATH (and the src/ layout on PYTHONPATH, as one runs it uncommitted)."""
    checkout = tmp_path / f"by-hand-{branch}"
    git(tmp_path, "clone", "-q", "--branch", branch, str(repo), str(checkout))
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env |= {"PATH": f"{venv / 'bin'}:{env['PATH']}", "PYTHONPATH": str(checkout / "src")}

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, shell=True, cwd=checkout, env=env, capture_output=True, text=True, timeout=120
        )

    facts: dict[str, object] = {"build": run(BUILD).returncode}
    if facts["build"] != 0:
        return facts
    tests = run(TESTS + " -p no:cacheprovider").stdout
    facts["passed"] = int(m.group(1)) if (m := re.search(r"(\d+) passed", tests)) else 0
    facts["failed"] = int(m.group(1)) if (m := re.search(r"(\d+) failed", tests)) else 0
    # What was committed: ruff told not to fix, each finding as JSON.
    findings = run("ruff check --no-fix --no-cache --output-format=json .").stdout
    facts["findings"] = len(json.loads(findings))
    return facts


def test_the_obvious_commands_give_the_real_tools_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    if not (RACE_WHEELS / ".complete").is_file():
        unavailable(f"no wheels in {RACE_WHEELS}: run scripts/install-test-tools")
    assert importlib.util.find_spec("markupsafe") is not None  # Arena's own has one
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(tmp_path))
    # An empty environment cache, in a work dir not made yet (the check makes it).
    monkeypatch.setenv("ARENA_WORK_DIR", str(tmp_path / "work"))
    repo = make_repo(tmp_path / "markupsafe")
    spec = {
        "workload": "race",
        "task": "add markupsafe.escape_attr",
        "repo": str(repo),
        "agents": [{"name": b[0].upper(), "branch": b, "duration_s": 60.0} for b in BRANCHES],
        "scoring": {"build_command": BUILD, "test_command": TESTS, "lint_command": LINT},
    }
    batch = validate_batch(spec)
    results = execute_batch(batch)
    assert [r.status for r in results] == ["ok"] * 5, [r.reason for r in results]
    summary = get_workload("race").reduce(batch, results).summary
    got = {a["name"]: a for a in summary["agents"]}
    assert sys.prefix not in json.dumps(summary)  # nothing ran from Arena's environment

    venv = clean_environment(tmp_path / "clean-venv")
    base = by_hand(repo, "main", venv, tmp_path)
    assert summary["baseline"]["tests"]["counts"]["passed"] == base["passed"] == 2
    for branch in BRANCHES:
        facts, row = by_hand(repo, branch, venv, tmp_path), got[branch[0].upper()]
        measures = row["measures"]
        assert measures["build"]["exit_code"] == facts["build"], branch
        if facts["build"] != 0:
            assert row["scores"]["build"] == 0 and measures["tests"] is None, branch
            continue
        counts = measures["tests"]["counts"]
        assert (counts["passed"], counts["failed"]) == (facts["passed"], facts["failed"]), branch
        lint = measures["lint"]["counts"]
        assert lint["errors"] + lint["warnings"] == facts["findings"], branch

    # What the issue saw go wrong, now right: the syntax error fails the build, the broken test
    # counts, the committed unused import counts; the clean branch wins.
    assert got["C"]["scores"]["build"] == 0
    assert got["B"]["measures"]["tests"]["counts"]["failed"] == 1
    assert got["B"]["scores"]["tests"] < 100
    assert got["D"]["measures"]["lint"]["counts"]["errors"] >= 1
    assert got["D"]["scores"]["lint"] < got["A"]["scores"]["lint"] == 100
    assert got["A"]["scores"]["tests"] == 100
    assert summary["winner"] == "A"

    # The environment is made once, by the first check (the baseline's), and every other check
    # of the same declarations reuses it; a second race of the same base builds nothing.
    first = [r.result["environment"] for r in results]
    assert [e["reused"] for e in first] == [False, True, True, True, True]
    assert len({e["key"] for e in first}) == 1
    assert first[0]["added_tools"] == [TOOL_PINS["pytest"], TOOL_PINS["ruff"]]
    # Versions on record (issue 36): the summary (`--json`) and the layout name them.
    versions = {t: TOOL_PINS[t].split("==")[1] for t in ("pytest", "ruff")}
    (recorded,) = summary["environments"].values()
    assert recorded["tools"] == versions and recorded["installed"]["pytest"] == versions["pytest"]
    assert recorded["used_by"] == ["@baseline", "A", "B", "C", "D"]
    layout = format_results(summary, batch.batch_id)
    assert f"  tools: pytest {versions['pytest']}, ruff {versions['ruff']}" in layout
    again = [r.result["environment"] for r in execute_batch(batch)]
    assert all(e["reused"] and e["key"] == first[0]["key"] for e in again)
    assert sum(e["duration_s"] for e in again) < first[0]["duration_s"]
