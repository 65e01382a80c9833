"""workers/bounded_http.py against a hostile HTTP server on the loopback (tests/security/
hostile_http.py): a request ends by its deadline however the answer is paced, and a body is
refused past its cap without reading the rest."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.security.hostile_http import HostileServer, hostile_server
from workers.bounded_http import AnswerTooLarge, bounded_client, deadline, fetch

CAP = 1 << 20


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with hostile_server(drip_s=0.2) as hostile:
        yield hostile


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with bounded_client(timeout_s=1.0) as http:
        yield http


@pytest.mark.parametrize("path", ["/drip-head", "/drip-body"])
def test_a_dripped_answer_ends_at_the_deadline(
    server: HostileServer, client: httpx.Client, path: str
) -> None:
    """Each byte comes within the 1 s per-read timeout; only the deadline ends the request."""
    started = time.monotonic()
    with pytest.raises(httpx.TimeoutException, match="deadline"):
        fetch(client, "GET", server.url + path, max_bytes=CAP, deadline_s=1.5)
    took = time.monotonic() - started
    assert 1.4 < took < 2.0, took
    assert server.sent >= 3  # it did drip, and was listened to until the deadline


def test_a_kept_alive_connection_keeps_to_the_next_deadline(
    server: HostileServer, client: httpx.Client
) -> None:
    assert fetch(client, "GET", server.url + "/ok", max_bytes=CAP, deadline_s=1).body
    started = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        fetch(client, "GET", server.url + "/drip-body", max_bytes=CAP, deadline_s=1)
    assert time.monotonic() - started < 1.5
    assert fetch(client, "GET", server.url + "/ok", max_bytes=CAP, deadline_s=1).is_success


def test_an_inner_deadline_never_extends_the_outer_one(
    server: HostileServer, client: httpx.Client
) -> None:
    started = time.monotonic()
    with deadline(0.8), pytest.raises(httpx.TimeoutException):
        fetch(client, "GET", server.url + "/drip-body", max_bytes=CAP, deadline_s=30)
    assert time.monotonic() - started < 1.3


def test_a_passed_deadline_sends_nothing(server: HostileServer, client: httpx.Client) -> None:
    with deadline(0), pytest.raises(httpx.TimeoutException):
        fetch(client, "GET", server.url + "/ok", max_bytes=CAP, deadline_s=5)
    assert server.requests == 0


def test_a_flood_is_refused_past_the_cap_unread(
    server: HostileServer, client: httpx.Client
) -> None:
    """600 MiB offered, no Content-Length: the client stops a little past 1 MiB (what the
    kernel's buffers held beyond it is all the server got rid of)."""
    with pytest.raises(AnswerTooLarge, match="over 1,048,576 bytes"):
        fetch(client, "GET", server.url + "/flood", max_bytes=CAP, deadline_s=10)
    time.sleep(0.2)
    assert server.sent < 32 << 20, server.sent


def test_a_declared_length_over_the_cap_is_refused_before_reading(
    server: HostileServer, client: httpx.Client
) -> None:
    with pytest.raises(AnswerTooLarge, match="declares 2,097,152"):
        fetch(client, "GET", server.url + "/declared", max_bytes=CAP, deadline_s=5)


def test_a_compressed_answer_is_refused(server: HostileServer, client: httpx.Client) -> None:
    """Identity is asked for; a gzip answer's decoded size is unknown until decoded."""
    with pytest.raises(AnswerTooLarge, match="compressed"):
        fetch(client, "GET", server.url + "/gzip", max_bytes=CAP, deadline_s=5)


def test_refused_connections_are_httpx_errors() -> None:
    with bounded_client(1.0) as http, pytest.raises(httpx.ConnectError):
        fetch(http, "GET", "http://127.0.0.1:9/", max_bytes=CAP, deadline_s=2)


def test_the_environments_proxy_is_used_and_held_to_the_deadline(
    server: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker behind an egress proxy reaches endpoints through it (HTTP_PROXY, as httpx's own
    transport would), and a proxy that drips ends at the deadline like an endpoint that does;
    NO_PROXY still goes straight."""
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", server.url)
    with bounded_client(timeout_s=1.0) as proxied:
        answer = fetch(proxied, "GET", "http://endpoint.invalid/ok", max_bytes=CAP, deadline_s=2)
        assert answer.is_success and server.targets[-1] == "http://endpoint.invalid/ok"
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException, match="deadline"):
            fetch(proxied, "GET", "http://endpoint.invalid/drip-body", max_bytes=CAP, deadline_s=1)
        assert time.monotonic() - started < 1.5
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with bounded_client(timeout_s=1.0) as direct:
        assert fetch(direct, "GET", server.url + "/ok", max_bytes=CAP, deadline_s=2).is_success
        assert server.targets[-1] == "/ok"
