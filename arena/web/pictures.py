"""The pictures over HTTP (docs/api.md, "Pictures"): every chart of the web page as SVG and as
PNG, for reports, and a batch's report file as a download. The numbers come from the service
layer (arena/service/pictures.py, batch_view.py); the drawing is arena/web/charts/.

A picture is kept by its numbers (charts/cache.py) and carries them as its ETag: a browser
that has it gets a 304, and a board that did not move costs its Redis reads, not a drawing.
An SVG's own Content-Security-Policy lets it style itself (matplotlib writes style
attributes) and nothing else: no script, no request, no frame."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from arena.service import batches, pictures, races
from arena.service.batch_view import timeline
from arena.service.boards import read_board
from arena.service.compare import series_picture
from arena.service.pictures import BoardKind
from arena.service.reports import Report
from arena.web.charts.cache import KEPT, Format, picture_key
from arena.web.models import error_responses
from arena.web.state import Api, ApiState, not_found
from tasks.validation import InputError

router = APIRouter()
TAGS: list[str | Any] = ["pictures"]
SVG, PNG = "image/svg+xml", "image/png"
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
AgentQuery = Annotated[
    str | None,
    Query(max_length=64, description="The trend of this agent alone (other kinds: its row)."),
]
RunQuery = Annotated[
    str | None,
    Query(max_length=64, description="series: the learning curve of this training run alone."),
]


def image(media_type: str, what: str) -> dict[int | str, dict[str, Any]]:
    """The documented answers of a picture route: the image, or a JSON error."""
    content = {media_type: {"schema": {"type": "string", "format": "binary"}}}
    return {200: {"description": what, "content": content}, **error_responses(404)}


def picture(request: Request, kind: str, media_type: str, numbers: BaseModel) -> Response:
    """The picture of `numbers` as `media_type`: kept, or drawn now; 304 for a browser that has
    this very picture (If-None-Match)."""
    fmt: Format = "svg" if media_type == SVG else "png"
    key = picture_key(kind, fmt, numbers)
    headers = {"ETag": f'"{key}"', "Cache-Control": "no-cache"}
    if media_type == SVG:
        headers["Content-Security-Policy"] = SVG_CSP
    if request.headers.get("if-none-match") == headers["ETag"]:
        return Response(status_code=304, headers=headers)
    body = KEPT.get(key)
    if body is None:
        from arena.web.charts.draw import draw  # matplotlib (0.5 s) on the first picture drawn

        body = draw(kind, fmt, numbers)
        KEPT.put(key, body)
    return Response(body, media_type=media_type, headers=headers)


def board_numbers(
    api: Api, name: str, kind: BoardKind, agent: str | None, run: str | None = None
) -> BaseModel:
    try:
        if kind == "series":  # each point against the previous, as the series route has it
            return series_picture(api.db, read_board(api.db, name), run)
        return pictures.board_picture(api.db, name, kind, agent, run)
    except InputError as exc:
        raise not_found(exc) from None


def race_numbers(api: Api, batch_id: str) -> BaseModel:
    try:
        _, info = races.race_info(api.db, api.batch_id(batch_id))
    except InputError as exc:
        raise not_found(exc) from None
    return pictures.race_picture(races.results_payload(info), pictures.race_dimensions())


def timeline_numbers(api: Api, batch_id: str) -> BaseModel:
    try:
        info = batches.find_batch(api.db, batch_id)
    except InputError as exc:
        raise not_found(exc) from None
    return timeline(api.db, info)


BOARD_DOC = (
    "`episodes` (Mario: each agent's episode scores, success rate with its Wilson interval, "
    "average max x), `trend` (any board: the score at each evaluation, with the workload's "
    "interval as a band), `bars` (Alympics' categories, a race board's dimensions), `heatmap` "
    "(Alympics: agent x game, normalised), `series` (a board with checkpoints `<run>@<steps>`: "
    "each run's learning curve, score and success rate with their intervals vs training steps; "
    "`run` for one). 404 for a kind the board has not."
)


@router.get(
    "/leaderboards/{name}/charts/{kind}.svg",
    response_class=Response,
    tags=TAGS,
    responses=image(SVG, "the picture as SVG; its numbers are in <desc id=arena-numbers>"),
    description=BOARD_DOC,
)
def board_chart_svg(
    api: ApiState,
    request: Request,
    name: str,
    kind: BoardKind,
    agent: AgentQuery = None,
    run: RunQuery = None,
) -> Response:
    """A board's picture as SVG."""
    return picture(request, kind, SVG, board_numbers(api, name, kind, agent, run))


@router.get(
    "/leaderboards/{name}/charts/{kind}.png",
    response_class=Response,
    tags=TAGS,
    responses=image(PNG, "the picture as PNG"),
    description=BOARD_DOC,
)
def board_chart_png(
    api: ApiState,
    request: Request,
    name: str,
    kind: BoardKind,
    agent: AgentQuery = None,
    run: RunQuery = None,
) -> Response:
    """A board's picture as PNG."""
    return picture(request, kind, PNG, board_numbers(api, name, kind, agent, run))


@router.get(
    "/races/{batch_id}/chart.svg", response_class=Response, tags=TAGS, responses=image(SVG, "SVG")
)
def race_chart_svg(api: ApiState, request: Request, batch_id: str) -> Response:
    """A finished race: each agent's five dimensions side by side, its composite, the verdict."""
    return picture(request, "race", SVG, race_numbers(api, batch_id))


@router.get(
    "/races/{batch_id}/chart.png", response_class=Response, tags=TAGS, responses=image(PNG, "PNG")
)
def race_chart_png(api: ApiState, request: Request, batch_id: str) -> Response:
    """A finished race's picture as PNG."""
    return picture(request, "race", PNG, race_numbers(api, batch_id))


@router.get(
    "/batches/{batch_id}/chart.svg", response_class=Response, tags=TAGS, responses=image(SVG, "SVG")
)
def batch_chart_svg(api: ApiState, request: Request, batch_id: str) -> Response:
    """A batch's timeline: each unit that ran, on its worker, from start to end."""
    return picture(request, "timeline", SVG, timeline_numbers(api, batch_id))


@router.get(
    "/batches/{batch_id}/chart.png", response_class=Response, tags=TAGS, responses=image(PNG, "PNG")
)
def batch_chart_png(api: ApiState, request: Request, batch_id: str) -> Response:
    """A batch's timeline as PNG."""
    return picture(request, "timeline", PNG, timeline_numbers(api, batch_id))


@router.get(
    "/batches/{batch_id}/report",
    response_model=Report,
    tags=["batches"],
    responses=error_responses(404),
)
def report_file(api: ApiState, batch_id: str) -> JSONResponse:
    """The batch's report file, as `arena report ID` writes it (while it runs: so far), to
    download (Content-Disposition: attachment)."""
    try:
        info = batches.find_batch(api.db, batch_id)
    except InputError as exc:
        raise not_found(exc) from None
    report = batches.stored_report(api.settings, api.db, info.id)
    name = f"arena-report-{info.run_id or info.id[:12]}.json"
    return JSONResponse(
        report.model_dump(mode="json"),
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
