"""Client commands started while the cluster's Redis is down (issue 34, finding 3): each waits
for it, as a connected watch does, up to ARENA_REDIS_RETRY_S, saying so in one line on stderr,
and goes on once a real redis-server starts; one that never comes back ends with exit status 3
(the cluster unreachable) and one line, never 2 (bad input), and bad input is still 2 at once.

On c3f317a each of these commands exited 2 at once ("cannot reach Redis"), the status the docs
give a bad spec, so a script retried nothing and the watch of a batch started during an outage
ended where a connected one rode it out."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from arena.embedded import redis_server_binary, stop
from tasks.store import Store
from tests.integration.conftest import (
    ARENA,
    ROOT,
    RestartableRedis,
    WorkerPools,
    bandit_spec,
    wait_finished,
)

UNREACHABLE = "cannot reach Redis"
WAITING = "; waiting for up to "


class Client:
    """An `arena` command run as a real process, its output in files (read while it runs)."""

    def __init__(self, folder: Path, name: str, env: dict[str, str], *args: str) -> None:
        self.out, self.err = folder / f"{name}.out", folder / f"{name}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen(
                [ARENA, *args], env=env, cwd=ROOT, stdout=out, stderr=err, text=True
            )

    def said(self, text: str, timeout: float = 30) -> None:
        """Wait until its stderr holds `text` (the process still running)."""
        deadline = time.monotonic() + timeout
        while text not in self.err.read_text():
            assert self.process.poll() is None, (self.process.returncode, self.err.read_text())
            assert time.monotonic() < deadline, f"never said {text!r}: {self.err.read_text()}"
            time.sleep(0.05)

    def end(self, timeout: float = 120) -> tuple[int, str, str]:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"still running after {timeout}s: {self.err.read_text()}")
        return code, self.out.read_text(), self.err.read_text()


def env_for(url: str, tmp_path: Path, retry_s: float = 300) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return {
        **env,
        "ARENA_REDIS_URL": url,
        "ARENA_DATA_DIR": str(tmp_path / "data"),
        "ARENA_REDIS_RETRY_S": str(retry_s),
        "PYTHONPATH": str(ROOT),
    }


def waited_and_went_on(err: str) -> None:
    """The first line says what it waits for, the next that Redis is back; no traceback."""
    lines = err.strip().splitlines()
    assert UNREACHABLE in lines[0] and WAITING in lines[0], err
    assert lines[1].startswith("Redis is back after "), err
    assert "Traceback" not in err, err


@pytest.fixture
def down_redis(tmp_path: Path) -> Iterator[RestartableRedis]:
    """A real Redis not started yet: its socket does not exist (nothing listens)."""
    server = RestartableRedis(tmp_path / "redis")
    yield server
    server.stop()


def test_submit_and_run_started_during_an_outage_wait_and_go_on(
    down_redis: RestartableRedis, tmp_path: Path, workers: WorkerPools
):
    env = env_for(down_redis.url, tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(bandit_spec(protocol={"episodes": 4, "seed": 3})))
    other = tmp_path / "other.json"
    other.write_text(json.dumps(bandit_spec(leaderboard="other")))
    submitted = Client(tmp_path, "submit", env, "submit", str(spec))
    ran = Client(tmp_path, "run", env, "run", str(other), "--json")
    submitted.said(WAITING)
    ran.said(WAITING)
    workers.start(env, concurrency=2)  # they wait for Redis too
    down_redis.start()
    code, out, err = submitted.end(timeout=60)
    assert code == 0, err
    waited_and_went_on(err)
    batch_id = out.strip()
    code, out, err = ran.end(timeout=120)
    assert code == 0, err + workers.log_tail()
    waited_and_went_on(err)
    assert json.loads(out)["counts"]["completed"] == json.loads(out)["counts"]["total"] > 0
    db = Store(redis.Redis.from_url(down_redis.url, decode_responses=True))
    assert wait_finished(db, batch_id, timeout=120) == "done"


def test_a_watch_started_during_an_outage_waits_and_goes_on(
    down_redis: RestartableRedis, tmp_path: Path, workers: WorkerPools
):
    env = env_for(down_redis.url, tmp_path)
    down_redis.start()
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(bandit_spec(protocol={"episodes": 4, "seed": 5})))
    submitted = Client(tmp_path, "submit", env, "submit", str(spec))
    code, out, err = submitted.end(timeout=60)
    assert code == 0, err
    batch_id = out.strip()
    down_redis.kill()  # the batch is in its append-only file; nothing has run it yet
    watch = Client(tmp_path, "watch", env, "status", batch_id, "--watch")
    watch.said(WAITING)
    down_redis.start()
    workers.start(env, concurrency=2)
    code, out, err = watch.end(timeout=120)
    assert code == 0, err + workers.log_tail()
    waited_and_went_on(err)
    assert f"batch {batch_id}: done" in out, out


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_redis_that_never_comes_back_is_exit_status_3(tmp_path: Path):
    """ARENA_REDIS_RETRY_S=2 and nothing on the port: status --watch, submit and run on the
    cluster each say they wait, then end with status 3 and one `arena:` line after ~2 s."""
    env = env_for(f"redis://127.0.0.1:{free_port()}/0", tmp_path, retry_s=2)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(bandit_spec()))
    started = time.monotonic()
    clients = [
        Client(tmp_path, "watch", env, "status", "0123abcd", "--watch"),
        Client(tmp_path, "submit", env, "submit", str(spec)),
        Client(tmp_path, "run", env, "run", str(spec), "--json"),
    ]
    for client in clients:
        code, out, err = client.end(timeout=60)
        lines = err.strip().splitlines()
        assert code == 3, (code, err)
        assert len(lines) == 2 and "Traceback" not in err, err
        assert UNREACHABLE in lines[0] and WAITING in lines[0], err
        assert lines[1].startswith(f"arena: {UNREACHABLE}") and "for 2s" in lines[1], err
        assert out == "", out
    assert time.monotonic() - started >= 2
    assert not (tmp_path / "data").exists()  # a cluster command: nothing embedded started


def test_bad_input_during_an_outage_is_still_exit_status_2_at_once(tmp_path: Path):
    """A bad spec is found before anything connects: exit 2 naming it, no wait, never told as an
    outage; a valid one under the same outage is 3 (above), never 2."""
    env = env_for(f"redis://127.0.0.1:{free_port()}/0", tmp_path, retry_s=300)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(bandit_spec(protocol={"episodes": 0})))
    started = time.monotonic()
    for args in (("submit", str(bad)), ("run", str(bad)), ("status", "x", "--watch", "--nope")):
        code, out, err = Client(tmp_path, args[0], env, *args).end(timeout=60)
        assert out == "", out
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("arena: error: "), err
        assert UNREACHABLE not in err and "waiting" not in err, err
    assert time.monotonic() - started < 30  # three starts of the CLI, none waiting 300 s


def listening(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.05)


def test_credentials_redis_refuses_are_bad_input_not_an_outage(tmp_path: Path):
    """A real Redis with a password, asked with the wrong one (and with none): a bad setting,
    exit 2 at once naming ARENA_REDIS_URL (password hidden), never waited for as an outage."""
    port = free_port()
    argv = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    server = subprocess.Popen(
        [*argv, "--requirepass", "s3cret", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    try:
        listening(port)
        for userinfo in (":wrong@", ""):
            env = env_for(f"redis://{userinfo}127.0.0.1:{port}/0", tmp_path)
            code, _, err = Client(tmp_path, "batches", env, "batches").end(timeout=30)
            lines = err.strip().splitlines()
            assert code == 2 and len(lines) == 1, (code, err)
            assert lines[0].startswith("arena: error: ARENA_REDIS_URL: "), err
            assert "refused its credentials" in lines[0] and "wrong" not in lines[0], err
    finally:
        stop(server)
