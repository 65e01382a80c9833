"""workers.agent_image.UnixHttp (the agent image's socket) against an agent that drips its
answer over a real unix socket: each exchange ends within its timeout, the whole answer's, not
each receive's (before, each byte within the timeout kept it waiting as long as the agent liked)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.agent_image import AgentImageError, ImageAgent, UnixHttp

OK = b'HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{"action": 0}'


@pytest.fixture
def dripping_agent(tmp_path: Path) -> Iterator[Path]:
    """Answers its first request at once, then drips every later answer a byte per 0.2 s."""
    path = tmp_path / "agent.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            answered = 0
            while not stop.is_set() and conn.recv(65536):
                if answered == 0:
                    conn.sendall(OK)
                else:
                    for byte in OK:
                        if stop.wait(0.2):
                            return
                        conn.sendall(bytes([byte]))
                answered += 1

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    stop.set()
    listener.close()
    thread.join(timeout=5)


def test_a_dripped_answer_ends_at_the_step_timeout(dripping_agent: Path) -> None:
    http = UnixHttp(dripping_agent, timeout_s=1)
    agent = ImageAgent(http, container=None, image="local", timeout_s=1)
    assert agent.act({}) == 0  # the keep-alive connection answers in time
    started = time.monotonic()
    with pytest.raises(AgentImageError, match="no answer within 1s"):
        agent.act({})
    assert time.monotonic() - started < 1.5
    http.close()
