"""What every route of one API process shares (the store, the settings, the replays kept, the
submissions in flight, the boards' encoded answers), and the dependencies that hand it to a
route."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, cast
from weakref import WeakValueDictionary

import redis.asyncio
from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CollectorRegistry
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from starlette.concurrency import run_in_threadpool

from arena.service import boards
from arena.service.replays import Replays
from arena.web.front_door import CALLER, TOKENS_SETTING, Tokens
from tasks.redis_url import async_client
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.teams import TEAMS_SETTING, Caller
from tasks.validation import InputError

# The boards' answers one API process keeps: a 1,000-row board is ~0.8 MiB of JSON.
BOARD_ANSWERS_MAX_BYTES = 64 * 2**20


class BoardAnswers:
    """The answer of GET /leaderboards/{name} as bytes (encoded, redacted), per board, with the
    board's version it was built from (arena/service/boards.py, board_version): served as it is
    while the version stays, so a read costs one GET instead of reading, ranking and encoding
    every row. A batch published to the board gives it a new version, so the next read builds
    the answer anew. At most `max_bytes` kept: the board kept longest goes first."""

    def __init__(self, max_bytes: int = BOARD_ANSWERS_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._kept: dict[str, tuple[str, bytes]] = {}
        self._size = 0
        self._guard = threading.Lock()
        self._building: WeakValueDictionary[str, threading.Lock] = WeakValueDictionary()

    def get(self, name: str, version: str | None) -> bytes | None:
        """The answer built from this version of the board, if kept."""
        kept = self._kept.get(name)
        return kept[1] if version is not None and kept is not None and kept[0] == version else None

    def keep(self, name: str, version: str, body: bytes) -> None:
        with self._guard:
            old = self._kept.pop(name, None)
            self._size -= len(old[1]) if old else 0
            if len(body) > self.max_bytes:
                return
            self._kept[name] = (version, body)
            self._size += len(body)
            while self._size > self.max_bytes:
                self._size -= len(self._kept.pop(next(iter(self._kept)))[1])

    def building(self, name: str) -> threading.Lock:
        """One build of a board's answer at a time: the requests that arrive while it is built
        (all of them, right after a batch is published) wait for it instead of each building
        their own."""
        with self._guard:
            lock = self._building.get(name)
            if lock is None:
                lock = self._building[name] = threading.Lock()
            return lock


@dataclass
class Api:
    settings: ArenaSettings
    db: Store
    tokens: Tokens
    metrics: CollectorRegistry  # what /metrics reads from Redis (routes.metrics_registry)
    replays: Replays = field(default_factory=Replays)
    boards: BoardAnswers = field(default_factory=BoardAnswers)
    # The server's event loop and a Redis client on it, for its lifespan (serving_boards).
    _on_loop: tuple[asyncio.AbstractEventLoop, redis.asyncio.Redis] | None = None
    _submitting: WeakValueDictionary[str, threading.Lock] = field(
        default_factory=WeakValueDictionary
    )
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def submitting(self, batch_id: str) -> threading.Lock:
        """One submission of a batch at a time (in this process): submit() reads the batch's
        state, then writes it and fans its units out, and two identical specs at once would
        both fan out every unit. Batches share no such state (a board is claimed atomically),
        so different ones are submitted in parallel: a 100,000-unit batch holds up nobody
        else's while it expands and publishes."""
        with self._guard:
            lock = self._submitting.get(batch_id)
            if lock is None:
                lock = self._submitting[batch_id] = threading.Lock()
            return lock

    async def board_version(self, name: str) -> str | None:
        """The board's version (arena/service/boards.py), read on the event loop by the
        server's own client: a kept answer is then served without a trip through the thread
        pool, which under load costs more than all the rest of such a request. On a loop that
        has no client (a TestClient used without `with`), the Store's GET in the thread pool."""
        bound = self._on_loop
        if bound is not None and bound[0] is asyncio.get_running_loop():
            return cast("str | None", await bound[1].get(boards.version_key(self.db, name)))
        return await run_in_threadpool(boards.board_version, self.db, name)

    @asynccontextmanager
    async def serving_boards(self) -> AsyncIterator[None]:
        """The server's lifespan (routes.py): a redis.asyncio client on its event loop, on the
        Store's Redis and, like the Store of the API, not retrying (a lost Redis is a 503)."""
        if not self.settings.redis_url:
            yield
            return
        client = async_client(
            self.settings.redis_url,
            self.settings.redis_master,
            decode_responses=True,
            retry=Retry(NoBackoff(), 0),
        )
        self._on_loop = (asyncio.get_running_loop(), client)
        try:
            yield
        finally:
            self._on_loop = None
            await client.aclose()

    def batch_id(self, ref: str) -> str:
        """A batch id, unique prefix or run id -> the id; 404 naming it otherwise."""
        try:
            return self.db.resolve(ref)
        except InputError as exc:
            raise HTTPException(404, str(exc)) from None


async def api_of(request: Request) -> Api:
    """Async, so FastAPI calls it on the event loop: a plain function dependency costs every
    request a trip through the thread pool (~0.1 ms of CPU alone, more under load: as much
    as serving a board's kept answer, bench/api_load.py)."""
    api: Api = request.app.state.api
    return api


ApiState = Annotated[Api, Depends(api_of)]
bearer = HTTPBearer(
    auto_error=False,
    description=f"A token of {TOKENS_SETTING} (an admin) or of a team ({TEAMS_SETTING}).",
)


def require_token(
    request: Request,
    api: ApiState,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """The dependency of write endpoints: who asks. The front door (front_door.py) has already
    refused a request without a valid token of a role that may write, before reading its
    body, and left its caller in the scope; this says so in the OpenAPI schema and keeps a
    route safe if it is ever served without the front door."""
    caller = getattr(request.state, CALLER, None)
    if isinstance(caller, Caller):
        return caller
    given = f"Bearer {credentials.credentials}" if credentials else None
    found = api.tokens.writer(given)
    if isinstance(found, HTTPException):
        raise found
    return found


TOKEN = Depends(require_token)
Writer = Annotated[Caller, TOKEN]


def not_found(exc: InputError) -> HTTPException:
    return HTTPException(404, str(exc))
