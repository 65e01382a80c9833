"""The git a race check needs: resolve a ref to a commit, a fresh checkout, diff stats.

A repository and a ref come from a spec, so from a token holder: every call is written so that
neither can become an option or a command. Paths and refs follow `--` (or `--end-of-options`
where `--` would start a list of paths); the only transport a call may use is the one its
repository needs (a local path: `file`; a URL: its scheme), never `ext::`, `fd::` or ssh;
the user's and system configuration, their HOME, agent and keys are out of reach (no hooks, no
pager, no credential prompts). Which repositories a spec may name is tasks/repo_policy.py's.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from scoring.race_measures import DiffStats

GIT_TIMEOUT_S = 120.0  # ARENA_GIT_TIMEOUT_S's default; callers pass the operator's setting
_SHA = frozenset("0123456789abcdef")
# The remote transports Arena can ever use (which ones a cluster allows is a setting); ssh is
# not among them: it would authenticate with the host's own keys (~/.ssh from the password
# file, whatever HOME says) and so reach what the host's user can.
REMOTE_TRANSPORTS = frozenset({"https", "http", "git"})
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*"
_HELPER = re.compile(_SCHEME + "::")  # git's `<transport>::<address>` (ext::, fd::, ...)
_URL = re.compile(f"({_SCHEME})://")
# What the environment of an isolated git keeps: the path to find git, and what a remote over
# https needs on a host behind a proxy or with its own certificates. Nothing else: not HOME,
# SSH_AUTH_SOCK, XDG_CONFIG_HOME, Arena's settings or secrets.
_PASSED = (
    "PATH",
    "TMPDIR",
    "TZ",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
)

RepoKind = Literal["local", "url", "helper", "scp"]


class GitError(RuntimeError):
    """A git step failed; the message says which and why (for the unit's error result)."""


class GitTimeout(GitError):
    """A git step ran past its deadline and was stopped."""


# Arena's own stand-in for the user's git config. Its one setting: a worker in a container
# reads repositories another user owns (the operator's, on a read-only mount), which git refuses
# without safe.directory; and git ignores that setting given with `-c` when it clones from a
# local path (the upload-pack it starts drops command-line config). What makes a foreign
# repository's own config dangerous, hooks and an fsmonitor command, is off on every call.
GLOBAL_CONFIG = str(Path(__file__).with_name("arena.gitconfig"))


def repo_kind(repo: str) -> RepoKind:
    """How git itself reads `repo` (transport.c, connect.c): `name::address` runs the remote
    helper git-remote-name; `scheme://...` is a URL; `host:path` with the colon before any
    slash is ssh (scp-style); anything else is a local path."""
    if _HELPER.match(repo):
        return "helper"
    if _URL.match(repo):
        return "url"
    colon, slash = repo.find(":"), repo.find("/")
    if colon != -1 and (slash == -1 or colon < slash):
        return "scp"
    return "local"


def url_scheme(repo: str) -> str | None:
    """The scheme of a URL repository, lower case; None for anything else."""
    found = _URL.match(repo)
    return found.group(1).lower() if found else None


def is_local(repo: str) -> bool:
    return repo_kind(repo) == "local"


def transport_of(repo: str) -> str:
    """The one transport a call on `repo` may use: `file` for a local path (a local clone is
    the file transport too) or a file:// URL, a URL's scheme where Arena can use it at all.
    GitError for anything else: whatever a policy said, git here never runs a remote helper
    given by the spec, never ssh."""
    if repo.startswith("-"):
        raise GitError(f"repository {repo[:80]!r} looks like an option")
    kind = repo_kind(repo)
    if kind == "local":
        return "file"
    scheme = url_scheme(repo)
    if kind == "url" and scheme is not None and (scheme in REMOTE_TRANSPORTS or scheme == "file"):
        return scheme
    raise GitError(f"repository {repo[:80]!r}: a transport Arena never uses")


def git_environment(transports: Sequence[str] = ()) -> dict[str, str]:
    """A clean environment: HOME points nowhere (no ~/.gitconfig, ~/.netrc, ~/.git-credentials
    of the host's user), no agent socket, and only `transports` allowed (GIT_ALLOW_PROTOCOL
    outranks any configuration, a repository's own included, and reaches every git process
    this one starts)."""
    env = {k: os.environ[k] for k in _PASSED if k in os.environ}
    env.update(
        HOME=os.devnull,
        GIT_CONFIG_GLOBAL=GLOBAL_CONFIG,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="true",
        GIT_PAGER="cat",
        LC_ALL="C",
        GIT_ALLOW_PROTOCOL=":".join(transports),
        GIT_SSH_COMMAND="false",  # a second lock: no transport allowed here is ssh
    )
    return env


def _isolated(transports: Sequence[str]) -> list[str]:
    allow = [f"protocol.{name}.allow=always" for name in transports]
    options = [
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "advice.detachedHead=false",
        "protocol.allow=never",
        # A listed host's redirect could lead anywhere (the cluster's own services).
        "http.followRedirects=false",
        *allow,
    ]
    return ["git", *(part for option in options for part in ("-c", option))]


def user_environment() -> dict[str, str]:
    """The user's own environment for a merge into their repository (their identity and
    configuration, their hooks), less Arena's settings: a hook never sees the API's tokens or
    the Redis password."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return {**env, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


def git(
    *args: str,
    cwd: Path | None = None,
    timeout_s: float = GIT_TIMEOUT_S,
    isolated: bool = True,
    transports: Sequence[str] = (),
) -> str:
    """Run git; its stdout, or GitError. `transports`: what this call may fetch over (none by
    default). `isolated=False` (a merge into the user's own repository) keeps the user's
    identity, configuration and hooks."""
    if isolated:
        command, env = _isolated(transports), git_environment(transports)
    else:
        command, env = ["git"], user_environment()
    returncode, stdout, stderr = _run_within([*command, *args], cwd, env, timeout_s)
    if returncode is None:
        raise GitTimeout(f"git {args[0]} took over {timeout_s:g}s (stopped)")
    if returncode != 0:
        message = " ".join((stderr or stdout).split())[:300]
        raise GitError(f"git {args[0]} failed: {message}")
    return stdout


def _run_within(
    argv: list[str], cwd: Path | None, env: dict[str, str], timeout_s: float
) -> tuple[int | None, str, str]:
    """(exit status, stdout, stderr) of `argv`; (None, ...) once `timeout_s` passed, with git
    and everything it started killed: a transport git runs (git-remote-https) holds the
    pipes, so killing git alone would leave this call waiting for them (a total deadline,
    not one per read)."""
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, killed whole
        )
    except FileNotFoundError:
        raise GitError("git is not installed on this worker") from None
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None, "", ""
    return process.returncode, stdout, stderr


def is_repository(path: Path) -> bool:
    """Whether `path` itself is a git repository (its top, or a bare one): git may not look in
    the folders above it, so a folder inside someone else's repository is not one."""
    env = {**git_environment(), "GIT_CEILING_DIRECTORIES": str(path.parent)}
    try:
        done = subprocess.run(
            [*_isolated(()), "rev-parse", "--absolute-git-dir"],
            cwd=path,
            env=env,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):  # not a folder, not ours to read
        return False
    return done.returncode == 0


def _verify(ref: str, cwd: Path) -> str | None:
    """The commit `ref` names in the repository at `cwd`; None when it names none."""
    found = git(
        "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", cwd=cwd
    ).strip()
    return found or None


def resolve_commit(repo: str, ref: str, timeout_s: float = GIT_TIMEOUT_S) -> str | None:
    """The commit `ref` (a branch, tag or commit id) names in `repo` now; None when it names
    nothing there. Raises GitError when the repository cannot be read at all, or not within
    `timeout_s` (a remote's ls-remote, git killed then)."""
    transport = transport_of(repo)
    if is_local(repo):
        if not Path(repo).is_dir():
            raise GitError(f"repository {repo} does not exist")
        try:
            return _verify(ref, Path(repo))
        except GitError as exc:
            if "not a git repository" in str(exc):
                raise GitError(f"{repo} is not a git repository") from None
            return None
    listed = git(
        "ls-remote",
        "--",
        repo,
        f"refs/heads/{ref}",
        f"refs/tags/{ref}",
        transports=[transport],
        timeout_s=timeout_s,
    )
    first = listed.split()
    if first:
        return first[0]
    return ref if len(ref) == 40 and set(ref) <= _SHA else None


def read_file(repo: Path, ref: str, name: str) -> str:
    """A file as committed on `ref` of a local repository: the blob's bytes (cat-file applies
    no filter and no textconv a repository's configuration could name)."""
    return git("cat-file", "--end-of-options", "blob", f"{ref}:{name}", cwd=repo)


def clone(repo: str, dest: Path, timeout_s: float = GIT_TIMEOUT_S) -> None:
    """A fresh clone of `repo` in `dest`, nothing checked out: nothing shared with other checks
    but git's read-only object files (a local clone hard-links them). GitError past
    `timeout_s` (git and its transport killed)."""
    transport = transport_of(repo)
    source = str(Path(repo).resolve()) if is_local(repo) else repo
    git(
        "clone",
        "--quiet",
        "--no-checkout",
        "--",
        source,
        str(dest),
        transports=[transport],
        timeout_s=timeout_s,
    )


def checkout(dest: Path, commit: str) -> None:
    try:
        git("switch", "--quiet", "--detach", "--end-of-options", commit, cwd=dest)
    except GitError:
        raise GitError(f"commit {commit[:12]} is not in the repository any more") from None


def commit_of(checkout_dir: Path, ref: str) -> str | None:
    """A ref of the source repository as the clone sees it (branches are `origin/NAME`)."""
    for candidate in (f"origin/{ref}", ref):
        try:
            found = _verify(candidate, checkout_dir)
        except GitError:
            continue
        if found:
            return found
    return None


def diff_stats(checkout_dir: Path, base: str, commit: str) -> DiffStats:
    """What the branch changed since it left the base (`base...commit`, three dots: a base
    that moved on does not count against the agent). Renames are detected, as `git diff --stat`
    does by default; a binary file counts as changed with 0 lines."""
    out = git("diff", "--numstat", "--end-of-options", f"{base}...{commit}", "--", cwd=checkout_dir)
    added = removed = files = 0
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) != 3:
            continue
        files += 1
        added += int(parts[0]) if parts[0].isdigit() else 0
        removed += int(parts[1]) if parts[1].isdigit() else 0
    return DiffStats(lines_added=added, lines_removed=removed, files_changed=files)
