"""Which repositories a spec may name: the one rule, for every front door (docs/security.md).

A race's `repo` comes from whoever submits the spec. The operator decides what that may be:
local repositories under ARENA_REPO_ROOTS, remote ones over the schemes ARENA_REPO_REMOTES
lists on the hosts ARENA_REPO_HOSTS lists. Who asks matters only while a list is empty: then
the operator's own CLI may name any local repository, or any host (on one machine the CLI's
user is the operator, and `arena race run --repo .` must work with no setting), while the HTTP
API's token holders and the schedules `arena beat` fires may name none. The same rule is
applied when a spec is validated, again by the worker before it clones (a spec in Redis is
checked twice), and before a merge.

Refusals about a local path say the same thing whatever the path is (missing, not a
repository, outside the roots): an answer that differed would tell a token holder what exists
on the API host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from tasks.settings import ArenaSettings
from tasks.validation import InputError
from workers.race.git import REMOTE_TRANSPORTS, is_repository, repo_kind, url_scheme

# Who submits or acts on a spec: the operator's CLI, a token holder through the HTTP API, a
# stored schedule fired by `arena beat`, or a worker about to clone a stored spec.
Asker = Literal["operator", "token-holder", "schedule", "worker"]
ROOTS_SETTING = "ARENA_REPO_ROOTS"
REMOTES_SETTING = "ARENA_REPO_REMOTES"
HOSTS_SETTING = "ARENA_REPO_HOSTS"
MAX_SHOWN = 100  # characters of a refused value quoted back
# A host as a URL names it: a DNS name or IPv4 address, or an IPv6 address (urlsplit drops its
# brackets); nothing percent-encoded, nothing git's transports might read another way.
_HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,252})|[0-9a-f:.]{2,45}")


def _listed_host(entry: str) -> tuple[str, int | None]:
    """An ARENA_REPO_HOSTS entry, `host`, `host:port`, `[v6]` or `[v6]:port`, as (host, port)."""
    parts = urlsplit(f"//{entry}")
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"{HOSTS_SETTING}: {entry!r} is not host or host:port") from None
    if not parts.hostname or not _HOST.fullmatch(parts.hostname):
        raise InputError(f"{HOSTS_SETTING}: {entry!r} is not host or host:port")
    return parts.hostname, port


def _spelled(host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


def _shown(repo: str) -> str:
    """The value quoted back, short, and without a URL's credentials."""
    if repo_kind(repo) == "url":
        parts = urlsplit(repo)
        if parts.username is not None or parts.password is not None:
            repo = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    text = repr(repo)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


@dataclass(frozen=True)
class RepoPolicy:
    """What `asker` may name, from the operator's settings."""

    asker: Asker
    roots: tuple[Path, ...]  # resolved; empty: see anywhere_local
    remotes: frozenset[str]  # URL schemes a remote repository may use
    hosts: frozenset[tuple[str, int | None]] = frozenset()  # (host, port or None: any port)

    @classmethod
    def of(cls, settings: ArenaSettings, asker: Asker) -> RepoPolicy:
        schemes = frozenset(settings.repo_remote_schemes())
        unknown = sorted(schemes - REMOTE_TRANSPORTS)
        if unknown:
            raise InputError(
                f"{REMOTES_SETTING}: {', '.join(unknown)} is not a scheme a repository may use "
                f"(known: {', '.join(sorted(REMOTE_TRANSPORTS))}; ssh, file and ext:: never)"
            )
        roots = tuple(dict.fromkeys(r.expanduser().resolve() for r in settings.repo_root_list()))
        hosts = frozenset(_listed_host(entry) for entry in settings.repo_host_list())
        return cls(asker=asker, roots=roots, remotes=schemes, hosts=hosts)

    @property
    def anywhere_local(self) -> bool:
        """No roots set: the operator's CLI (and a worker running what it submitted) may name
        any local path."""
        return not self.roots and self.asker in ("operator", "worker")

    def unreadable(self, repo: str) -> InputError:
        """The one refusal of a local path, whatever the reason."""
        if self.roots:
            return InputError(
                f"repo: {_shown(repo)} is not a git repository Arena may read "
                f"(a local repository must lie under {ROOTS_SETTING})"
            )
        if self.anywhere_local:
            return InputError(f"repo: {_shown(repo)} is not a git repository")
        return InputError(
            f"repo: {_shown(repo)} is not a repository Arena may read ({ROOTS_SETTING} is "
            "empty: only the operator's own CLI may name a local repository)"
        )

    def admit(self, repo: str, *, must_exist: bool = True) -> str:
        """`repo` as the workers will use it (a local path absolute and resolved, a URL as
        given), or InputError naming the field. `must_exist`: a local path must be a git
        repository now (at submission and before a merge; a worker's clone finds out)."""
        if repo.startswith("-"):
            raise InputError(
                f"repo: {_shown(repo)} begins with '-' (an option to git, not a repository)"
            )
        if any(ord(c) < 32 or ord(c) == 127 for c in repo):
            raise InputError("repo: contains control characters")
        kind = repo_kind(repo)
        if kind == "helper":
            raise InputError(
                f"repo: {_shown(repo)} names a git remote helper ('name::'); never allowed"
            )
        if kind == "scp":
            raise InputError(
                f"repo: {_shown(repo)} is ssh (host:path); Arena never uses ssh "
                "(give an https URL, or a local path)"
            )
        if kind == "url":
            return self._admit_url(repo, must_exist)
        return self._admit_local(repo, repo, must_exist)

    def _admit_url(self, repo: str, must_exist: bool) -> str:
        scheme = url_scheme(repo) or ""
        if scheme == "file":
            parts = urlsplit(repo)
            if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
                raise self.unreadable(repo)
            # A file:// URL is a local path spelled as a URL: the same roots, the same answers.
            return self._admit_local(repo, unquote(parts.path), must_exist)
        if scheme in ("ssh", "git+ssh", "ssh+git"):
            raise InputError(
                f"repo: {_shown(repo)} is ssh; Arena never uses ssh (it would "
                "authenticate with the host's keys): give an https URL"
            )
        if scheme not in self.remotes:
            allowed = ", ".join(sorted(self.remotes)) or "none"
            raise InputError(
                f"repo: {scheme}:// repositories are not allowed here "
                f"({REMOTES_SETTING}: {allowed})"
            )
        self._admit_host(repo)
        return repo

    def _admit_host(self, repo: str) -> None:
        """The URL's host, read one way only, and listed (ARENA_REPO_HOSTS): otherwise a spec
        could make the API's git and the workers fetch from the cluster's own services."""
        parts = urlsplit(repo)
        if parts.netloc.count("@") > 1 or "\\" in parts.netloc:
            # git's transports and Python could read the host differently: never guess.
            raise InputError(
                f"repo: {_shown(repo)} has an ambiguous host (write @ in a password as %40)"
            )
        host = parts.hostname or ""
        try:
            port = parts.port
        except ValueError:
            raise InputError(f"repo: {_shown(repo)} has no valid port") from None
        if not _HOST.fullmatch(host):
            raise InputError(f"repo: {_shown(repo)} has no host")
        if self.hosts:
            if (host, None) in self.hosts or (host, port) in self.hosts:
                return
            listed = ", ".join(sorted(_spelled(h, p) for h, p in self.hosts))
            raise InputError(
                f"repo: {_spelled(host, port)} is not a host Arena fetches repositories from "
                f"({HOSTS_SETTING}: {listed})"
            )
        if self.asker not in ("operator", "worker"):
            raise InputError(
                f"repo: {_spelled(host, port)} is not a host Arena fetches repositories from "
                f"({HOSTS_SETTING} is empty: only the operator's own CLI may name a remote "
                "repository)"
            )

    def _admit_local(self, repo: str, path_text: str, must_exist: bool) -> str:
        path = Path(path_text)
        if self.asker == "operator":
            path = path.expanduser()  # the operator's own shell would have expanded it
        elif not path.is_absolute():
            # Relative to what? The API's working directory means nothing to its callers, and
            # a stored spec's path was made absolute when it was accepted.
            raise self.unreadable(repo)
        try:
            resolved = path.resolve()  # a symbolic link is where it leads
        except (OSError, RuntimeError):  # a loop of links
            raise self.unreadable(repo) from None
        if not self.anywhere_local and not any(resolved.is_relative_to(r) for r in self.roots):
            raise self.unreadable(repo)
        if must_exist and not is_repository(resolved):
            raise self.unreadable(repo)
        return str(resolved)

    def admit_local(self, repo: str) -> Path:
        """A repository Arena may write to (a merge): local, allowed, a git repository."""
        if repo_kind(repo) != "local":
            raise InputError(f"repo: {_shown(repo)} is not a local repository; merge there")
        return Path(self.admit(repo))
