"""examples/race.yaml as the README and docs/race.md run it on a fresh clone: its repository made
by examples/make_race_repo.py (real git), then `arena run examples/race.yaml` on the embedded
default (real Redis, real workers, the real jail, pytest and ruff at Arena's pins in the race's
own environment) prints the race's table: every number below is written by hand from the
branches' files in examples/make_race_repo.py. Before (c3f317a) there was no race example, and
`arena run` on a race printed its board (no verdict, no merge hint, no test counts)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.conftest import ROOT, arena
from tests.integration.test_embedded import embedded_env, no_leftovers

pytestmark = pytest.mark.integration

# By hand (seed weights 30/30/15/15/10; the base: 2 tests pass, ruff clean):
# - alice: 4 of 4 pass (2 new), no finding, +14 lines in 2 files, 300 s: speed 120/300 = 40.
#   (30*100 + 30*100 + 15*100 + 15*100 + 10*40) / 100 = 94.0
# - bob: 1 passed, 1 failed (test_words_are_lower_case): 1/2*100 - 1/2*50 = 25; one finding
#   (F401 `re` unused): 100 - 10 = 90; +8 -1 in 1 file; 240 s: speed 50.
#   (3000 + 750 + 1350 + 1500 + 500) / 100 = 71.0
# - carol: a syntax error, so the build fails: build, tests and lint 0; +5 in 1 file; 120 s is
#   the fastest: speed 100. (1500 + 1000) / 100 = 25.0
TABLE = [
    "#1 alice 94.0 / 100 [BUILD: ✓] [TESTS: 100] [LINT: 100] [DIFF: 100] [SPEED: 40]",
    "#2 bob 71.0 / 100 [BUILD: ✓] [TESTS: 25] [LINT: 90] [DIFF: 100] [SPEED: 50]",
    "#3 carol 25.0 / 100 [BUILD: ✗] [TESTS: --] [LINT: --] [DIFF: 100] [SPEED: 100]",
]
MINUS = "\u2212"  # git diff --stat's "-", as the table prints it
DIFF = [
    "Diff:",
    f"alice: +14 {MINUS}0, 2 files",
    f"bob: +8 {MINUS}1, 1 file",
    f"carol: +5 {MINUS}0, 1 file",
]


def test_arena_run_examples_race_yaml_prints_the_races_table(tmp_path):
    made = subprocess.run(
        [sys.executable, "examples/make_race_repo.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    env = embedded_env(tmp_path / "data")
    ran = arena("run", "examples/race.yaml", env=env, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:] + ran.stdout[-3000:]
    lines = [" ".join(line.split()) for line in ran.stdout.splitlines()]
    assert 'Race Results — Task: "add slugify(text) to textkit"' in lines
    table = [line for line in lines if line.startswith("#")]
    assert table == TABLE, ran.stdout
    assert "Winner: alice (branch: alice)" in lines and "Verdict: auto-merge" in lines
    assert "alice: 4 passed, 0 failed, 0 errors" in lines
    assert "bob: 1 passed, 1 failed, 0 errors" in lines
    start = lines.index("Diff:")
    assert lines[start : start + 4] == DIFF  # the raw numbers, not only in --json
    assert "carol: build failed: tests and lint not run" in lines
    no_leftovers(tmp_path / "data")


def test_racing_the_current_repository_leaves_no_folder_in_it(tmp_path):
    """`arena race run --repo .` in the raced repository, ARENA_DATA_DIR unset: the data folder
    goes to `.git/arena-data` (git never shows it), so the repository stays clean, and a later
    command run anywhere in the repository finds the race. Before (c3f317a) the race left an
    untracked `.arena-data/` (the embedded Redis's data, socket and logs) in the repository."""
    repo = tmp_path / "race-repo"
    made = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "make_race_repo.py"), str(repo)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    env = {
        **{k: v for k, v in embedded_env(tmp_path / "unused").items() if k != "ARENA_DATA_DIR"},
        "PYTHONPATH": str(ROOT),
    }
    flags = ["--task", "add slugify", "--agent", "alice=alice", "--agent", "carol=carol"]
    flags += ["--build-command", 'python -c "import textkit"', "--duration", "alice=300"]
    flags += ["--duration", "carol=120"]
    ran = arena("race", "run", "--repo", ".", *flags, "--json", env=env, cwd=repo)
    assert ran.returncode == 0, ran.stderr[-3000:]
    batch_id = json.loads(ran.stdout)["batch_id"]
    assert not (repo / ".arena-data").exists()
    assert (repo / ".git" / "arena-data" / "redis.log").is_file()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], cwd=repo, capture_output=True, text=True
    )
    assert status.returncode == 0 and status.stdout == ""
    shown = arena("race", "results", batch_id, env=env, cwd=repo / "textkit")
    assert shown.returncode == 0, shown.stderr
    assert "Winner: alice (branch: alice)" in shown.stdout
    no_leftovers(repo / ".git" / "arena-data")
