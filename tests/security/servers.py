"""The real Redis an attack aims at: a password, a loopback TCP port and a unix socket anyone
may use (the easiest target a hostile agent could hope for)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from arena.embedded import redis_server_binary


@dataclass
class RedisServer:
    port: int
    socket: Path
    client: redis.Redis


@contextmanager
def password_redis(folder: Path, password: str) -> Iterator[RedisServer]:
    folder.mkdir(parents=True, exist_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sock = folder / "redis.sock"
    server = subprocess.Popen(
        [
            redis_server_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--requirepass",
            password,
            "--unixsocket",
            str(sock),
            "--unixsocketperm",
            "777",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port, password=password, decode_responses=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield RedisServer(port, sock, client)
    finally:
        server.kill()
        server.wait()
