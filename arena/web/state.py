"""What every route of one API process shares (the store, the settings, the replays kept, the
submissions in flight), and the dependencies that hand it to a route."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Annotated
from weakref import WeakValueDictionary

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CollectorRegistry

from arena.service.replays import Replays
from arena.web.front_door import TOKENS_SETTING, Tokens
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.validation import InputError


@dataclass
class Api:
    settings: ArenaSettings
    db: Store
    tokens: Tokens
    metrics: CollectorRegistry  # what /metrics reads from Redis (routes.metrics_registry)
    replays: Replays = field(default_factory=Replays)
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
bearer = HTTPBearer(auto_error=False, description=f"A token from {TOKENS_SETTING}.")


def require_token(
    api: ApiState,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """The dependency of write endpoints. The front door (front_door.py) has already refused a
    request without a valid token before reading its body; this says so in the OpenAPI schema
    and keeps a route safe if it is ever served without the front door."""
    given = f"Bearer {credentials.credentials}" if credentials else None
    refused = api.tokens.refusal(given)
    if refused is not None:
        raise refused


TOKEN = Depends(require_token)


def not_found(exc: InputError) -> HTTPException:
    return HTTPException(404, str(exc))
