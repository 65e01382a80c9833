"""The HTTP API (`arena api`, docs/api.md): the CLI's batch, leaderboard and race commands over
HTTP, on the cluster's Redis. Reads are open; submitting, cancelling and merging need a bearer
token from ARENA_API_TOKENS. `python -m arena.api > docs/openapi.json` publishes its schema."""

import hmac
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import redis
from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from arena import page
from arena.api_models import (
    SPEC_MODEL,
    BatchDetail,
    Cancelled,
    Error,
    Health,
    History,
    HistoryPoint,
    Leaderboard,
    Merged,
    RaceResults,
    error_responses,
)
from arena.batch_cmds import check_run_id, stored_report
from arena.race_cmd import merge_winner, race_info, results_payload
from arena.tables import ranked
from tasks.metrics import QueueDepth
from tasks.records import FINISHED, BatchInfo
from tasks.settings import ArenaSettings, load_settings
from tasks.spec import MAX_SPEC_BYTES
from tasks.store import Store
from tasks.validation import InputError, RunFailed
from tasks.workloads import get_workload, validate_batch

TOKENS_SETTING = "ARENA_API_TOKENS"
RECENT_BATCHES = 20  # batches whose unit counts /metrics shows
BATCH_STATUSES = ("running", "done", "incomplete", "failed", "cancelled")


@dataclass
class Api:
    settings: ArenaSettings
    db: Store
    submitting: threading.Lock = field(default_factory=threading.Lock)

    def batch_id(self, ref: str) -> str:
        """A batch id, unique prefix or run id -> the id; 404 naming it otherwise."""
        try:
            return self.db.resolve(ref)
        except InputError as exc:
            raise HTTPException(404, str(exc)) from None

    def info(self, ref: str) -> BatchInfo:
        info = self.db.batch(self.batch_id(ref))
        if info is None:
            raise HTTPException(404, f"batch: no batch {ref!r}")
        return info


bearer = HTTPBearer(auto_error=False, description=f"A token from {TOKENS_SETTING}.")


def token_check(settings: ArenaSettings) -> Any:
    """The dependency of write endpoints: 503 when no token is configured (never open by
    default), 401 for a missing or wrong one; every configured token is compared in constant
    time, all of them whatever matches."""
    tokens = [t.encode() for t in settings.api_token_list()]

    def require_token(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        if not tokens:
            raise HTTPException(503, f"{TOKENS_SETTING} is not set: the API takes no writes")
        given = credentials.credentials.encode() if credentials else b""
        matched = False
        for token in tokens:
            matched |= hmac.compare_digest(given, token)
        if not matched:
            raise HTTPException(
                401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"}
            )

    return Depends(require_token)


async def spec_size(request: Request) -> None:
    """A spec is at most MAX_SPEC_BYTES, as `arena submit` reads it."""
    if len(await request.body()) > MAX_SPEC_BYTES:
        raise HTTPException(413, f"spec: over {MAX_SPEC_BYTES} bytes")


class ClusterGauges(Collector):
    """Read from Redis at scrape time: batches by status and the unit counts of recent ones."""

    def __init__(self, db: Store) -> None:
        self.db = db

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ids = list(self.db.r.zrange(f"{self.db.p}batches", 0, -1))
        with self.db.r.pipeline() as pipe:
            for batch_id in ids:
                pipe.hget(self.db.k_batch(batch_id), "status")
            statuses = pipe.execute()
        by_status = GaugeMetricFamily(
            "arena_batches_stored", "Batches kept in Redis, by status.", labels=["status"]
        )
        for status in BATCH_STATUSES:
            by_status.add_metric([status], sum(s == status for s in statuses))
        yield by_status
        units = GaugeMetricFamily(
            "arena_batch_units",
            f"Units of the {RECENT_BATCHES} latest batches: total, completed, errors.",
            labels=["batch", "workload", "batch_status", "count"],
        )
        for batch_id in self.db.batch_ids(RECENT_BATCHES):
            info = self.db.batch(batch_id)
            if info is None:
                continue
            labels = [info.id, info.workload, info.status]
            for name in ("total", "completed", "errors"):
                units.add_metric([*labels, name], getattr(info, name))
        yield units


def metrics_text(db: Store) -> bytes:
    from tasks.app import QUEUES

    registry = CollectorRegistry()
    registry.register(QueueDepth(lambda: {q: int(db.r.llen(q)) for q in QUEUES}))
    registry.register(ClusterGauges(db))
    return generate_latest(REGISTRY) + generate_latest(registry)


def batch_routes(app: FastAPI, api: Api, token: Any) -> None:
    @app.get("/batches", response_model=list[BatchInfo], tags=["batches"])
    def batches(limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> list[BatchInfo]:
        """Recent batches, newest first (`arena batches`)."""
        return [i for i in (api.db.batch(b) for b in api.db.batch_ids(limit)) if i is not None]

    @app.get("/batches/{batch_id}", response_model=BatchDetail, tags=["batches"],
             responses=error_responses(404))  # fmt: skip
    def batch(batch_id: str) -> BatchDetail:
        """A batch (id, unique prefix or run id): state, progress, identity, provenance, and
        its report once finished (`arena status`, `arena report`)."""
        info = api.info(batch_id)
        finished = info.status in FINISHED
        report = stored_report(api.settings, api.db, info.id) if finished else None
        return BatchDetail(batch=info, report=report)

    @app.delete("/batches/{batch_id}", response_model=Cancelled, tags=["batches"],
                dependencies=[token], responses=error_responses(401, 404, 409, 503))  # fmt: skip
    def cancel_batch(batch_id: str) -> Cancelled:
        """Cancel a running batch (`arena cancel`); 409 if it had already ended."""
        from tasks.submit import cancel

        resolved = api.batch_id(batch_id)
        outcome = cancel(api.db, resolved)
        if outcome != "cancelled":
            raise HTTPException(409, f"batch {resolved} already ended ({outcome})")
        return Cancelled(batch_id=resolved, status="cancelled")

    @app.get("/batches/{batch_id}/logs/{unit}", response_class=PlainTextResponse,
             tags=["batches"], responses={200: {"content": {"text/plain": {}}},
                                          **error_responses(404)})  # fmt: skip
    def unit_log(batch_id: str, unit: str) -> str:
        """What one unit printed (stdout and stderr), as `arena logs` shows it."""
        resolved = api.batch_id(batch_id)
        text = api.db.logs(resolved).get(unit)
        if text is None:
            raise HTTPException(404, f"log: no output captured for unit {unit!r} of {resolved}")
        return text


def submit_route(app: FastAPI, api: Api, token: Any) -> None:
    from tasks.submit import Submission

    @app.post("/batches", status_code=202, response_model=Submission, tags=["batches"],
              dependencies=[token, Depends(spec_size)],
              responses=error_responses(400, 401, 409, 413, 422, 503))  # fmt: skip
    def submit_batch(
        spec: Annotated[Any, Body(description="A batch spec (docs/specs), as JSON.")],
        fresh: bool = False,
        run_id: Annotated[str | None, Query(max_length=64)] = None,
    ) -> Submission:
        """Queue a batch (`arena submit`). 422: the spec is invalid (the detail names the
        field) and nothing was stored; 409: it conflicts with what the cluster holds."""
        from tasks.submit import submit

        try:
            check_run_id(run_id)
            batch = validate_batch(spec)
        except InputError as exc:
            raise HTTPException(422, str(exc).replace("--run-id", "run_id")) from None
        try:
            with api.submitting:
                return submit(api.db, batch, fresh, run_id=run_id,
                              visibility_timeout_s=api.settings.visibility_timeout_s)  # fmt: skip
        except InputError as exc:
            raise HTTPException(409, str(exc).replace("--fresh", "fresh")) from None


def board_rows(db: Store, name: str) -> list[dict[str, Any]]:
    """The rows `arena leaderboard NAME --json` prints (cluster_cmd.leaderboard_table), without
    what only the terminal needs: the rich table, the rubric's text, and the whole record of
    the batch (its entries and their provenance), read there for its workload's name alone."""
    rows = db.leaderboard(name)
    workload = db.r.hget(db.k_batch(rows[0].batch), "workload") if rows else None
    ordered = ranked(rows, get_workload(workload) if workload else None)
    return [{"rank": rank, **row.model_dump()} for rank, row in enumerate(ordered, start=1)]


def board_routes(app: FastAPI, api: Api) -> None:
    def known(name: str) -> None:
        if name not in api.db.leaderboard_names():
            raise HTTPException(404, f"leaderboard: no leaderboard {name!r}")

    @app.get("/leaderboards", response_model=list[str], tags=["leaderboards"])
    def leaderboards() -> list[str]:
        """Every leaderboard's name (`arena leaderboard`)."""
        return api.db.leaderboard_names()

    @app.get("/leaderboards/{name}", response_model=Leaderboard, tags=["leaderboards"],
             responses=error_responses(404))  # fmt: skip
    def leaderboard(name: str) -> Leaderboard:
        """A board's rows in rank order (`arena leaderboard NAME --json`)."""
        known(name)
        return Leaderboard(name=name, entries=board_rows(api.db, name))

    @app.get("/leaderboards/{name}/history/{agent}", response_model=History,
             tags=["leaderboards"], responses=error_responses(404))  # fmt: skip
    def history(name: str, agent: str) -> History:
        """One point per evaluation of the agent on the board, oldest first."""
        known(name)
        points = api.db.history(name, agent)
        if not points:
            raise HTTPException(404, f"history: no agent {agent!r} on leaderboard {name!r}")
        return History(name=name, agent=agent, points=[HistoryPoint(**p) for p in points])


def race_routes(app: FastAPI, api: Api, token: Any) -> None:
    def race(ref: str) -> tuple[str, BatchInfo]:
        try:
            return race_info(api.db, api.batch_id(ref))
        except InputError as exc:
            raise HTTPException(404, str(exc)) from None

    @app.get("/races/{batch_id}", response_model=RaceResults, tags=["races"],
             responses=error_responses(404))  # fmt: skip
    def race_results(batch_id: str) -> RaceResults:
        """A finished race's ranking, winner and verdict (`arena race results ID --json`)."""
        _, info = race(batch_id)
        return RaceResults(**results_payload(info))

    @app.post("/races/{batch_id}/merge", response_model=Merged, tags=["races"],
              dependencies=[token], responses=error_responses(401, 404, 409, 503))  # fmt: skip
    def merge(batch_id: str, force: bool = False) -> Merged:
        """Merge the winner into the base branch (`arena race merge`); 409 when it may not."""
        resolved, info = race(batch_id)
        try:
            return Merged(batch_id=resolved, message=merge_winner(resolved, info, force))
        except RunFailed as exc:
            raise HTTPException(409, str(exc)) from None


def ops_routes(app: FastAPI, api: Api) -> None:
    @app.get("/healthz", response_model=Health, tags=["ops"], responses=error_responses(503))
    def healthz() -> Health:
        """200 when Redis answers, else 503."""
        api.db.r.ping()
        return Health(status="ok")

    @app.get("/metrics", response_class=PlainTextResponse, tags=["ops"],
             responses={200: {"content": {"text/plain": {}}}, **error_responses(503)})  # fmt: skip
    def metrics() -> PlainTextResponse:
        """Prometheus text: this process's metrics, queue depths, batches by status and the
        unit counts of recent batches, read from Redis."""
        return PlainTextResponse(metrics_text(api.db), media_type="text/plain; version=0.0.4")


def lost_redis(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": f"Redis unreachable: {' '.join(str(exc).split())}"}, 503)


async def allow_every_method(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """A 405's Allow header lists every method of the path (Starlette's names one route's)."""
    response = await call_next(request)
    if response.status_code == 405:
        routes = [r for r in request.app.routes if isinstance(r, APIRoute)]
        path = request.url.path
        methods = {m for r in routes if r.path_regex.match(path) for m in r.methods or ()}
        response.headers["Allow"] = ", ".join(sorted(methods))
    return response


def create_app(settings: ArenaSettings) -> FastAPI:
    """The API on settings.redis_url (required)."""
    from tasks.app import configure, store

    configure(settings)
    api = Api(settings, store(settings, retry_s=0))
    app = FastAPI(title="Arena", version="1", description="docs/api.md")
    app.add_exception_handler(redis.ConnectionError, lost_redis)
    app.add_exception_handler(redis.TimeoutError, lost_redis)
    app.middleware("http")(allow_every_method)
    token = token_check(settings)
    ops_routes(app, api)
    batch_routes(app, api, token)
    submit_route(app, api, token)
    board_routes(app, api)
    race_routes(app, api, token)
    page.register(app, api)
    publish_spec_schema(app)
    return app


def publish_spec_schema(app: FastAPI) -> None:
    """POST /batches reads its body as JSON and validates it as `arena submit` does (a workload
    may accept a shorthand first); the schema shows the spec's model (BatchSpec)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version,
                             description=app.description, routes=app.routes)  # fmt: skip
        spec = SPEC_MODEL.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(spec.pop("$defs", {}))
        components[SPEC_MODEL.__name__] = spec
        body = schema["paths"]["/batches"]["post"]["requestBody"]["content"]["application/json"]
        body["schema"] = {"$ref": f"#/components/schemas/{SPEC_MODEL.__name__}"}
        components["Error"] = Error.model_json_schema()
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def published_schema() -> dict[str, Any]:
    """The schema as docs/openapi.json holds it (no Redis needed to build it)."""
    settings = load_settings().model_copy(update={"redis_url": "redis://localhost:6379/0"})
    return create_app(settings).openapi()


if __name__ == "__main__":  # python -m arena.api > docs/openapi.json
    print(json.dumps(published_schema(), indent=2))
