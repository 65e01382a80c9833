"""workers.unix_http.UnixHttp (the agent image's socket) against a hostile agent on a real unix
socket: each exchange ends within its timeout, the whole answer's, not each receive's (before,
an answer dripped a byte at a time within the timeout kept the worker as long as the agent
liked); an answer is bounded in total, chunked or not, headers included; what is not HTTP is
the agent's fault, never the worker's error."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from workers.agent_image import AgentImageError, ImageAgent
from workers.unix_http import MAX_ANSWER, MAX_HEADERS, UnixHttp

OK = b'HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{"action": 0}'
Answer = Callable[[socket.socket, threading.Event], None]


def ok(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(OK)


def drip(conn: socket.socket, stop: threading.Event) -> None:
    for byte in OK:
        if stop.wait(0.2):
            return
        conn.sendall(bytes([byte]))


def chunk_flood(conn: socket.socket, stop: threading.Event) -> None:
    """Chunks of 1 MiB, each under the cap, without end."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"100000\r\n" + b"x" * (1 << 20) + b"\r\n"
    while not stop.is_set():
        conn.sendall(chunk)


def header_flood(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for n in range(100_000):
        conn.sendall(b"X-%d: %s\r\n" % (n, b"y" * 1000))


def bad_length(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: lots\r\n\r\n{}")


@pytest.fixture
def agent_socket(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """`serve(answer, ...)`: a socket whose successive requests get the answers given."""
    path = tmp_path / "agent.sock"
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def serve(*answers: Answer) -> Path:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen()

        def run() -> None:
            with listener:
                conn, _ = listener.accept()
                with conn:
                    for answer in answers:
                        if stop.is_set() or not conn.recv(65536):
                            return
                        try:
                            answer(conn, stop)
                        except OSError:  # the worker hung up: what the test wants
                            return

        threads.append(threading.Thread(target=run, daemon=True))
        threads[-1].start()
        return path

    yield serve
    stop.set()
    for thread in threads:
        thread.join(timeout=5)


def test_a_dripped_answer_ends_at_the_step_timeout(agent_socket: Callable[..., Path]) -> None:
    http = UnixHttp(agent_socket(ok, drip), timeout_s=1)
    agent = ImageAgent(http, container=None, image="local", timeout_s=1)
    assert agent.act({}) == 0  # the keep-alive connection answers in time
    started = time.monotonic()
    with pytest.raises(AgentImageError, match="no answer within 1s"):
        agent.act({})
    assert time.monotonic() - started < 1.5
    http.close()


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (chunk_flood, f"a chunked answer over {MAX_ANSWER:,} bytes"),
        (header_flood, f"more than {MAX_HEADERS} headers"),
        (bad_length, "invalid literal for int"),
    ],
)
def test_an_answer_past_the_bounds_is_the_agents_fault(
    agent_socket: Callable[..., Path], answer: Answer, why: str
) -> None:
    http = UnixHttp(agent_socket(answer), timeout_s=10)
    agent = ImageAgent(http, container=None, image="local", timeout_s=10)
    started = time.monotonic()
    with pytest.raises(AgentImageError, match=why):
        agent.act({})
    assert time.monotonic() - started < 5
    http.close()
