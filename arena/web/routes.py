"""The HTTP API's routes (docs/api.md): the CLI's batch, leaderboard and race commands over
HTTP, each a top-level function over the service layer. Reads are open; submitting,
cancelling and merging need a bearer token (state.TOKEN) whose role and team allow it
(tasks/teams.py: 403 otherwise; a quota exceeded is a 429)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from starlette.concurrency import run_in_threadpool

from arena.service import batches, boards, races, series
from arena.service.compare import BoardComparison, NotOnBoard, compare_agents, read_series
from arena.service.queue import QueueView, read_queue
from arena.service.runs import RunsView, compare_algorithms
from arena.web.front_door import Redacted
from arena.web.models import (
    BatchDetail,
    Cancelled,
    Health,
    History,
    HistoryPoint,
    Leaderboard,
    Merged,
    RaceResults,
    error_responses,
    leaderboard_json,
)
from arena.web.state import Api, ApiState, Writer, not_found
from tasks.app import QUEUES
from tasks.metrics import ClusterGauges, QueueDepth, TeamUnits
from tasks.records import FINISHED, BatchInfo
from tasks.redact import redact_bytes
from tasks.spec import MAX_SPEC_BYTES
from tasks.store import Store
from tasks.submit import Submission
from tasks.teams import NotAllowed, QuotaExceeded
from tasks.validation import InputError, RunFailed, SpecRefused
from tasks.workloads import validate_batch


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The boards' versions are read on the server's event loop while it serves (Api)."""
    api: Api = app.state.api
    async with api.serving_boards():
        yield


router = APIRouter(lifespan=lifespan)
TEXT: dict[int | str, dict[str, Any]] = {200: {"content": {"text/plain": {}}}}


async def spec_size(request: Request) -> None:
    """A spec is at most MAX_SPEC_BYTES, as `arena submit` reads it (the body itself was capped
    at ARENA_API_MAX_BODY_BYTES while it was read)."""
    if len(await request.body()) > MAX_SPEC_BYTES:
        raise HTTPException(413, f"spec: over {MAX_SPEC_BYTES} bytes")


def metrics_registry(db: Store, teams: Callable[[], list[str]] = list) -> CollectorRegistry:
    """What /metrics reads from Redis: queue depths, batches by status (counted at most every
    so often), the unit counts of the latest batches, in bounded round trips, and each team's
    (`teams`: their names now) units run, submitted, refused and waiting."""
    registry = CollectorRegistry()
    registry.register(QueueDepth(lambda: db.queue_lengths(QUEUES)))
    registry.register(ClusterGauges(db))
    registry.register(TeamUnits(db, teams))
    return registry


def find(api: Api, ref: str) -> BatchInfo:
    try:
        return batches.find_batch(api.db, ref)
    except InputError as exc:
        raise not_found(exc) from None


@router.get("/healthz", response_model=Health, tags=["ops"], responses=error_responses(503))
def healthz(api: ApiState) -> Health:
    """200 when Redis answers, else 503."""
    api.db.ping()
    return Health(status="ok")


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    tags=["ops"],
    responses={**TEXT, **error_responses(503)},
)
def metrics(api: ApiState) -> PlainTextResponse:
    """Prometheus text: this process's metrics, queue depths, batches by status and the
    unit counts of recent batches, read from Redis."""
    text = generate_latest(REGISTRY) + generate_latest(api.metrics)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


@router.get("/batches", response_model=list[BatchInfo], tags=["batches"], name="batches")
def recent(api: ApiState, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> list[BatchInfo]:
    """Recent batches, newest first (`arena batches`)."""
    return batches.recent_batches(api.db, limit)


@router.get(
    "/batches/{batch_id}",
    response_model=BatchDetail,
    tags=["batches"],
    responses=error_responses(404),
)
def batch(api: ApiState, batch_id: str) -> BatchDetail:
    """A batch (id, unique prefix or run id): state, progress, identity, provenance, and
    its report once finished (`arena status`, `arena report`)."""
    info = find(api, batch_id)
    finished = info.status in FINISHED
    report = batches.stored_report(api.settings, api.db, info.id) if finished else None
    notes = batches.running_notes(api.db, info, api.settings)
    return BatchDetail(batch=info, report=report, notes=notes)


@router.delete(
    "/batches/{batch_id}",
    response_model=Cancelled,
    tags=["batches"],
    responses=error_responses(401, 403, 404, 409, 503),
)
def cancel_batch(api: ApiState, batch_id: str, caller: Writer) -> Cancelled:
    """Cancel a running batch (`arena cancel`); 409 if it had already ended. 403: a `submit`
    token may cancel only its own team's batches (an admin's, any)."""
    try:
        resolved, outcome = batches.cancel_batch(api.db, api.batch_id(batch_id), caller)
    except NotAllowed as exc:
        raise HTTPException(403, str(exc)) from None
    if outcome != "cancelled":
        raise HTTPException(409, f"batch {resolved} already ended ({outcome})")
    return Cancelled(batch_id=resolved, status="cancelled")


@router.get(
    "/batches/{batch_id}/logs/{unit}",
    response_class=PlainTextResponse,
    tags=["batches"],
    responses={**TEXT, **error_responses(404)},
)
def unit_log(api: ApiState, batch_id: str, unit: str) -> str:
    """What one unit printed (stdout and stderr), as `arena logs` shows it."""
    resolved = api.batch_id(batch_id)
    text = api.db.unit_log(resolved, unit)
    if text is None:
        raise HTTPException(404, f"log: no output captured for unit {unit!r} of {resolved}")
    return text


@router.post(
    "/batches",
    status_code=202,
    response_model=Submission,
    tags=["batches"],
    dependencies=[Depends(spec_size)],
    responses=error_responses(400, 401, 403, 409, 413, 422, 429, 503),
)
def submit_batch(
    api: ApiState,
    caller: Writer,
    spec: Annotated[Any, Body(description="A batch spec (docs/specs), as JSON.")],
    fresh: bool = False,
    run_id: Annotated[str | None, Query(max_length=64)] = None,
) -> Submission:
    """Queue a batch (`arena submit`), as the token's team's (its weight applies). 422: the
    spec is invalid (the detail names the field) and nothing was stored; 409: it conflicts
    with what the cluster holds; 403: a `read` token; 429: over one of the team's quotas (the
    detail names it and its numbers; Retry-After when the next UTC day helps), nothing
    stored."""
    try:
        batches.check_run_id(run_id)
        batch = validate_batch(spec)
    except InputError as exc:
        raise HTTPException(422, str(exc).replace("--run-id", "run_id")) from None
    try:
        with api.submitting(batch.batch_id):
            return batches.submit_batch(
                api.db, api.settings, batch, fresh, run_id, team=caller.team
            )
    except QuotaExceeded as exc:
        later = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s else None
        raise HTTPException(429, str(exc), headers=later) from None
    except SpecRefused as exc:
        raise HTTPException(422, str(exc)) from None
    except InputError as exc:
        raise HTTPException(409, str(exc).replace("--fresh", "fresh")) from None


@router.get("/leaderboards", response_model=list[str], tags=["leaderboards"])
def leaderboards(api: ApiState) -> list[str]:
    """Every leaderboard's name (`arena leaderboard`)."""
    return api.db.leaderboard_names()


@router.get(
    "/leaderboards/{name}",
    response_model=Leaderboard,
    tags=["leaderboards"],
    responses=error_responses(404),
)
async def leaderboard(api: ApiState, name: str) -> Response:
    """A board's rows in rank order (`arena leaderboard NAME --json`)."""
    # The answer is built once per version of the board (BoardAnswers) and served as bytes,
    # redacted when built: neither validated against the model nor scanned again per request.
    # A kept one costs one GET on the event loop; building one, the thread pool.
    version = await api.board_version(name)
    body = api.boards.get(name, version)
    if body is None:
        body = await run_in_threadpool(board_answer, api, name, version)
    return Redacted(body)


def board_answer(api: Api, name: str, version: str | None) -> bytes:
    """The board's answer built from its rows, kept for `version` (nothing is kept for no
    version: no board, 404)."""
    with api.boards.building(name):
        body = api.boards.get(name, version)  # built by a request that held the lock before
        if body is not None:
            return body
        try:
            board = boards.read_board(api.db, name)
        except InputError as exc:
            raise not_found(exc) from None
        body = redact_bytes(leaderboard_json(name, board.payload()))
        if version is not None:
            # Rows read after the version was: this version's or a later one's, never an
            # earlier one's, so what is kept under it is never older than it.
            api.boards.keep(name, version, body)
        return body


@router.get(
    "/leaderboards/{name}/history/{agent}",
    response_model=History,
    tags=["leaderboards"],
    responses=error_responses(404),
)
def history(api: ApiState, name: str, agent: str) -> History:
    """One point per evaluation of the agent on the board, oldest first."""
    try:
        points = boards.history(api.db, name, agent)
    except InputError as exc:
        raise not_found(exc) from None
    return History(name=name, agent=agent, points=[HistoryPoint(**p) for p in points])


@router.get(
    "/leaderboards/{name}/series/{run}",
    response_model=series.Series,
    tags=["leaderboards"],
    responses=error_responses(404),
)
def run_series(api: ApiState, name: str, run: str) -> series.Series:
    """The learning curve of training run RUN on the board (`arena mario series`): one point
    per checkpoint (agents named `<run>@<steps>`), by training steps, each the checkpoint's
    row: its score and success rate with their 95% intervals, and, after the first, P(it beats
    the previous checkpoint) as GET .../compare answers it (`vs_previous`)."""
    try:
        return read_series(api.db, name, run)
    except InputError as exc:
        raise not_found(exc) from None


@router.get(
    "/leaderboards/{name}/compare",
    response_model=BoardComparison,
    tags=["leaderboards"],
    responses=error_responses(404, 422),
)
def compare(
    api: ApiState,
    name: str,
    a: Annotated[str, Query(description="Agent A: the probability is that A beats B.")],
    b: Annotated[str, Query(description="Agent B, another agent of the board.")],
    seed: Annotated[int, Query(description="The bootstrap's seed.")] = 0,
) -> BoardComparison:
    """P(A beats B) per episode with its stratified bootstrap 95% interval and whether the
    board's episodes separate them (`arena compare NAME A B --json`). 404: no such board or
    agent; 422: a board whose rows keep no per-episode scores (only Mario's do), or A = B."""
    try:
        return compare_agents(api.db, name, a, b, seed=seed)
    except NotOnBoard as exc:
        raise not_found(exc) from None
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None


@router.get(
    "/leaderboards/{name}/compare-runs",
    response_model=RunsView,
    tags=["leaderboards"],
    responses=error_responses(404, 422),
)
def compare_runs(
    api: ApiState,
    name: str,
    a: Annotated[str, Query(description="Algorithm A: its runs are agents A-seed<k>[@<steps>].")],
    b: Annotated[str, Query(description="Algorithm B, another algorithm of the board.")],
    steps: Annotated[
        int | None, Query(ge=0, description="Each run's checkpoint at these steps.")
    ] = None,
    seed: Annotated[int, Query(description="The bootstrap's seed.")] = 0,
) -> RunsView:
    """A's runs against B's as rliable compares them: each IQM over runs × episodes with its
    stratified bootstrap 95% interval, and P(A > B) with its own (`arena compare NAME A B
    --runs --json`). 404: no such board; 422: fewer than 2 runs of A or B, A = B, or a board
    whose rows keep no per-episode scores."""
    try:
        return compare_algorithms(api.db, name, a, b, steps, seed=seed)
    except NotOnBoard as exc:
        raise not_found(exc) from None
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None


def finished_race(api: Api, ref: str) -> tuple[str, BatchInfo]:
    try:
        return races.race_info(api.db, api.batch_id(ref))
    except InputError as exc:
        raise not_found(exc) from None


@router.get(
    "/races/{batch_id}",
    response_model=RaceResults,
    tags=["races"],
    responses=error_responses(404),
)
def race_results(api: ApiState, batch_id: str) -> RaceResults:
    """A finished race's ranking, winner and verdict (`arena race results ID --json`)."""
    _, info = finished_race(api, batch_id)
    return RaceResults(**races.results_payload(info))


@router.post(
    "/races/{batch_id}/merge",
    response_model=Merged,
    tags=["races"],
    responses=error_responses(401, 403, 404, 409, 503),
)
def merge(api: ApiState, batch_id: str, caller: Writer, force: bool = False) -> Merged:
    """Merge the winner into the base branch (`arena race merge`); 409 when it may not, 403
    for a `submit` token of another team than the race's."""
    resolved, info = finished_race(api, batch_id)
    try:
        batches.check_owner(caller, resolved, info.team, "merge")
    except NotAllowed as exc:
        raise HTTPException(403, str(exc)) from None
    try:
        return Merged(batch_id=resolved, message=races.merge_winner(resolved, info, force))
    except RunFailed as exc:
        raise HTTPException(409, str(exc)) from None


@router.get("/queue", response_model=QueueView, tags=["batches"])
def queue(api: ApiState) -> QueueView:
    """The batches each pool runs and those waiting for a slot, in the order the scheduler
    serves them (class, then pass): class, team, weights, share, place in line, progress and
    ETA (`arena queue --json`). Open like every read: it names batches and teams, as GET
    /batches does."""
    return read_queue(api.db)
