"""`arena team` (arena/cli/teams.py), the real CLI: the operator makes a token's digest for the
teams file and checks a file before it replaces the one the API reads."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import yaml

from tests.integration.conftest import ARENA


def team(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ARENA, "team", *args], input=stdin, capture_output=True, text=True, timeout=60
    )


def test_token_hash_is_the_token_s_sha256_without_echo_s_newline() -> None:
    done = team("token-hash", stdin="s3cret-token\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == hashlib.sha256(b"s3cret-token").hexdigest()
    empty = team("token-hash", stdin="\n")
    assert empty.returncode == 2 and empty.stderr.count("\n") == 1


def test_a_new_token_comes_with_its_digest() -> None:
    token, digest = team("new-token").stdout.split()
    assert len(token) >= 40 and digest == hashlib.sha256(token.encode()).hexdigest()


def test_check_lists_a_good_file_and_refuses_a_plain_token(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"t").hexdigest()
    good = tmp_path / "teams.yaml"
    good.write_text(
        yaml.safe_dump({"teams": [{"name": "vision", "tokens": [digest], "weight": 3}]})
    )
    done = team("check", str(good))
    assert done.returncode == 0, done.stderr
    assert "vision: role submit, 1 token(s), weight 3" in done.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"teams": [{"name": "vision", "tokens": ["plain-secret"]}]}))
    refused = team("check", str(bad))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "teams[0].tokens[0]: not a SHA-256 hex digest" in refused.stderr
    assert "plain-secret" not in refused.stderr
