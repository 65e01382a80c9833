"""A race's environments on the worker's disk (issue 33, "the race environment cache is outside
ARENA_SANDBOX_DISK_MB"): on c3f317a three branches that differed by a comment in
requirements.txt made three 176 MB environments with the disk limit at 20 MB, kept two days.

Real git, the real bubblewrap jail and real pip installing real wheels (the folder
scripts/install-test-tools fills, no index): a comment or an order changed is the same
environment; an environment over the check's disk limit fails the check naming both sizes and
is not kept; the cache as a whole stays under its quota, least recently used out first."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import BASE_IMAGES, DOCKER_GROUP, WORKER_IMAGE, require_image
from tests.needs import require_bwrap
from tests.race.projects import commit, git
from tests.race.test_environment import COMMANDS, PYPROJECT, TEST, wheels  # noqa: F401
from workers.race.check import CheckError, PythonEnvironment, run_check
from workers.race.env_cache import READY, tree_size
from workers.race.environment import CacheBounds
from workers.sandbox import SandboxLimits
from workers.sandbox.docker import DockerSandbox
from workers.sandbox.local import LocalSandbox

PACKAGE = "def escape_attr(text):\n    return text\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A base and branches that change only comments and order of what they declare, and one
    that declares another tool."""
    repo = tmp_path / "markupsafe"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    files = {"pyproject.toml": PYPROJECT, "src/markupsafe/__init__.py": PACKAGE}
    commit(
        repo, {**files, "tests/test_escape.py": TEST, "requirements.txt": "pytest\nruff\n"}, "base"
    )
    for branch, text in (
        ("comment", "# a comment changed\npytest\nruff  # the linter\n"),
        ("order", "ruff\nPyTest\n"),
    ):
        git(repo, "checkout", "-q", "-b", branch, "main")
        commit(repo, {"requirements.txt": text}, branch)
    git(repo, "checkout", "-q", "-b", "more", "main")
    commit(repo, {"requirements.txt": "pytest\nruff\niniconfig\n"}, "more")
    git(repo, "checkout", "-q", "main")
    return repo


def check(repo: Path, ref: str, envs: Path, tmp_path: Path, bounds: CacheBounds) -> dict:
    result = run_check(
        str(repo),
        ref,
        "main",
        COMMANDS,
        LocalSandbox(),
        workdir_root=tmp_path,
        echo=lambda _: None,
        environment=PythonEnvironment(cache_root=envs, bounds=bounds),
    )
    return result.model_dump(mode="json")


def kept(envs: Path) -> list[str]:
    return sorted(p.parent.name for p in envs.glob(f"*/{READY}"))


@pytest.mark.usefixtures("wheels")
def test_a_comment_or_an_order_changed_is_the_same_environment(
    repo: Path,
    tmp_path: Path,
) -> None:
    require_bwrap()
    envs = tmp_path / "envs"
    runs = [
        check(repo, ref, envs, tmp_path, CacheBounds())["environment"]
        for ref in ("main", "comment", "order")
    ]
    assert [run["reused"] for run in runs] == [False, True, True]
    assert len({run["key"] for run in runs}) == 1
    assert len(kept(envs)) == 1


@pytest.mark.usefixtures("wheels")
def test_an_environment_over_the_disk_limit_fails_the_check_and_is_not_kept(
    repo: Path,
    tmp_path: Path,
) -> None:
    require_bwrap()
    envs = tmp_path / "envs"
    with pytest.raises(
        CheckError, match=r"environment takes \d+ MiB, over the disk limit of 1 MiB"
    ):
        check(repo, "main", envs, tmp_path, CacheBounds(disk_mb=1))
    assert kept(envs) == []
    assert [p.name for p in envs.iterdir() if p.is_dir()] == []  # nothing left half-built


@pytest.mark.usefixtures("wheels")
def test_the_cache_stays_under_its_quota_least_recently_used_out_first(
    repo: Path,
    tmp_path: Path,
) -> None:
    require_bwrap()
    envs = tmp_path / "envs"
    first = check(repo, "main", envs, tmp_path, CacheBounds())["environment"]
    # As the cache measures it: rglob's is_file() follows the venv's python links, which count
    # the interpreter's own 6.8 MB where it is the system's (a statically linked python3.11).
    size = tree_size(envs / first["key"])
    quota_mb = max(1, int(size * 1.5) >> 20)  # room for one environment, not two
    past = time.time() - 60
    os.utime(envs / first["key"] / READY, (past, past))
    second = check(repo, "more", envs, tmp_path, CacheBounds(cache_mb=quota_mb))["environment"]
    assert second["key"] != first["key"] and not second["reused"]
    assert kept(envs) == [second["key"]]  # the older one went, the new one stays


@DOCKER_GROUP
@pytest.mark.parametrize(
    "command",
    [
        "i=0; while true; do head -c 4194304 /dev/zero > f$i || exit 9; i=$((i+1)); done",
        "mkdir d; i=0; while true; do : > d/$i; i=$((i+1)); done",
    ],
    ids=["files", "inodes"],
)
def test_a_docker_sandbox_command_that_fills_the_disk_is_killed_at_the_disk_cap(
    docker_engine: Any, docker_workdir: Path, command: str
) -> None:
    """On c3f317a the Docker sandbox had no disk quota (the engine has none for a bind mount):
    a command filled the worker's disk until its deadline. Now the worker measures the work dir
    it shares with the container, as the local jail's helper does, and ends the container."""
    sandbox = DockerSandbox(require_image(WORKER_IMAGE, *BASE_IMAGES), client=docker_engine)
    limits = SandboxLimits(disk_mb=40, file_size_mb=None)
    result = sandbox.run(command, docker_workdir, timeout_s=120, limits=limits)
    assert result.exit_code == 137, result.output[-500:]
    assert result.error and result.error.startswith("killed: disk limit 40 MiB exceeded"), result
    assert result.duration_s < 90  # not the deadline
    after = sandbox.run("echo fresh", docker_workdir, timeout_s=60, limits=limits)
    assert after.output == "fresh\n"  # the next command gets a container of its own
