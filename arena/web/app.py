"""The HTTP API's app (`arena api`, docs/api.md): the routes (routes.py) and the page (page.py)
on the cluster's Redis, behind the front door (front_door.py). `python -m arena.web.app >
docs/openapi.json` publishes its schema."""

import json
import re
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import redis
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from prometheus_client import Counter
from starlette.types import ASGIApp

from arena.service.replays import Busy, Replays
from arena.web import batch_page, page, pictures, routes
from arena.web.front_door import FrontDoor, RedactedJSON, Tokens
from arena.web.html import csp_hash
from arena.web.models import SPEC_MODEL, Error
from arena.web.state import Api
from tasks.app import configure, store
from tasks.refusal import refused_writes
from tasks.settings import ArenaSettings, load_settings
from tasks.teams import TeamDirectory, open_teams
from tasks.validation import InputError

REPLAYS = Counter(
    "arena_api_replays",
    "Replays the page was asked for, by outcome: played (the emulator ran), cached, busy "
    "(refused: too many playing).",
    ["outcome"],
)

DOCS_SETTING = "ARENA_API_DOCS"


def lost_redis(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": f"Redis unreachable: {' '.join(str(exc).split())}"}, 503)


def busy(_: Request, exc: Exception) -> JSONResponse:
    """As many replays playing as may: 503 with Retry-After, not another emulator queued."""
    retry_after = str(Busy.retry_after_s)
    return JSONResponse({"detail": str(exc)}, 503, headers={"Retry-After": retry_after})


def refusing_redis(_: Request, exc: Exception) -> JSONResponse:
    """Redis up but refusing writes (out of memory, a replica): 503 with why, not a 500."""
    return JSONResponse({"detail": refused_writes(exc) or "Redis refused the command"}, 503)


class ArenaApp(FastAPI):
    """FastAPI behind the front door: it wraps the whole middleware stack, so even an answer
    that Starlette's error middleware writes gets the security headers."""

    front_door: tuple[Tokens, int, str] | None = None
    included: tuple[APIRouter, ...] = ()

    def include_router(self, router: APIRouter, *args: Any, **kwargs: Any) -> None:
        super().include_router(router, *args, **kwargs)
        self.included += (router,)

    def answered_routes(self) -> list[APIRoute]:
        """Every route this app answers (a 405's Allow header lists their methods): the
        routers' own lists, which FastAPI's included routers no longer flatten into .routes."""
        routers = [self.router, *self.included]
        return [r for router in routers for r in router.routes if isinstance(r, APIRoute)]

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        if self.front_door is None:
            return stack
        tokens, max_body_bytes, page_csp = self.front_door
        return FrontDoor(stack, tokens, max_body_bytes, page_csp)


def create_app(settings: ArenaSettings) -> FastAPI:
    """The API on settings.redis_url (required)."""
    configure(settings)
    db = store(settings, retry_s=0)
    teams = open_teams(settings.teams_file)
    tokens = Tokens(settings.api_token_list(), teams)
    replays = Replays(count=lambda outcome: REPLAYS.labels(outcome).inc())
    # /docs only when the operator asks (ARENA_API_DOCS), from Arena's own files; no /redoc.
    app = ArenaApp(
        title="Arena",
        version="1",
        description="docs/api.md",
        docs_url=None,
        redoc_url=None,
        default_response_class=RedactedJSON,  # secrets out of the raw values (tasks/redact.py)
    )
    metrics = routes.metrics_registry(db, team_names(teams))
    app.state.api = Api(settings, db, tokens, metrics, replays)
    app.front_door = (tokens, settings.api_max_body_bytes, page.PAGE_CSP)
    app.add_exception_handler(redis.ConnectionError, lost_redis)
    app.add_exception_handler(redis.TimeoutError, lost_redis)
    for refusal in (redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError):
        app.add_exception_handler(refusal, refusing_redis)
    app.add_exception_handler(Busy, busy)
    app.include_router(routes.router)
    app.include_router(page.router)
    app.include_router(pictures.router)
    app.include_router(batch_page.router)
    if settings.api_docs:
        docs_route(app)
    publish_spec_schema(app)
    return app


def team_names(teams: TeamDirectory | None) -> Callable[[], list[str]]:
    """The teams /metrics shows: the teams file's now (none while it is bad)."""

    def names() -> list[str]:
        if teams is None:
            return []
        try:
            return [team.name for team in teams.current().teams]
        except InputError:
            return []

    return names


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


def docs(request: Request) -> HTMLResponse:
    """/docs (only when ARENA_API_DOCS is on): Swagger UI, built once by docs_route."""
    page_html, policy = request.app.state.docs_page
    return HTMLResponse(page_html, headers={"Content-Security-Policy": policy})


def docs_route(app: FastAPI) -> None:
    """/docs: Swagger UI on /openapi.json, every file from this server; its one inline script
    is admitted by hash in the page's Content-Security-Policy."""
    app.mount("/docs/assets", StaticFiles(directory=swagger_assets()), name="docs-assets")
    page_html = bytes(
        get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="Arena API",
            oauth2_redirect_url=None,
            swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # else it asks validator.swagger.io
        ).body
    ).decode()
    scripts = re.findall(r"<script>(.*?)</script>", page_html, flags=re.DOTALL)
    hashes = " ".join(csp_hash(script) for script in scripts)
    policy = (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
    app.state.docs_page = (page_html, policy)
    app.add_api_route("/docs", docs, response_class=HTMLResponse, include_in_schema=False)


def publish_spec_schema(app: FastAPI) -> None:
    """POST /batches reads its body as JSON and validates it as `arena submit` does (a workload
    may accept a shorthand first); the schema shows the spec's model (BatchSpec)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
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


if __name__ == "__main__":  # python -m arena.web.app > docs/openapi.json
    print(json.dumps(published_schema(), indent=2))
