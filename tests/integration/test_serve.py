"""`arena run --serve PORT` on the embedded default: the API (and its page) answers while the
batch runs and after it, until Ctrl-C; a port already in use is refused in one line."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import ARENA, ROOT, arena
from tests.integration.test_race import embedded_env

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_run_serves_the_api_until_interrupted(tmp_path: Path):
    port, env = _free_port(), embedded_env(tmp_path / "data")
    command = [ARENA, "run", "examples/bandit.yaml", "--serve", str(port)]
    run = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    api = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert run.poll() is None, run.communicate()
            try:
                batches = httpx.get(f"{api}/batches", timeout=2).json()
                if batches and batches[0]["status"] == "done":
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the batch never showed as done over HTTP"
            time.sleep(0.3)
        board = httpx.get(f"{api}/leaderboards/bandit-demo", timeout=5).json()
        assert [e["agent"] for e in board["entries"]][-1] == "random"
        time.sleep(1)
        assert run.poll() is None  # still serving after the batch
    finally:
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    assert f"serving http://127.0.0.1:{port}/ until Ctrl-C" in err
    assert "Leaderboard: bandit-demo" in out or "bandit-demo" in out


def test_a_busy_port_is_refused_in_one_line(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = arena(
            "run", "examples/bandit.yaml", "--serve", str(port), env=embedded_env(tmp_path / "data")
        )
    assert done.returncode == 2 and "--serve: cannot serve on 127.0.0.1" in done.stderr
    assert "Traceback" not in done.stderr
