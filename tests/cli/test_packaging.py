"""The wheel: it builds without deprecation banners, ships its data, and `arena demo` runs from it.

The venv holds an editable install of Arena, so the test puts the wheel's copy first on PYTHONPATH,
runs from a folder outside the repository, and checks that every Arena package was imported from
the wheel's copy before trusting the demo's output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "arena" / "examples" / "scoring"
SUITES = ROOT / "tasks" / "suites"
PACKAGES = ["arena", "scoring", "tasks", "workers"]
# What a source tree holds besides the project: never part of a build.
NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*cache",
    ".hypothesis",
    ".arena-data",
    "tests",
)
# Prints where each package was imported from (one marked stderr line), then runs the CLI.
RUN_FROM_INSTALL = (
    "import importlib, json, sys; "
    f"files = {{name: importlib.import_module(name).__file__ for name in {PACKAGES!r}}}; "
    "from arena.cli.main import EXAMPLES_DIR, main; "
    "files['EXAMPLES_DIR'] = str(EXAMPLES_DIR); "
    "print('ARENA-FILES', json.dumps(files), file=sys.stderr); "
    "main()"
)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without Python or pip settings that could change what runs."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "PIP_")) and key != "VIRTUAL_ENV"
    }
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONUTF8="1")
    env.update(extra)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def test_wheel_builds_clean_ships_data_and_runs_demo(tmp_path: Path) -> None:
    # Build from a copy, so no build/ or egg-info lands in the checkout (and nothing stale there
    # lands in the wheel). --no-build-isolation: the venv's setuptools (the dev extra) builds it,
    # offline; --check-build-dependencies fails the build if it is older than [build-system] asks.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCE)
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip"]
    build = run(
        [
            *pip,
            "wheel",
            "--verbose",
            "--no-deps",
            "--no-build-isolation",
            "--check-build-dependencies",
            "--no-cache-dir",
            "-w",
            str(dist),
            str(source),
        ],
        cwd=tmp_path,
        env=clean_env(),
    )
    log = build.stdout + build.stderr
    assert build.returncode == 0, log
    assert "deprecat" not in log.lower(), log

    (wheel,) = dist.glob("arena_eval-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    examples = {f"arena/examples/scoring/{path.name}" for path in EXAMPLES.glob("*.json")}
    suites = {f"tasks/suites/{path.name}" for path in SUITES.glob("*.yaml")}
    assert len(examples) >= 8 and examples <= names, sorted(examples - names)
    assert suites and suites <= names, sorted(suites - names)
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), sorted(names)

    site = tmp_path / "site"
    install = run(
        [*pip, "install", "--no-deps", "--no-compile", "--target", str(site), str(wheel)],
        cwd=tmp_path,
        env=clean_env(),
    )
    assert install.returncode == 0, install.stdout + install.stderr

    elsewhere = tmp_path / "elsewhere"  # not the repository: nothing importable from the cwd
    elsewhere.mkdir()
    demo = run(
        [sys.executable, "-c", RUN_FROM_INSTALL, "demo"],
        cwd=elsewhere,
        env=clean_env(PYTHONPATH=str(site)),
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    (marked,) = [line for line in demo.stderr.splitlines() if line.startswith("ARENA-FILES ")]
    files = json.loads(marked.removeprefix("ARENA-FILES "))
    for name, file in files.items():
        assert Path(file).resolve().is_relative_to(site.resolve()), (name, file)

    out = demo.stdout
    for path in EXAMPLES.glob("*.json"):
        assert f"── {path.name.split('-', 1)[0]}: {path.name} " in out, path.name
    assert "builtin scored 73/100" in out  # Alympics
    assert "Arena Score: 1,018,182" in out  # Mario, example 1
    assert "MARIO ARENA LEADERBOARD" in out
    assert "#1  Codex CLI      93.3 / 100" in out  # the race
    assert "Winner: Codex CLI" in out
