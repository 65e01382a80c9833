"""`arena team`: the operator's tools for the teams file (ARENA_TEAMS_FILE, docs/deploy.md
"Teams"): a token's digest (what the file keeps), a new token, and a check of a file before
it replaces the one the API reads."""

from __future__ import annotations

import secrets
import sys

import click

from tasks.teams import load_teams, token_digest
from tasks.validation import InputError

MAX_TOKEN_BYTES = 4096


@click.group("team")
def team_group() -> None:
    """The API's teams: tokens, roles, quotas (ARENA_TEAMS_FILE)."""


@team_group.command("token-hash")
def token_hash_command() -> None:
    """Print the SHA-256 digest of the token read on standard input, for a team's `tokens:`
    (the file never holds a token itself): `arena team token-hash < token.txt`. Whitespace
    around it (echo's newline) is no part of it."""
    token = sys.stdin.read(MAX_TOKEN_BYTES + 1)
    if len(token) > MAX_TOKEN_BYTES:
        raise InputError(f"stdin: a token of over {MAX_TOKEN_BYTES} characters")
    token = token.strip()
    if not token or any(c.isspace() for c in token):
        raise InputError("stdin: give one token, without spaces inside (none was read)")
    click.echo(token_digest(token))


@team_group.command("new-token")
def new_token_command() -> None:
    """Print a new random token (give it to the team) and, on the next line, its digest (put
    it in the teams file)."""
    token = secrets.token_urlsafe(32)
    click.echo(token)
    click.echo(token_digest(token))


@team_group.command("check")
@click.argument("file")
def check_command(file: str) -> None:
    """Check a teams file as the API reads it (one line naming the field when it is bad, exit
    2): run it before the file replaces the one the API reads."""
    teams = load_teams(file).teams
    click.echo(f"{file}: {len(teams)} team{'s' if len(teams) != 1 else ''}")
    for team in teams:
        quotas = [
            f"{name} {value:,}"
            for name, value in (
                ("max_units_in_flight", team.max_units_in_flight),
                ("max_units_per_day", team.max_units_per_day),
            )
            if value is not None
        ]
        click.echo(
            f"  {team.name}: role {team.role}, {len(team.tokens)} token(s), weight "
            f"{team.weight:g}" + (", " + ", ".join(quotas) if quotas else "")
        )
