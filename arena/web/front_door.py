"""The API's front door (docs/api.md; docs/security.md, "The API"): one pure ASGI middleware
around the whole app, so a request spends nothing before Arena knows who asks.

- A write (POST, PUT, PATCH, DELETE) needs a valid bearer token of a role that may write
  (tasks/teams.py: `submit` or `admin`; `read` is a 403) before a byte of its body is read:
  FastAPI reads a body before it runs a route's dependencies, so a token check there came
  after the parse (one unauthenticated 300 MB POST took the API from 78 MB to 893 MB).
- An authorised body is read here, at most ARENA_API_MAX_BODY_BYTES of it (413 beyond, as soon
  as a Content-Length or the bytes read say so), and handed on.
- Every answer gets the security headers; a JSON, text or HTML answer is redacted
  (tasks/redact.py: Redis keeps what was submitted, readers see no secret).
- A 405 lists every method of its path in Allow (Starlette's names one route's).
- An answer Arena redacted when it built it (Redacted, below: a board's cached answer) is not
  scanned again on every request; it still gets every header.

Pure ASGI rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware costs a quarter
of a bare app's requests per second.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import HTTPException
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security.utils import get_authorization_scheme_param
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tasks.redact import redact_bytes, redact_value
from tasks.teams import Caller, TeamDirectory, identify
from tasks.validation import InputError

TOKENS_SETTING = "ARENA_API_TOKENS"
# Where the front door leaves the caller of a write for its route (scope["state"], which
# Starlette's Request.state reads).
CALLER = "arena_caller"
BODY_SETTING = "ARENA_API_MAX_BODY_BYTES"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Always sent. The API serves no page meant to be framed, and no link of the page needs to
# tell another site where it came from.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
# A JSON or text answer is no document: it may load nothing and be framed nowhere.
API_CSP = b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'"
# Answers whose bytes are redacted; others (a GIF, Swagger UI's JavaScript) pass as they are.
REDACTED_TYPES = (b"application/json", b"text/plain", b"text/html")
# The key of an answer's start message that says its bytes went through redact_bytes already
# (Redacted); the front door takes it out before the server sees the message.
ALREADY_REDACTED = "arena.redacted"


class Tokens:
    """The bearer tokens: each of ARENA_API_TOKENS an `admin` of no team, and the teams file's
    (ARENA_TEAMS_FILE, tasks/teams.py: digests only, read again when it changes). Compared in
    constant time, every one of them whatever matches (tasks.teams.identify)."""

    def __init__(self, tokens: Sequence[str], teams: TeamDirectory | None = None) -> None:
        self._tokens = [t.encode() for t in tokens]
        self.teams = teams

    def caller(self, authorization: str | None) -> Caller | HTTPException:
        """Who the token belongs to; else why it is refused: 503 when no token is configured
        (the API is never open for writes by default) or the teams file went bad, 401 for a
        missing, wrong or revoked one."""
        if not self._tokens and self.teams is None:
            return HTTPException(503, f"{TOKENS_SETTING} is not set: the API takes no writes")
        scheme, credentials = get_authorization_scheme_param(authorization)
        given = credentials if scheme.lower() == "bearer" else ""
        teams, problem = None, None
        try:
            teams = self.teams.current() if self.teams is not None else None
        except InputError as exc:
            problem = exc
        found = identify(given, self._tokens, teams) if given else None
        if found is not None:
            return found
        if problem is not None:
            return HTTPException(503, f"{problem}: no team token is taken until it is fixed")
        return HTTPException(
            401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"}
        )

    def writer(self, authorization: str | None) -> Caller | HTTPException:
        """The caller of a write: a valid token whose role may write (`read`'s may not: 403)."""
        found = self.caller(authorization)
        if isinstance(found, Caller) and found.role == "read":
            return HTTPException(
                403,
                f"{found.describe()}: a read token may not submit, cancel or merge "
                "(that takes role submit or admin)",
            )
        return found


class RedactedJSON(JSONResponse):
    """The JSON answer of a route (the app's default): its strings redacted as raw values
    (tasks/redact.py) before they are encoded, since escaping respells a secret (a password
    with a quote in it); the front door's pass on the bytes stays as the last line."""

    def render(self, content: Any) -> bytes:
        return super().render(redact_value(content))


class Redacted(Response):
    """A JSON answer of bytes that went through redact_bytes when they were built (and kept):
    the front door adds its headers but does not scan them again. Redacting a board of 1,000
    rows (0.8 MB) costs ~4 ms, ten times what FastAPI takes to serve it (docs/api.md). Only
    for bytes given by redact_bytes."""

    media_type = "application/json"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, ALREADY_REDACTED: True}
            await send(message)

        await super().__call__(scope, receive, marked)


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


class FrontDoor:
    """The middleware (see the module's docstring). `page_csp`: the Content-Security-Policy of
    an HTML answer that sets none itself (arena/web/page.py's)."""

    def __init__(self, app: ASGIApp, tokens: Tokens, max_body_bytes: int, page_csp: str) -> None:
        self.app = app
        self.tokens = tokens
        self.max_body_bytes = max_body_bytes
        self.page_csp = page_csp.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answer = Answer(scope, send, self.page_csp)
        if scope["method"] in WRITES:
            admitted = await self.admit(scope, receive)
            if admitted is None:
                return  # the client left: nobody to answer
            if isinstance(admitted, HTTPException):
                # Connection: close, or the server would go on taking the unread body.
                headers = {**(admitted.headers or {}), "Connection": "close"}
                response = JSONResponse({"detail": admitted.detail}, admitted.status_code, headers)
                await response(scope, receive, answer.send)
                return
            receive = replay(admitted, receive)
        await self.app(scope, receive, answer.send)

    async def admit(self, scope: Scope, receive: Receive) -> bytes | HTTPException | None:
        """A write's body, once its token is valid and its role may write, read up to the cap;
        else why it is refused (None: the client left while sending it). The caller goes to
        the route in the scope's state (CALLER)."""
        caller = self.tokens.writer(header(scope, b"authorization"))
        if isinstance(caller, HTTPException):
            return caller
        scope.setdefault("state", {})[CALLER] = caller
        try:
            return await read_body(receive, content_length(scope), self.max_body_bytes)
        except ClientGone:
            return None
        except BodyTooLarge:
            return HTTPException(413, f"body: over {self.max_body_bytes} bytes ({BODY_SETTING})")


class Answer:
    """The `send` of one request: headers added to the start of the answer; a redacted
    answer's start is held until its body is known (its length may change)."""

    def __init__(self, scope: Scope, send: Send, page_csp: bytes) -> None:
        self.scope, self._send, self.page_csp = scope, send, page_csp
        self._held: Message | None = None
        self._chunks: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers, redacted = self._headers(message)
            start = {**message, "headers": headers}
            if start.pop(ALREADY_REDACTED, False):
                redacted = False
            if redacted:
                self._held = start
            else:
                await self._send(start)
        elif message["type"] == "http.response.body" and self._held is not None:
            self._chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                await self._flush()
        else:
            await self._send(message)

    def _headers(self, start: Message) -> tuple[list[tuple[bytes, bytes]], bool]:
        headers: list[tuple[bytes, bytes]] = list(start.get("headers", ()))
        names = {name.lower() for name, _ in headers}
        kind = next((v for n, v in headers if n.lower() == b"content-type"), b"")
        headers.extend(h for h in SECURITY_HEADERS if h[0] not in names)
        if b"content-security-policy" not in names and not kind.startswith(b"image/"):
            csp = self.page_csp if kind.startswith(b"text/html") else API_CSP
            headers.append((b"content-security-policy", csp))
        if start["status"] == 405:
            headers = [(n, v) for n, v in headers if n.lower() != b"allow"]
            headers.append((b"allow", ", ".join(path_methods(self.scope)).encode()))
        return headers, kind.startswith(REDACTED_TYPES)

    async def _flush(self) -> None:
        assert self._held is not None
        body = b"".join(self._chunks)
        redacted = redact_bytes(body)
        start = self._held
        if redacted is not body:
            start["headers"] = [
                (n, str(len(redacted)).encode() if n.lower() == b"content-length" else v)
                for n, v in start["headers"]
            ]
        await self._send(start)
        await self._send({"type": "http.response.body", "body": redacted})


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def content_length(scope: Scope) -> int | None:
    value = header(scope, b"content-length")
    return int(value) if value is not None and value.strip().isdigit() else None


async def read_body(receive: Receive, declared: int | None, limit: int) -> bytes:
    """The request's body, at most `limit` bytes: BodyTooLarge as soon as the declared length
    or the bytes read pass it (nothing more is read)."""
    if declared is not None and declared > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A `receive` that gives the app the body already read, then the client's own messages
    (a disconnect)."""
    given = False

    async def again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


def path_methods(scope: Scope) -> list[str]:
    """Every method the app's routes answer on the request's path (a 405's Allow)."""
    app = scope.get("app")
    answered = getattr(app, "answered_routes", None)
    routes = (
        answered()
        if answered
        else [r for r in getattr(app, "routes", ()) if isinstance(r, APIRoute)]
    )
    path = scope["path"]
    return sorted({m for r in routes if r.path_regex.match(path) for m in r.methods or ()})
