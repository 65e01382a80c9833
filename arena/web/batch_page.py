"""A batch's page (docs/api.md, "The web page"): its state and progress, followed live while it
runs (html.POLL_JS asks GET /batches/{id}), its timeline picture, the report to download
(GET /batches/{id}/report) and every unit (status, duration, worker, error kind and reason),
each linking what it printed (GET /batches/{id}/logs/{unit})."""

from __future__ import annotations

import time
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from arena.service import batches
from arena.service.batch_view import UnitRow, timeline, unit_rows
from arena.service.numbers import format_value
from arena.service.queue import QueuedBatch, place_line, place_of
from arena.web.figures import CAPTIONS, figure
from arena.web.html import data, e, layout
from arena.web.state import ApiState, not_found
from tasks.records import FINISHED, BatchInfo
from tasks.validation import InputError

# The page is not the JSON API: its routes stay out of the OpenAPI schema.
router = APIRouter(include_in_schema=False)


def counts(info: BatchInfo) -> str:
    """As POLL_JS writes them while the batch runs."""
    return f"{info.completed}/{info.total} units, {info.errors} errors"


def unit_row(batch_id: str, row: UnitRow) -> str:
    log = (
        f'<a class="log" href="/batches/{quote(batch_id)}/logs/{quote(row.unit_id)}">log</a>'
        if row.logged
        else ""
    )
    duration = "" if row.duration_s is None else f"{format_value(row.duration_s, 'number')} s"
    return (
        f'<tr class="unit {e(row.status)}" data-unit="{e(row.unit_id)}" '
        f'data-value="{data(row.model_dump(mode="json"))}"><td class=name>{e(row.agent)}</td>'
        f"<td class=name>{e(row.item)}</td><td>{row.episode}</td>"
        f'<td class="name status">{e(row.status)}</td><td class="duration">{duration}</td>'
        f'<td class="name host">{e(row.host or "")}</td>'
        f'<td class="name kind">{e(row.error_kind or "")}</td>'
        f'<td class="reason">{e(row.reason or "")}</td><td>{log}</td></tr>'
    )


def queue_place(place: QueuedBatch | None) -> str:
    """Its class, team, share or place in line, and ETA (`arena status` prints the same)."""
    line = place_line(place)
    if place is None or line is None:
        return ""
    return f'<p class="queue" data-value="{data(place.model_dump(mode="json"))}">{e(line)}</p>'


def header(info: BatchInfo, notes: list[str], place: QueuedBatch | None = None) -> str:
    boards = ", ".join(
        f'<a href="/ui/leaderboards/{quote(b, safe="")}">{e(b)}</a>' for b in info.boards
    )
    race = f' · <a href="/ui/races/{e(info.id)}">scoreboard</a>' if info.workload == "race" else ""
    running = info.status not in FINISHED
    live = (
        f'<span id="live" data-url="/batches/{e(info.id)}" data-completed="{info.completed}" '
        f'data-finished="{data(sorted(FINISHED))}"> (live)</span>'
        if running
        else ""
    )
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(info.created_at))
    return (
        f"<p>Workload {e(info.workload)} · boards {boards or 'none'}{race} · submitted {started}"
        f'</p><p>Status <b class="status">{e(info.status)}</b>'
        + (f" ({e(info.reason)})" if info.reason else "")
        + f' · <progress class="units" max="{info.total}" value="{info.completed}"></progress> '
        f'<span class="counts" data-value="{data([info.completed, info.total, info.errors])}">'
        f"{e(counts(info))}</span>{live}</p>"
        + queue_place(place)
        + "".join(f'<p class="note">{e(n)}</p>' for n in notes)
        + f'<p><a class="report" href="/batches/{e(info.id)}/report" download>Report (JSON)</a>'
        + (" so far" if running else "")
        + f' · <a href="/batches/{e(info.id)}">the batch as JSON</a></p>'
    )


@router.get("/ui/batches/{batch_id}", response_class=HTMLResponse)
def batch_page(api: ApiState, batch_id: str) -> str:
    try:
        info = batches.find_batch(api.db, batch_id)
    except InputError as exc:
        raise not_found(exc) from None
    notes = batches.running_notes(api.db, info, api.settings)
    place = place_of(api.db, info.id) if info.status not in FINISHED else None
    rows = unit_rows(api.db, info)
    chart = figure(
        f"/batches/{info.id}/chart",
        "timeline",
        timeline(api.db, info),
        CAPTIONS["timeline"],
        f"batch {info.id}: its units over time",
    )
    body = (
        header(info, notes, place)
        + chart
        + '<h2>Units</h2><table class="units"><tr><th class=name>Agent</th>'
        "<th class=name>Item</th><th>Episode</th><th class=name>Status</th><th>Duration</th>"
        "<th class=name>Worker</th><th class=name>Error kind</th><th class=name>Reason</th>"
        "<th>Log</th></tr>" + "".join(unit_row(info.id, r) for r in rows) + "</table>"
    )
    title = f"Batch {info.run_id or info.id[:12]}"
    # A waiting batch makes no progress for the poll to see: the page reloads to follow its place.
    waiting = place is not None and place.state == "waiting"
    return layout(title, body, refresh=waiting, poll=info.status not in FINISHED)
