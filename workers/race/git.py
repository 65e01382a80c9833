"""The git a race check needs: resolve a ref to a commit, a fresh checkout, diff stats.

Every call runs git with the user's and system configuration ignored (no hooks, no pager, no
credential prompts), so a developer's settings cannot change what a check measures.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from scoring.race_measures import DiffStats

GIT_TIMEOUT_S = 120.0
_SHA = frozenset("0123456789abcdef")


class GitError(RuntimeError):
    """A git step failed; the message says which and why (for the unit's error result)."""


# Arena's own stand-in for the user's git config. Its one setting: a worker in a container
# reads repositories another user owns (the operator's, on a read-only mount), which git refuses
# without safe.directory; and git ignores that setting given with `-c` when it clones from a
# local path (the upload-pack it starts drops command-line config). What makes a foreign
# repository's own config dangerous, hooks and an fsmonitor command, is off on every call.
GLOBAL_CONFIG = str(Path(__file__).with_name("arena.gitconfig"))


def git_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=GLOBAL_CONFIG, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="true", GIT_PAGER="cat", LC_ALL="C",
    )  # fmt: skip
    return env


def git(
    *args: str, cwd: Path | None = None, timeout_s: float = GIT_TIMEOUT_S, isolated: bool = True
) -> str:
    """Run git; its stdout, or GitError. `isolated=False` (a merge into the user's own
    repository) keeps the user's identity, configuration and hooks."""
    if isolated:
        command = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
                   "-c", "advice.detachedHead=false"]  # fmt: skip
        env = git_environment()
    else:
        command = ["git"]
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            [*command, *args], cwd=cwd, env=env, capture_output=True, text=True,
            timeout=timeout_s, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        raise GitError("git is not installed on this worker") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took over {timeout_s:g}s") from None
    if done.returncode != 0:
        message = " ".join((done.stderr or done.stdout).split())[:300]
        raise GitError(f"git {args[0]} failed: {message}")
    return done.stdout


def is_local(repo: str) -> bool:
    return "://" not in repo and not (":" in repo.split("/")[0] and not Path(repo).exists())


def resolve_commit(repo: str, ref: str) -> str | None:
    """The commit `ref` (a branch, tag or commit id) names in `repo` now; None when it names
    nothing there. Raises GitError when the repository cannot be read at all."""
    if is_local(repo):
        if not Path(repo).is_dir():
            raise GitError(f"repository {repo} does not exist")
        try:
            return git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=Path(repo)
                       ).strip() or None  # fmt: skip
        except GitError as exc:
            if "not a git repository" in str(exc):
                raise GitError(f"{repo} is not a git repository") from None
            return None
    listed = git("ls-remote", repo, f"refs/heads/{ref}", f"refs/tags/{ref}")
    first = listed.split()
    if first:
        return first[0]
    return ref if len(ref) == 40 and set(ref) <= _SHA else None


def clone(repo: str, dest: Path) -> None:
    """A fresh clone of `repo` in `dest`, nothing checked out: nothing shared with other checks
    but git's read-only object files (a local clone hard-links them)."""
    source = str(Path(repo).resolve()) if is_local(repo) else repo
    git("clone", "--quiet", "--no-checkout", source, str(dest))


def checkout(dest: Path, commit: str) -> None:
    try:
        git("checkout", "--quiet", "--detach", commit, cwd=dest)
    except GitError:
        raise GitError(f"commit {commit[:12]} is not in the repository any more") from None


def commit_of(checkout_dir: Path, ref: str) -> str | None:
    """A ref of the source repository as the clone sees it (branches are `origin/NAME`)."""
    for candidate in (f"origin/{ref}", ref):
        try:
            found = git("rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}",
                        cwd=checkout_dir).strip()  # fmt: skip
        except GitError:
            continue
        if found:
            return found
    return None


def diff_stats(checkout_dir: Path, base: str, commit: str) -> DiffStats:
    """What the branch changed since it left the base (`base...commit`, three dots: a base
    that moved on does not count against the agent). Renames are detected, as `git diff --stat`
    does by default; a binary file counts as changed with 0 lines."""
    out = git("diff", "--numstat", f"{base}...{commit}", cwd=checkout_dir)
    added = removed = files = 0
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) != 3:
            continue
        files += 1
        added += int(parts[0]) if parts[0].isdigit() else 0
        removed += int(parts[1]) if parts[1].isdigit() else 0
    return DiffStats(lines_added=added, lines_removed=removed, files_changed=files)
