"""The data folder's default (tasks/data_dir.py) with real git: `.arena-data` where the command
runs, except inside a git repository that does not ignore it, where it is the repository's
`.git/arena-data`, found from any folder of the repository. Before (c3f317a) it was always
`.arena-data` in the current directory: `arena race run --repo .` left it in the raced
repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.data_dir import default_data_dir
from tasks.settings import ArenaSettings


def init(repo: Path) -> Path:
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    (repo / "pkg").mkdir()
    return repo


def test_outside_a_repository_it_is_where_the_command_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_data_dir() == Path(".arena-data")


def test_inside_a_repository_it_is_the_git_folders(tmp_path, monkeypatch):
    repo = init(tmp_path / "repo")
    for where in (repo, repo / "pkg"):
        monkeypatch.chdir(where)
        assert default_data_dir() == repo.resolve() / ".git" / "arena-data"
    monkeypatch.delenv("ARENA_DATA_DIR", raising=False)
    assert ArenaSettings().data_dir == repo.resolve() / ".git" / "arena-data"


@pytest.mark.parametrize("how", ["ignored", "already there"])
def test_a_folder_the_repository_ignores_or_already_has_stays(tmp_path, monkeypatch, how):
    """Arena's own checkout ignores `.arena-data`; a folder already made keeps what it stores."""
    repo = init(tmp_path / "repo")
    if how == "ignored":
        (repo / ".gitignore").write_text(".arena-data/\n")
    else:
        (repo / ".arena-data").mkdir()
    monkeypatch.chdir(repo)
    assert default_data_dir() == Path(".arena-data")
