"""The HTTP API (`arena api`, docs/api.md): the CLI's batch, leaderboard and race commands over
HTTP, on the cluster's Redis. Reads are open; submitting, cancelling and merging need a bearer
token from ARENA_API_TOKENS. `python -m arena.api > docs/openapi.json` publishes its schema."""

import json
import re
import threading
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any
from weakref import WeakValueDictionary

import redis
from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from starlette.types import ASGIApp

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
from arena.front_door import TOKENS_SETTING, FrontDoor, Tokens
from arena.race_cmd import merge_winner, race_info, results_payload
from arena.replays import Replays
from arena.tables import ranked
from tasks.metrics import ClusterGauges, QueueDepth
from tasks.records import FINISHED, BatchInfo
from tasks.refusal import refused_writes
from tasks.settings import ArenaSettings, load_settings
from tasks.spec import MAX_SPEC_BYTES
from tasks.store import Store
from tasks.validation import InputError, RunFailed
from tasks.workloads import get_workload, validate_batch

DOCS_SETTING = "ARENA_API_DOCS"


@dataclass
class Api:
    settings: ArenaSettings
    db: Store
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

    def info(self, ref: str) -> BatchInfo:
        info = self.db.batch(self.batch_id(ref))
        if info is None:
            raise HTTPException(404, f"batch: no batch {ref!r}")
        return info


bearer = HTTPBearer(auto_error=False, description=f"A token from {TOKENS_SETTING}.")


def token_check(tokens: Tokens) -> Any:
    """The dependency of write endpoints. The front door (arena/front_door.py) has already
    refused a request without a valid token before reading its body; this says so in the
    OpenAPI schema and keeps a route safe if it is ever served without the front door."""

    def require_token(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        given = f"Bearer {credentials.credentials}" if credentials else None
        refused = tokens.refusal(given)
        if refused is not None:
            raise refused

    return Depends(require_token)


async def spec_size(request: Request) -> None:
    """A spec is at most MAX_SPEC_BYTES, as `arena submit` reads it (the body itself was capped
    at ARENA_API_MAX_BODY_BYTES while it was read)."""
    if len(await request.body()) > MAX_SPEC_BYTES:
        raise HTTPException(413, f"spec: over {MAX_SPEC_BYTES} bytes")


def metrics_registry(db: Store) -> CollectorRegistry:
    """What /metrics reads from Redis: queue depths, batches by status (counted at most every
    so often) and the unit counts of the latest batches, in bounded round trips."""
    from tasks.app import QUEUES

    registry = CollectorRegistry()
    registry.register(QueueDepth(lambda: {q: int(db.r.llen(q)) for q in QUEUES}))
    registry.register(ClusterGauges(db))
    return registry


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
        text = api.db.unit_log(resolved, unit)
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
            with api.submitting(batch.batch_id):
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
    registry = metrics_registry(api.db)

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
        text = generate_latest(REGISTRY) + generate_latest(registry)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


def lost_redis(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": f"Redis unreachable: {' '.join(str(exc).split())}"}, 503)


def refusing_redis(_: Request, exc: Exception) -> JSONResponse:
    """Redis up but refusing writes (out of memory, a replica): 503 with why, not a 500."""
    return JSONResponse({"detail": refused_writes(exc) or "Redis refused the command"}, 503)


class ArenaApp(FastAPI):
    """FastAPI behind the front door: it wraps the whole middleware stack, so even an answer
    that Starlette's error middleware writes gets the security headers."""

    front_door: tuple[Tokens, int, str] | None = None

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        if self.front_door is None:
            return stack
        tokens, max_body_bytes, page_csp = self.front_door
        return FrontDoor(stack, tokens, max_body_bytes, page_csp)


def create_app(settings: ArenaSettings) -> FastAPI:
    """The API on settings.redis_url (required)."""
    from tasks.app import configure, store

    configure(settings)
    api = Api(settings, store(settings, retry_s=0))
    # /docs only when the operator asks (ARENA_API_DOCS), from Arena's own files; no /redoc.
    app = ArenaApp(title="Arena", version="1", description="docs/api.md", docs_url=None,
                   redoc_url=None)  # fmt: skip
    app.state.api = api
    tokens = Tokens(settings.api_token_list())
    app.front_door = (tokens, settings.api_max_body_bytes, page.PAGE_CSP)
    app.add_exception_handler(redis.ConnectionError, lost_redis)
    app.add_exception_handler(redis.TimeoutError, lost_redis)
    for refusal in (redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError):
        app.add_exception_handler(refusal, refusing_redis)
    token = token_check(tokens)
    ops_routes(app, api)
    batch_routes(app, api, token)
    submit_route(app, api, token)
    board_routes(app, api)
    race_routes(app, api, token)
    page.register(app, api)
    if settings.api_docs:
        docs_route(app)
    publish_spec_schema(app)
    return app


def swagger_assets() -> Path:
    """Swagger UI's files as the fastapi-offline package ships them (so /docs loads nothing
    from a CDN)."""
    try:
        folder = Path(str(files("fastapi_offline") / "static"))
    except ModuleNotFoundError:
        raise InputError(
            f"{DOCS_SETTING}: /docs serves Swagger UI from the fastapi-offline package, which "
            "is not installed (pip install fastapi-offline)"
        ) from None
    return folder


def docs_route(app: FastAPI) -> None:
    """/docs: Swagger UI on /openapi.json, every file from this server; its one inline script
    is admitted by hash in the page's Content-Security-Policy."""
    app.mount("/docs/assets", StaticFiles(directory=swagger_assets()), name="docs-assets")
    page_html = bytes(get_swagger_ui_html(
        openapi_url="/openapi.json", title="Arena API", oauth2_redirect_url=None,
        swagger_js_url="/docs/assets/swagger-ui-bundle.js",
        swagger_css_url="/docs/assets/swagger-ui.css",
        swagger_favicon_url="/docs/assets/favicon.png",
        swagger_ui_parameters={"validatorUrl": None},  # else it asks validator.swagger.io
    ).body).decode()  # fmt: skip
    scripts = re.findall(r"<script>(.*?)</script>", page_html, flags=re.DOTALL)
    hashes = " ".join(page.csp_hash(script) for script in scripts)
    policy = (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(page_html, headers={"Content-Security-Policy": policy})


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
    settings = load_settings().model_copy(
        update={"redis_url": "redis://localhost:6379/0", "api_docs": False}
    )
    return create_app(settings).openapi()


if __name__ == "__main__":  # python -m arena.api > docs/openapi.json
    print(json.dumps(published_schema(), indent=2))
