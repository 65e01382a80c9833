"""A Redis that fails over (issue 34, Build 2): a real primary, two real replicas and three
real Sentinels, all the redis-server binary on loopback ports, real Celery workers and a real
batch; replication stalled for a second (the replicas reach the primary through a relay the
test stalls), then the primary SIGKILLed mid-batch. The Sentinels promote a replica, every client
(workers, reducer, the test's own Store) finds it through them, and the batch ends `done` with
every unit equal to an undisturbed run's.

With ARENA_REDIS_WAIT_REPLICAS=1 no write that counted is lost (a chunk's results are on a
replica before its message is acknowledged). Without it, what the primary had not yet sent to
a replica is lost (docs/deploy.md): the replica holds an earlier moment of the primary, so a
lost result's message is still unacknowledged there and its chunk runs again. Two replicas, so
WAIT 1 still has one once a replica is promoted. Before this (c3f317a) ARENA_REDIS_URL refused
sentinel:// at all ("must start with redis://, rediss:// or unix://")."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
import redis
from redis.backoff import ConstantBackoff
from redis.retry import Retry

from arena.embedded import redis_server_binary
from tasks.execute import execute_batch
from tasks.redis_url import ReplicasBehind, WaitRule
from tasks.redis_url import client as redis_client
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tests.integration.conftest import ROOT, WorkerPools, wait_finished
from tests.integration.test_cluster import cluster_leaderboard, submit
from tests.integration.test_faults import QUICK_LIVENESS, slow_spec, wait_stored

pytestmark = [pytest.mark.integration, pytest.mark.faults]

MASTER, PASSWORD = "arena", "failover-test-pw"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StallableLink:
    """A TCP relay the replicas reach the primary through. Stalled, it drops what the primary
    sends them (a slow or broken link): they fall behind while the primary goes on."""

    def __init__(self, target: int) -> None:
        self.target, self.stalled = target, threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                replica, _ = self.listener.accept()
                primary = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                if self.listener.fileno() < 0:
                    return
                continue
            for src, dst, down in ((replica, primary, False), (primary, replica, True)):
                threading.Thread(target=self._pump, args=(src, dst, down), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, down: bool) -> None:
        try:
            while data := src.recv(65536):
                if not (down and self.stalled.is_set()):
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for end in (src, dst):
                with suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


class Replicated:
    """A primary, two replicas of it and three Sentinels watching them (quorum 2)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.servers: dict[int, subprocess.Popen[bytes]] = {}
        self.primary = free_port()
        self.replicas = [free_port(), free_port()]
        self.sentinels = [free_port(), free_port(), free_port()]
        self.link = StallableLink(self.primary)
        self.url = ";".join(f"sentinel://:{PASSWORD}@127.0.0.1:{p}/0" for p in self.sentinels)

    def _start(self, port: int, argv: list[str]) -> None:
        log = open(self.folder / f"{port}.log", "wb")  # noqa: SIM115 (the child keeps it)
        self.servers[port] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def start(self) -> None:
        binary = redis_server_binary()
        auth = ["--requirepass", PASSWORD, "--masterauth", PASSWORD, "--save", ""]
        for port in [self.primary, *self.replicas]:
            folder = self.folder / str(port)
            folder.mkdir()
            argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)]
            if port != self.primary:
                argv += ["--replicaof", "127.0.0.1", str(self.link.port)]
            self._start(port, argv + auth)
        for port in self.sentinels:
            conf = self.folder / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.folder}\nrequirepass {PASSWORD}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary} 2\n"
                f"sentinel auth-pass {MASTER} {PASSWORD}\nsentinel sentinel-pass {PASSWORD}\n"
                f"sentinel down-after-milliseconds {MASTER} 2000\n"
                f"sentinel failover-timeout {MASTER} 60000\n"
            )
            self._start(port, [binary, str(conf), "--sentinel"])
        self._wait_watched()

    def ask(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, password=PASSWORD, decode_responses=True, socket_timeout=2)

    def _wait_watched(self, timeout: float = 30) -> None:
        """Until every Sentinel knows both replicas (in sync) and the other two Sentinels."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ready = all(
                    len(self.ask(p).sentinel_sentinels(MASTER)) == 2
                    and sum(
                        r["master-link-status"] == "ok" for r in self.ask(p).sentinel_slaves(MASTER)
                    )
                    == 2
                    for p in self.sentinels
                )
            except redis.RedisError:
                ready = False
            if ready:
                return
            time.sleep(0.2)
        raise AssertionError("the Sentinels did not see both replicas and each other in time")

    def primary_port(self) -> int:
        return int(self.ask(self.sentinels[0]).sentinel_get_master_addr_by_name(MASTER)[1])

    def stall_replication(self) -> None:
        """The replicas get nothing more from the primary: the kill below loses writes."""
        self.link.stalled.set()

    def behind(self, key: str) -> int:
        """Fields of hash `key` the primary holds that the most advanced replica lacks."""
        on_primary = self.ask(self.primary).hlen(key)
        return int(on_primary) - max(int(self.ask(port).hlen(key)) for port in self.replicas)

    def kill_primary(self) -> None:
        server = self.servers[self.primary]
        server.send_signal(signal.SIGKILL)
        server.wait(10)

    def stop(self) -> None:
        self.link.close()
        for server in self.servers.values():
            if server.poll() is None:
                server.kill()
                server.wait(10)


def assert_unit_by_unit_undisturbed(db: Store, batch_id: str, spec: dict) -> None:
    """Every unit stored once with the undisturbed run's result (this process, no Celery), the
    board its reduction, one history point per agent. Unit ids are compared without their
    batch id: that covers the code's fingerprint, taken from the files on disk by `arena`."""
    batch = validate_batch(spec)
    results = execute_batch(batch)
    expected = {r.unit_id.split(":", 1)[1]: (r.status, r.result) for r in results}
    stored = {
        unit_id.split(":", 1)[1]: (r.status, r.result)
        for unit_id, r in db.unit_results(batch_id).items()
    }
    assert json.loads(json.dumps(stored)) == json.loads(json.dumps(expected))  # as stored
    entries = get_workload("bandit").reduce(batch, results).entries
    board = json.loads(json.dumps({e.agent: e.stats for e in entries}))
    assert cluster_leaderboard(db, "it") == board
    for agent in board:
        assert len(db.history("it", agent)) == 1


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[Replicated]:
    cluster = Replicated(tmp_path / "replicated")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.parametrize("wait_replicas", [1, 0], ids=["wait", "no-wait"])
def test_the_primary_killed_mid_batch_fails_over(
    replicated: Replicated, tmp_path: Path, workers: WorkerPools, write_spec, wait_replicas: int
):
    env = {
        **os.environ,
        **QUICK_LIVENESS,
        "ARENA_REDIS_URL": replicated.url,
        "ARENA_REDIS_MASTER": MASTER,
        "ARENA_REDIS_WAIT_REPLICAS": str(wait_replicas),
        "ARENA_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
    }
    # The test's own reads ride the failover out as every client does (a second apart).
    retry = Retry(ConstantBackoff(0.5), 60)
    db = Store(
        redis_client(
            replicated.url,
            MASTER,
            decode_responses=True,
            retry=retry,
            retry_on_error=[redis.ConnectionError, redis.TimeoutError],
        )
    )
    spec = slow_spec()
    workers.start(env, concurrency=2, restart=True)
    batch_id = submit(env, write_spec, spec)
    wait_stored(db, batch_id, 120)
    replicated.stall_replication()
    time.sleep(1)
    lost = replicated.behind(db.k_units(batch_id))  # results the promoted replica will lack
    replicated.kill_primary()
    killed = time.monotonic()
    assert wait_finished(db, batch_id, timeout=120) == "done", workers.log_tail()
    ended = time.monotonic() - killed
    assert replicated.primary_port() in replicated.replicas
    assert_unit_by_unit_undisturbed(db, batch_id, spec)
    if wait_replicas:  # each worker process stops at its first write no replica holds
        assert lost <= 2 * 10, lost  # 2 processes, a chunk of 10 units at most
    else:  # stored, acknowledged, lost with the primary: run again
        assert lost > 0
    print(f"FAILOVER wait={wait_replicas}: done {ended:.1f}s after the kill; {lost} results lost")


def test_a_write_counts_once_a_replica_holds_it(tmp_path: Path):
    """ARENA_REDIS_WAIT_REPLICAS: a Store transaction on a primary with no replica is an error
    (retried like an outage by the Store's client), never counted; once a replica is attached
    the same transaction returns, and the replica already holds it when it does."""
    binary, ports = redis_server_binary(), [free_port(), free_port()]
    servers = []
    try:
        for port in ports:
            argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
            servers.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, cwd=tmp_path))
        primary = redis_client(
            f"redis://127.0.0.1:{ports[0]}/0",
            MASTER,
            WaitRule(1, 100),
            decode_responses=True,
            retry=Retry(ConstantBackoff(0), 0),
            retry_on_error=[redis.ConnectionError],
        )
        replica = redis.Redis(port=ports[1], decode_responses=True)
        deadline = time.monotonic() + 10
        while not _answers(primary) or not _answers(replica):
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        with pytest.raises(ReplicasBehind, match="0 of 1 replicas"), primary.pipeline() as pipe:
            pipe.hset("results", "unit-1", "ok").execute()
        with primary.pipeline() as pipe:  # reads wait for no replica
            assert pipe.hget("results", "unit-1").hlen("results").execute() == ["ok", 1]
        replica.replicaof("127.0.0.1", ports[0])
        while replica.info("replication")["master_link_status"] != "up":
            assert time.monotonic() < deadline + 10, "the replica did not attach"
            time.sleep(0.05)
        with primary.pipeline() as pipe:
            pipe.hset("results", "unit-2", "ok").execute()
        assert replica.hgetall("results") == {"unit-1": "ok", "unit-2": "ok"}
    finally:
        for server in servers:
            server.kill()
            server.wait(10)


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
