"""`arena race merge`: the winner's scored commit merged into the base branch of the user's
repository, with the user's own git identity and configuration (it is their repository).

Which repository may be merged into is the caller's to check (tasks/repo_policy.py: under
ARENA_REPO_ROOTS); here the base and the commit cannot become options (`--`,
`--end-of-options`), and no git process or hook sees Arena's settings (ARENA_*)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from workers.race.git import GitError, git, user_environment


def _git(*args: str, cwd: Path) -> str:
    return git(*args, cwd=cwd, timeout_s=300, isolated=False)


def _worktree_of(repo: Path, base: str) -> Path | None:
    """Where `base` is checked out, if anywhere (a branch cannot be checked out twice)."""
    path = None
    for line in _git("worktree", "list", "--porcelain", cwd=repo).splitlines():
        if line.startswith("worktree "):
            path = Path(line.removeprefix("worktree "))
        elif line == f"branch refs/heads/{base}" and path is not None:
            return path
    return None


def _merge_in(worktree: Path, commit: str, message: str) -> None:
    try:
        _git(
            "merge", "--no-ff", "--no-edit", "-m", message, "--end-of-options", commit, cwd=worktree
        )
    except GitError as exc:
        subprocess.run(
            ["git", "merge", "--abort"],
            cwd=worktree,
            env=user_environment(),
            capture_output=True,
            check=False,
        )
        raise GitError(
            f"{exc} (nothing was merged; merge by hand: git merge {commit[:12]})"
        ) from None


def merge_into(repo: Path, base: str, commit: str, message: str) -> str:
    """Merge `commit` into branch `base` (a merge commit, --no-ff, so the race's result stays
    visible in history); returns the base's new commit. A working tree with uncommitted
    changes on `base` is refused, never touched."""
    checked_out = _worktree_of(repo, base)
    if checked_out is not None:
        if _git("status", "--porcelain", "--untracked-files=no", cwd=checked_out).strip():
            raise GitError(f"{checked_out} has uncommitted changes on {base}; commit or stash them")
        _merge_in(checked_out, commit, message)
        return _git("rev-parse", "HEAD", cwd=checked_out).strip()
    with tempfile.TemporaryDirectory(prefix="arena-merge-") as scratch:
        worktree = Path(scratch) / "base"
        _git("worktree", "add", "--quiet", "--", str(worktree), base, cwd=repo)
        try:
            _merge_in(worktree, commit, message)
            return _git("rev-parse", "HEAD", cwd=worktree).strip()
        finally:
            _git("worktree", "remove", "--force", "--", str(worktree), cwd=repo)
