"""Teams (docs/configuration.md, "Teams"): the operator's file (ARENA_TEAMS_FILE) of who may do
what with the API. Each team has tokens, stored only as SHA-256 digests, a role (`read`,
`submit`, `admin`), a weight in the pool's fair share and quotas of units. The file is read
again when it changes, so a token is added or revoked without a restart; a token of
ARENA_API_TOKENS is an `admin` of no team, as before teams existed."""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from tasks.spec import NAME_PATTERN, load_spec_file
from tasks.validation import InputError, describe_validation_error

TEAMS_SETTING = "ARENA_TEAMS_FILE"
Role = Literal["read", "submit", "admin"]
ROLES: tuple[Role, ...] = ("read", "submit", "admin")
RELOAD_EVERY_S = 1.0  # the file is read again at least this often, changed or not
HEX = frozenset("0123456789abcdef")


def token_digest(token: str) -> str:
    """What the teams file keeps of a token: its SHA-256, 64 lowercase hex digits."""
    return hashlib.sha256(token.encode()).hexdigest()


def _digest(value: Any) -> str:
    """A token digest, never the token: the message of a refusal never quotes what was given (a
    token pasted in plain text must not reach a log)."""
    if not isinstance(value, str) or len(value) != 64 or not set(value.lower()) <= HEX:
        raise ValueError(
            "not a SHA-256 hex digest (64 hex digits): the file keeps a token's digest, never "
            "the token (make one with `arena team token-hash`, which reads the token on stdin)"
        )
    return value.lower()


Digest = Annotated[str, BeforeValidator(_digest)]


class Team(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    tokens: list[Digest] = []
    role: Role = "submit"
    weight: Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False)] = 1.0
    # None: no limit. In flight: units of the team's running batches without a result yet;
    # per day: units submitted since 00:00 UTC (Redis's clock).
    max_units_in_flight: Annotated[int, Field(ge=1)] | None = None
    max_units_per_day: Annotated[int, Field(ge=1)] | None = None


class TeamsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    teams: list[Team] = []

    @model_validator(mode="after")
    def _distinct(self) -> TeamsFile:
        names, owners = set[str](), dict[str, str]()
        for team in self.teams:
            if team.name in names:
                raise ValueError(f"teams: two teams named {team.name!r}")
            names.add(team.name)
            for digest in team.tokens:
                if digest in owners:
                    raise ValueError(
                        f"teams: one token digest in both {owners[digest]!r} and {team.name!r}"
                    )
                owners[digest] = team.name
        return self

    def team(self, name: str) -> Team | None:
        return next((t for t in self.teams if t.name == name), None)


def load_teams(path: str | Path) -> TeamsFile:
    """The teams file (YAML or JSON, read as a spec is: size and depth capped, duplicate keys
    refused), or one InputError line naming the file and the field."""
    raw = load_spec_file(path)
    try:
        return TeamsFile.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise InputError(f"{TEAMS_SETTING} {path}: {describe_validation_error(exc)}") from None


@dataclass(frozen=True)
class Caller:
    """Who a valid token belongs to. team None: a token of ARENA_API_TOKENS (an admin of no
    team)."""

    role: Role
    team: Team | None = None

    def describe(self) -> str:
        return f"role {self.role}" + (f" (team {self.team.name!r})" if self.team else "")

    def may_touch(self, owner: str | None) -> bool:
        """Whether it may cancel (or merge) a batch of team `owner`: an admin any; `submit` its
        own team's; `read` none."""
        if self.role == "admin":
            return True
        return self.role == "submit" and self.team is not None and owner == self.team.name


class TeamDirectory:
    """The teams file as it is now: stat'ed on every look and read again when it changed, or
    at least every RELOAD_EVERY_S, so a revoked token is refused within a second, without a
    restart. A file that turns bad (or goes) refuses every team token, with the reason, until
    it is fixed: keeping the last good one would keep a revoked token valid."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._guard = threading.Lock()
        self._read_at = 0.0
        self._stat: tuple[int, ...] | None = None
        self._teams: TeamsFile | InputError = self._read()

    def _signature(self) -> tuple[int, ...] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _read(self) -> TeamsFile | InputError:
        self._stat, self._read_at = self._signature(), time.monotonic()
        try:
            return load_teams(self.path)
        except InputError as exc:
            message = str(exc)
            if not message.startswith(TEAMS_SETTING):
                message = f"{TEAMS_SETTING} {message}"
            return InputError(message)

    def current(self) -> TeamsFile:
        """The teams now; InputError (the file's problem) while the file is bad."""
        with self._guard:
            stale = time.monotonic() - self._read_at >= RELOAD_EVERY_S
            if stale or self._signature() != self._stat:
                self._teams = self._read()
            teams = self._teams
        if isinstance(teams, InputError):
            raise teams
        return teams


def open_teams(path: Path | None) -> TeamDirectory | None:
    """The operator's teams (ARENA_TEAMS_FILE), refused at start with one line when bad."""
    if path is None:
        return None
    directory = TeamDirectory(path)
    directory.current()
    return directory


def identify(token: str, plain: Sequence[bytes], teams: TeamsFile | None) -> Caller | None:
    """The caller a bearer token names, None for no valid token. Constant time by
    construction: the token is hashed once and compared (hmac.compare_digest) with every plain
    token and every digest, whatever matches."""
    given = token.encode()
    digest = hashlib.sha256(given).hexdigest().encode()
    admin = False
    for candidate in plain:
        admin |= hmac.compare_digest(given, candidate)
    found: Team | None = None
    for team in teams.teams if teams else ():
        for known in team.tokens:
            if hmac.compare_digest(digest, known.encode()):
                found = team
    if found is not None:
        return Caller(found.role, found)
    return Caller("admin") if admin else None


class QuotaExceeded(InputError):
    """A batch over one of its team's quotas: nothing was stored (HTTP 429)."""

    def __init__(self, message: str, retry_after_s: int | None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class NotAllowed(InputError):
    """A valid token whose role or team may not do this (HTTP 403)."""
