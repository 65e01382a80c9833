"""The embedded default serves every command at once (issue 32; docs/architecture.md, "The embedded
default"): with no ARENA_REDIS_URL, the first command on a data folder starts its host, every
other command attaches to it (`arena api` and its page, `arena run`, readers), two commands
starting at once make one host, a batch left running by a host that died is resumed by the next
run while a batch running under a live host is waited for, and the host stops once its last
client left, whether it exited or was SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from arena.embedded.host import read_state
from tests.integration.conftest import ARENA, ROOT, arena, bandit_spec
from tests.integration.test_embedded import embedded_env, no_leftovers
from tests.integration.test_serve import _free_port

pytestmark = pytest.mark.integration


def started(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [ARENA, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def answering(url: str, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, process.communicate()
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{url} never answered"
        time.sleep(0.2)


def test_arena_api_serves_the_page_and_arena_run_attaches(tmp_path: Path) -> None:
    data, port = tmp_path / "data", _free_port()
    env = embedded_env(data)
    api = started("api", "--port", str(port), env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        answering(f"{base}/", api)
        # `arena run` on the same folder meanwhile: attached, not refused; its batch on the page.
        ran = arena("run", "examples/bandit.yaml", "--json", env=env)
        assert ran.returncode == 0, ran.stderr
        batch_id = json.loads(ran.stdout)["batch_id"]
        listed = httpx.get(f"{base}/batches", timeout=5).json()
        assert [(b["id"], b["status"]) for b in listed] == [(batch_id, "done")]
        page = httpx.get(f"{base}/ui/batches/{batch_id}", timeout=5)
        assert page.status_code == 200 and batch_id in page.text
        board = httpx.get(f"{base}/ui/leaderboards/bandit-demo", timeout=5)
        assert board.status_code == 200 and "thompson" in board.text
        # A reader attaches too, and the host is the one `arena api` started.
        host = read_state(data)
        assert host is not None and host.generation == 1
        read = arena("leaderboard", "bandit-demo", "--json", env=env)
        assert read.returncode == 0, read.stderr
        assert read_state(data) == host
    finally:
        api.send_signal(signal.SIGKILL)  # a client killed: its lock goes with it
        api.communicate(timeout=30)
    no_leftovers(data)  # the host stopped once its last client was gone (after the linger)
    assert "no client for 1s: stopping" in (data / "host.log").read_text()


def test_commands_starting_at_once_make_one_host(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = embedded_env(data)
    readers = [started("batches", "--json", env=env) for _ in range(4)]
    for reader in readers:
        out, err = reader.communicate(timeout=120)
        assert reader.returncode == 0 and json.loads(out) == [], err
    log = (data / "host.log").read_text()
    assert log.count("arena host: generation") == 1, log
    no_leftovers(data)


def test_a_dead_hosts_batch_is_resumed_and_a_live_ones_waited_for(
    tmp_path: Path, write_spec, request: pytest.FixtureRequest
) -> None:
    """The host stopped mid-batch under its client (SIGTERM: its workers finish the units in
    hand, then its Redis stops; the client is gone too): the next host forgets what the old one
    left queued, and the next run resumes the batch from its stored units. A second
    run of the same batch meanwhile attaches to the live host and waits for it (already-running):
    nothing it queued is wiped, every unit ends once."""
    data = tmp_path / "data"
    env = embedded_env(data)
    spec = str(write_spec(bandit_spec(params={"pulls": 30000}, leaderboard="slow")))
    first = started("run", spec, "--quiet", env=env)
    request.addfinalizer(first.kill)  # a failing test leaves no client keeping the cluster
    deadline = time.monotonic() + 120
    while not (data / "worker.log").exists() or b"running" not in _batches(env):
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.3)
    time.sleep(3)  # some units stored, others queued or running
    host = read_state(data)
    assert host is not None
    os.kill(host.pid, signal.SIGTERM)
    first.kill()  # its cluster is gone
    first.communicate(timeout=30)
    no_leftovers(data)

    resumed = started("run", spec, "--json", env=env)
    request.addfinalizer(resumed.kill)
    time.sleep(2)
    waiting = arena("run", spec, "--json", env=env)  # attaches while the batch runs
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert waiting.returncode == 0, waiting.stderr
    again, alongside = json.loads(out), json.loads(waiting.stdout)
    assert again["submission"]["state"] == "enqueued" and again["submission"]["reused"] > 0
    assert alongside["submission"]["state"] == "already-running"
    for report in (again, alongside):
        assert report["counts"]["completed"] == 200 and report["counts"]["errors"] == 0
    no_leftovers(data)
    assert "arena host: generation 2 " in (data / "host.log").read_text()


def _batches(env: dict[str, str]) -> bytes:
    return subprocess.run([ARENA, "batches"], cwd=ROOT, env=env, capture_output=True).stdout
