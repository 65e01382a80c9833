"""HTTP from the worker to an endpoint someone else runs (an HTTP agent, an llm endpoint), with
every answer bounded in size and every request held to a total deadline.

Size: the body is read while streaming and refused as soon as it passes the caller's cap, the
rest unread. `Accept-Encoding: identity` is asked for and an answer that is compressed anyway
is refused, so the bytes counted are the bytes kept (a 64 KiB gzip chunk can inflate to 64 MB
in one decoder call).

Time: httpx's timeouts are per socket operation, so an endpoint that drips one byte every few
seconds (each read within its timeout) holds a request for as long as it likes. Here every
connect, read and write a request makes is given min(its own timeout, what is left of the
request's deadline), and none starts once the deadline has passed. That is done in httpcore's
documented extension point for I/O (a NetworkBackend passed to `httpcore.ConnectionPool`),
through a transport of our own (httpx.BaseTransport, the documented way to plug one into
httpx.Client), so it holds for the status line, the headers and the body alike, on
keep-alive connections too. The alternative, a watchdog thread that shuts the socket at the
deadline, needs the socket before the answer's headers, which httpx exposes only after them.
The deadline lives in a ContextVar: each thread (and each asyncio task) has its own.

Proxies: httpx reads HTTP_PROXY and the like only for its own transport, so this one reads them
itself (`environment_proxy`, urllib's reading of the variables, NO_PROXY included) and sends
through an httpcore.HTTPProxy held to the same deadline; SOCKS proxies are not supported.

Not covered: the name lookup inside connect (a spec's host names a resolvable host; the
connect timeout bounds the TCP part).
"""

from __future__ import annotations

import math
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import httpcore
import httpx

WRITE_PIECE = 16 << 10  # a write is cut in pieces, each held to what is left of the deadline
DEADLINE_PASSED = "the deadline for the whole answer passed"
IDENTITY = {"Accept-Encoding": "identity"}  # the size cap counts the bytes as they arrive

T = TypeVar("T")
_deadline: ContextVar[float] = ContextVar("arena_http_deadline", default=math.inf)


class AnswerTooLarge(ValueError):
    """The answer passed the cap (or was compressed, so its size is unknown): the sender's
    fault; the rest was not read."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every HTTP operation this thread starts inside the block ends by `seconds` from now (or
    by an enclosing block's deadline, if sooner), with a timeout error."""
    token = _deadline.set(min(_deadline.get(), time.monotonic() + seconds))
    try:
        yield
    finally:
        _deadline.reset(token)


def _left(timeout: float | None, expired: type[httpcore.TimeoutException]) -> float:
    left = _deadline.get() - time.monotonic()
    if left <= 0:
        raise expired(DEADLINE_PASSED)
    return left if timeout is None else min(timeout, left)


def _held(
    timeout: float | None,
    expired: type[httpcore.TimeoutException],
    operation: Callable[[float], T],
) -> T:
    """`operation(wait)`, wait being what is left of its timeout and the deadline; a timeout
    that the deadline shortened says so."""
    wait = _left(timeout, expired)
    try:
        return operation(wait)
    except expired:
        if timeout is None or wait < timeout:
            raise expired(DEADLINE_PASSED) from None
        raise


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return _held(timeout, httpcore.ReadTimeout, partial(self._inner.read, max_bytes))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        for start in range(0, len(buffer), WRITE_PIECE):
            piece = buffer[start : start + WRITE_PIECE]
            _held(timeout, httpcore.WriteTimeout, partial(self._inner.write, piece))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        start = partial(self._inner.start_tls, ssl_context, server_hostname)
        return _DeadlineStream(_held(timeout, httpcore.ConnectTimeout, start))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sync backend, every operation held to the current deadline."""

    def __init__(self, inner: httpcore.NetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        def connect(wait: float) -> httpcore.NetworkStream:
            return self._inner.connect_tcp(host, port, wait, local_address, socket_options)

        return _DeadlineStream(_held(timeout, httpcore.ConnectTimeout, connect))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        def connect(wait: float) -> httpcore.NetworkStream:
            return self._inner.connect_unix_socket(path, wait, socket_options)

        return _DeadlineStream(_held(timeout, httpcore.ConnectTimeout, connect))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@contextmanager
def _as_httpx(request: httpx.Request) -> Iterator[None]:
    """httpcore's errors as httpx's (each httpcore error class has its namesake in httpx), so
    callers catch httpx.TimeoutException and httpx.TransportError as with httpx's own transport."""
    try:
        yield
    except httpcore.TimeoutException as exc:
        raise getattr(httpx, type(exc).__name__, httpx.TimeoutException)(
            str(exc), request=request
        ) from exc
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
        raise getattr(httpx, type(exc).__name__, httpx.TransportError)(
            str(exc), request=request
        ) from exc


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes], request: httpx.Request) -> None:
        self._stream, self._request = stream, request

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx(self._request):
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            with _as_httpx(self._request):
                close()


def environment_proxy(url: httpx.URL) -> str | None:
    """The proxy the environment names for `url` (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, less
    NO_PROXY), as httpx's own transport would use it; None: straight to the endpoint."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(url.host):
        return None
    return proxy


def _proxy_pool(proxy: str) -> httpcore.HTTPProxy:
    """A pool through an HTTP proxy, its I/O held to the deadline like the direct one (a proxy
    that drips is as slow as an endpoint that does)."""
    parsed = httpx.URL(proxy)
    if parsed.scheme not in ("http", "https"):
        raise httpx.UnsupportedProtocol(f"a {parsed.scheme} proxy is not supported: {proxy!r}")
    auth = (parsed.username, parsed.password) if parsed.username else None
    return httpcore.HTTPProxy(
        proxy_url=str(parsed.copy_with(username=None, password=None)),
        proxy_auth=auth,
        ssl_context=httpx.create_ssl_context(),
        network_backend=DeadlineBackend(),
    )


class DeadlineTransport(httpx.BaseTransport):
    """An httpx transport over httpcore pools whose I/O keeps to the current deadline: one
    straight to endpoints, one per proxy the environment names."""

    def __init__(self) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            network_backend=DeadlineBackend(),
        )
        self._proxies: dict[str, httpcore.HTTPProxy] = {}

    def _pool_for(self, url: httpx.URL) -> httpcore.ConnectionPool:
        proxy = environment_proxy(url)
        if proxy is None:
            return self._pool
        if proxy not in self._proxies:
            self._proxies[proxy] = _proxy_pool(proxy)
        return self._proxies[proxy]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        url = request.url
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx(request):
            answer = self._pool_for(url).handle_request(sent)
        assert isinstance(answer.stream, Iterable)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream, request),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        for pool in (self._pool, *self._proxies.values()):
            pool.close()


def bounded_client(timeout_s: float, headers: dict[str, str] | None = None) -> httpx.Client:
    """An httpx.Client for endpoints from outside: `timeout_s` per operation (the deadline of
    each request is the caller's, see `fetch`), asking for answers uncompressed."""
    return httpx.Client(
        timeout=timeout_s, headers={**IDENTITY, **(headers or {})}, transport=DeadlineTransport()
    )


@dataclass(frozen=True)
class Answer:
    status: int
    headers: httpx.Headers
    body: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300


def fetch(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    max_bytes: int,
    deadline_s: float,
    **request: Any,
) -> Answer:
    """One request and its whole answer, within `deadline_s` from now (else an
    httpx.TimeoutException) and `max_bytes` of body (else AnswerTooLarge). A client from
    `bounded_client`, or the deadline holds only between reads."""
    with deadline(deadline_s), client.stream(method, url, **request) as response:
        body = read_capped(response, max_bytes)
    return Answer(response.status_code, response.headers, body)


def read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    """The body of a streamed response, refused past `max_bytes` without reading further."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise AnswerTooLarge(f"the answer is compressed ({encoding}) though identity was asked")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise AnswerTooLarge(
            f"the answer is over {max_bytes:,} bytes (the cap): it declares {int(declared):,}"
        )
    body = bytearray()
    for chunk in response.iter_raw():
        body += chunk
        if len(body) > max_bytes:
            raise AnswerTooLarge(
                f"the answer is over {max_bytes:,} bytes (the cap): not read further"
            )
    return bytes(body)
