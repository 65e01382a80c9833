"""The HTTP API's request and response models (docs/api.md): most are the CLI's own models
(BatchInfo, Report, Submission, BatchSpec); these wrap them where the API needs a shape."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter

from arena.service.reports import Report
from tasks.spec import BatchSpec
from tasks.store import BatchInfo, BatchStatus


class Error(BaseModel):
    """Every 4xx and 503 body: what went wrong, naming the field, batch or board."""

    detail: str | list[dict[str, Any]]


class Health(BaseModel):
    status: str


class BatchDetail(BaseModel):
    """A batch's state, progress counts, identity and provenance (`batch`), and its report
    (the same model as `arena report`) once it has finished."""

    batch: BatchInfo
    report: Report | None
    # What holds it up while it runs (`arena status`'s lines under its status): units held by
    # a lost worker, Redis refusing writes or failing to save them to disk.
    notes: list[str] = []


class Cancelled(BaseModel):
    batch_id: str
    status: BatchStatus


class Leaderboard(BaseModel):
    """The rows `arena leaderboard NAME --json` prints: {"rank", "agent", "score", ...}."""

    name: str
    entries: list[dict[str, Any]]


LEADERBOARD = TypeAdapter(Leaderboard)


def leaderboard_json(name: str, entries: list[dict[str, Any]]) -> bytes:
    """The answer of GET /leaderboards/{name}, as FastAPI would write it from a Leaderboard
    (the same pydantic serialiser, byte for byte) without validating the rows Arena built."""
    return LEADERBOARD.dump_json(Leaderboard.model_construct(name=name, entries=entries))


class HistoryPoint(BaseModel):
    batch: str
    score: float
    at: float


class History(BaseModel):
    name: str
    agent: str
    points: list[HistoryPoint]


class RaceResults(BaseModel):
    """`arena race results ID --json`: the batch id and the race's summary (ranking, winner,
    verdict, ...)."""

    model_config = ConfigDict(extra="allow")

    batch_id: str


class Merged(BaseModel):
    batch_id: str
    message: str


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error responses of a route: all JSON, the Error body (spelled out, so a
    text/plain route does not give its errors its own media type)."""
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    return {code: {"description": "Error", "content": body} for code in codes}


SPEC_MODEL = BatchSpec
