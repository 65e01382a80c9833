"""The HTTP agent against a real HTTP server on loopback (a stand-in for a remote LLM agent)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.security.hostile_http import hostile_server
from workers.http_agent import MAX_ANSWER_BYTES, HttpAgent, HttpAgentError

Received: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Received.append(body)
        mode = self.path.strip("/")
        if mode == "slow":
            time.sleep(2)
        if mode == "error":
            self.send_response(500)
            self.end_headers()
            return
        payload = {
            "ok": json.dumps({"action": "C"}),
            "slow": json.dumps({"action": "C"}),
            "not-json": "<html>",
            "no-action": json.dumps({"move": "C"}),
        }[mode].encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except BrokenPipeError:  # the client gave up waiting (the timeout case)
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_agent_posts_the_observation_and_returns_the_action(server: str):
    agent = HttpAgent(f"{server}/ok", timeout_s=2)
    agent.reset("prisoners_dilemma", 0, 42)
    assert agent.act({"round": 3, "history": []}) == "C"
    assert Received[-1] == {
        "game": "prisoners_dilemma",
        "player": 0,
        "seed": 42,
        "observation": {"round": 3, "history": []},
    }
    agent.close()


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("slow", "no answer within 0.5s"),
        ("error", "HTTP 500"),
        ("not-json", "answer is not JSON"),
        ("no-action", 'answer has no "action"'),
    ],
)
def test_faults_raise_a_clear_error(server: str, mode: str, message: str):
    agent = HttpAgent(f"{server}/{mode}", timeout_s=0.5)
    agent.reset("auction", 1, 0)
    with pytest.raises(HttpAgentError, match=message):
        agent.act({})


def test_connection_refused_is_an_agent_error():
    agent = HttpAgent("http://127.0.0.1:9/", timeout_s=1)
    with pytest.raises(HttpAgentError, match="request failed"):
        agent.act({})


def test_an_answer_over_the_cap_is_the_agents_fault_and_read_no_further():
    with hostile_server(flood_bytes=50 << 20) as hostile:
        agent = HttpAgent(f"{hostile.url}/flood", timeout_s=5)
        with pytest.raises(HttpAgentError, match=f"over {MAX_ANSWER_BYTES:,} bytes"):
            agent.act({})
        agent.close()
        time.sleep(0.2)
        assert hostile.sent < 32 << 20, hostile.sent
    assert agent.breaker.failures == 0  # it answered: the endpoint is up, not counted down


def test_a_dripped_answer_ends_at_the_move_timeout():
    """One byte every 0.3 s is within every per-read timeout; the move's is the whole answer's."""
    with hostile_server(drip_s=0.3) as hostile:
        agent = HttpAgent(f"{hostile.url}/drip-body", timeout_s=1)
        started = time.monotonic()
        with pytest.raises(HttpAgentError, match="no answer within 1s"):
            agent.act({})
        assert time.monotonic() - started < 1.5
        agent.close()
