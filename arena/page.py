"""The web page (docs/api.md, "The web page"): server-rendered HTML over the API's own data.

Every number shown is read with the functions the JSON endpoints use (the board's rows from
`cluster_cmd.leaderboard_table`, a race's summary from `race_cmd.results_payload`, the history
from the store), formatted as `arena leaderboard` formats it; nothing is scored again here.
Each value also sits in a `data-value` attribute, as JSON, so a test can read it back exactly.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse, Response

from arena import cluster_cmd
from arena.race_cmd import race_info, results_payload
from arena.replays import Replayed
from arena.tables import format_value, stat
from tasks.records import FINISHED, BatchInfo
from tasks.validation import InputError
from tasks.workloads.base import ColumnFormat

if TYPE_CHECKING:
    from arena.api import Api

RECENT = 20  # batches on the index
REFRESH_S = 5  # the index reloads itself while a batch runs
CATEGORIES = ("strategic", "cooperation", "fairness", "robustness")
DIMENSIONS = ("build", "tests", "lint", "diff_size", "speed")
CHECKS = ("build", "tests", "lint")
CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:72em}
table{border-collapse:collapse}td,th{padding:.3em .6em;border-bottom:1px solid #ddd;
text-align:right;vertical-align:middle}td.name,th.name{text-align:left}
svg.bar{display:inline-block;width:8em;height:.8em;background:#eee;vertical-align:middle}
rect.good{fill:#2e9e44}rect.fair{fill:#e0b020}rect.poor{fill:#d0342c}.card{border:1px solid #ccc;
border-radius:6px;padding:.8em;margin:.8em 0}.card h2{margin:.2em 0}
.card.good{border-left:8px solid #2e9e44}.card.fair{border-left:8px solid #e0b020}
.card.poor{border-left:8px solid #d0342c}pre{background:#f6f6f6;padding:.5em;
overflow-x:auto;max-height:20em}.dim{display:flex;gap:.6em;align-items:center}
.dim label{width:6em}svg.spark{vertical-align:middle}
"""
# Bound to the form here rather than in an onsubmit attribute: the page's Content-Security-Policy
# admits this one script (by its hash), and no inline event handler.
MERGE_JS = """
for (const form of document.querySelectorAll('form.merge')) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const out = document.getElementById('merge-answer');
    const answer = await fetch(form.dataset.url, {method: 'POST',
      headers: {'Authorization': 'Bearer ' + form.token.value}});
    const body = await answer.json();
    out.textContent = answer.status + ': ' + (body.message || JSON.stringify(body.detail));
  });
}
"""


def csp_hash(source: str) -> str:
    """A CSP source admitting exactly this inline script or style."""
    return f"'sha256-{base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()}'"


# The page loads nothing from elsewhere: its one style sheet and one script are inline and
# admitted by hash (no 'unsafe-inline'); the merge button fetches this origin; nothing frames it.
PAGE_CSP = (
    f"default-src 'none'; style-src {csp_hash(CSS)}; script-src {csp_hash(MERGE_JS)}; "
    "connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


def e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def data(value: Any) -> str:
    """The exact value as JSON, escaped for an attribute."""
    return e(json.dumps(value))


def layout(title: str, body: str, refresh: bool = False, script: bool = False) -> str:
    meta = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if refresh else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{meta}'
        f"<title>{e(title)} · Arena</title><style>{CSS}</style></head><body>"
        f'<p><a href="/">Arena</a></p><h1>{e(title)}</h1>{body}'
        + (f"<script>{MERGE_JS}</script>" if script else "")
        + "</body></html>"
    )


def band(value: float | None) -> str:
    """The seed's colours: green above 80, yellow from 50 to 80, red below 50."""
    if value is None:
        return "poor"
    return "good" if value > 80 else "fair" if value >= 50 else "poor"


def number(value: Any, fmt: ColumnFormat = "number", cls: str = "") -> str:
    return f'<td class="{e(cls)}" data-value="{data(value)}">{e(format_value(value, fmt))}</td>'


def interval(point: Any, ci: Any, fmt: ColumnFormat, cls: str) -> str:
    """A point with its 95% interval, as `arena leaderboard` shows it."""
    text = format_value(point, fmt, digits=3)
    if isinstance(ci, list | tuple) and len(ci) == 2:
        low, high = (format_value(v, fmt, digits=3) for v in ci)
        text += f" [{low}, {high}]"
    values = {"point": point, "ci95": ci}
    return f'<td class="{e(cls)}" data-value="{data(values)}">{e(text)}</td>'


def bar(value: Any, cls: str, label: str | None = None) -> str:
    """A 0-100 value as a small horizontal bar, coloured by band, with its number (an SVG: a
    width in a style attribute would need 'unsafe-inline' in the page's CSP)."""
    shown = value if isinstance(value, int | float) else None
    width = max(0.0, min(100.0, float(shown))) if shown is not None else 0.0
    return (
        f'<span class="{e(cls)}" data-value="{data(value)}">'
        + (f"<label>{e(label)}</label>" if label else "")
        + '<svg class="bar" viewBox="0 0 100 1" preserveAspectRatio="none">'
        f'<rect class="{band(shown)}" width="{width:.1f}" height="1"/></svg>'
        f" {e(format_value(value, 'number'))}</span>"
    )


def sparkline(scores: Sequence[float], width: int = 120, height: int = 24) -> str:
    """Scores oldest first as an inline SVG polyline (a dot for one point)."""
    if not scores:
        return ""
    low, high = min(scores), max(scores)
    span = (high - low) or 1.0
    step = width / max(len(scores) - 1, 1)
    points = [
        (i * step if len(scores) > 1 else width / 2, height - 2 - (s - low) / span * (height - 4))
        for i, s in enumerate(scores)
    ]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    last_x, last_y = points[-1]
    return (
        f'<svg class="spark" width="{width}" height="{height}" data-points="{data(list(scores))}"'
        f' viewBox="0 0 {width} {height}"><polyline fill="none" stroke="#36c" stroke-width="1.5"'
        f' points="{line}"/><circle cx="{last_x:.1f}" cy="{last_y:.1f}" r="2" fill="#36c"/></svg>'
    )


def index_page(api: Api) -> str:
    names = api.db.leaderboard_names()
    boards = "".join(f'<li><a href="/ui/leaderboards/{e(n)}">{e(n)}</a></li>' for n in names)
    infos = [i for i in (api.db.batch(b) for b in api.db.batch_ids(RECENT)) if i is not None]
    rows = "".join(batch_row(i) for i in infos)
    running = any(i.status not in FINISHED for i in infos)
    body = (
        f'<h2>Leaderboards</h2><ul class="boards">{boards or "<li>none yet</li>"}</ul>'
        '<h2>Recent batches</h2><table class="batches"><tr><th class=name>Batch</th>'
        "<th class=name>Workload</th><th class=name>Boards</th><th class=name>Status</th>"
        f"<th>Completed</th><th>Errors</th></tr>{rows}</table>"
    )
    return layout("Arena", body, refresh=running)


def batch_row(info: BatchInfo) -> str:
    link = f"/ui/races/{info.id}" if info.workload == "race" else f"/batches/{info.id}"
    label = info.run_id or info.id[:12]
    return (
        f'<tr class="batch" data-batch="{e(info.id)}"><td class=name><a href="{e(link)}">'
        f"{e(label)}</a></td><td class=name>{e(info.workload)}</td>"
        f'<td class=name>{e(info.leaderboard)}</td><td class="name status">{e(info.status)}</td>'
        f'<td class="progress" data-value="{data([info.completed, info.total])}">'
        f"{info.completed}/{info.total}</td><td>{info.errors}</td></tr>"
    )


def board_kind(entries: Sequence[dict[str, Any]]) -> str:
    """Which columns a board gets, from the keys its entries' stats carry."""
    stats = entries[0]["stats"] if entries else {}
    if "success_ci95" in stats and "iqm_ci95" in stats:
        return "mario"
    if isinstance(stats.get("categories"), dict):
        return "alympics"
    if isinstance(stats.get("scores"), dict):
        return "race"
    return "generic"


def kind_headers(kind: str) -> str:
    if kind == "mario":
        heads = ["Success rate [Wilson 95%]", "IQM [bootstrap 95%]", "Episodes", "Best episode"]
    elif kind == "alympics":
        heads = [c.capitalize() for c in CATEGORIES]
    elif kind == "race":
        heads = ["Build", "Tests", "Lint", "Diff", "Speed"]
    else:
        heads = []
    return "".join(f"<th>{e(h)}</th>" for h in heads)


def kind_cells(kind: str, stats: dict[str, Any]) -> str:
    if kind == "mario":
        return (
            interval(stats.get("success_rate"), stats.get("success_ci95"), "percent", "success")
            + interval(stats.get("iqm_score"), stats.get("iqm_ci95"), "number", "iqm")
            + number(stats.get("episodes"), "count", "episodes")
        )
    if kind == "alympics":
        return "".join(f"<td>{bar(stat(stats, f'categories.{c}'), c)}</td>" for c in CATEGORIES)
    if kind == "race":
        return "".join(f"<td>{bar(stat(stats, f'scores.{d}'), d)}</td>" for d in DIMENSIONS)
    return ""


def replay_link(api: Api, board: str, agent: str) -> str:
    """A Mario board row's best episode, replayed as a GIF (`/ui/replays/...`): the batch that
    wrote the row, and the level when that batch played several."""
    row = next((r for r in api.db.leaderboard(board) if r.agent == agent), None)
    info = api.db.batch(row.batch) if row else None
    if row is None or info is None:
        return "<td></td>"
    items = [i if isinstance(i, str) else str(i.get("name")) for i in info.spec.get("items", [])]
    level = next((i for i in items if board.endswith(f"-{i}")), None)
    query = f"?level={quote(level)}" if len(items) > 1 and level else ""
    url = f"/ui/replays/{quote(row.batch)}/{quote(agent)}.gif{query}"
    return f'<td><a class="replay" href="{e(url)}">replay</a></td>'


def board_page(api: Api, name: str) -> str:
    if name not in api.db.leaderboard_names():
        raise HTTPException(404, f"leaderboard: no leaderboard {name!r}")
    _, entries = cluster_cmd.leaderboard_table(api.db, name)
    kind = board_kind(entries)
    rows = []
    for entry in entries:
        trend = [float(p["score"]) for p in api.db.history(name, entry["agent"])]
        replay = replay_link(api, name, entry["agent"]) if kind == "mario" else ""
        rows.append(
            f'<tr class="entry" data-agent="{e(entry["agent"])}">'
            f'<td class="rank">{e(entry["rank"])}</td><td class="name agent">{e(entry["agent"])}'
            f"</td>{number(entry['score'], 'number', 'score')}{kind_cells(kind, entry['stats'])}"
            f'{replay}<td class="trend">{sparkline(trend)}</td></tr>'
        )
    body = (
        f'<table class="board" data-kind="{e(kind)}"><tr><th>#</th><th class=name>Agent</th>'
        f"<th>Score</th>{kind_headers(kind)}<th>Trend</th></tr>{''.join(rows)}</table>"
        f'<p>JSON: <a href="/leaderboards/{e(name)}">/leaderboards/{e(name)}</a></p>'
    )
    return layout(f"Leaderboard {name}", body)


def output_tails(api: Api, batch_id: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Agent -> check -> its build, test or lint run: command, exit code and the end of what
    it printed (the unit results' `output_tail`, as GET /batches/{id} returns them)."""
    tails: dict[str, dict[str, dict[str, Any]]] = {}
    for unit in api.db.unit_results(batch_id).values():
        checks = tails.setdefault(unit.agent, {})
        for check in CHECKS:
            run = unit.result.get(check)
            if isinstance(run, dict) and run.get("output_tail") is not None:
                checks[check] = run
    return tails


def check_output(check: str, run: dict[str, Any]) -> str:
    ended = "timed out" if run.get("timed_out") else f"exit {run.get('exit_code')}"
    return (
        f"<h4>{e(check)}: <code>{e(run.get('command'))}</code> ({e(ended)})</h4>"
        f'<pre class="tail {e(check)}">{e(run["output_tail"]) or "(no output)"}</pre>'
    )


def race_card(
    row: dict[str, Any], tails: dict[str, dict[str, Any]], winner: bool, batch_id: str
) -> str:
    scores = row.get("scores") or {}
    dims = "".join(
        f'<div class="dim">{bar(scores.get(d), f"dim {d}", d.replace("_", " "))}</div>'
        for d in DIMENSIONS
    )
    outputs = "".join(check_output(c, tails[c]) for c in CHECKS if c in tails)
    notes = "".join(f"<li>{e(n)}</li>" for n in row.get("notes", []))
    merge = (
        f'<form class="merge" data-url="/races/{e(batch_id)}/merge">'
        '<input type="password" name="token" '
        'placeholder="API token" autocomplete="off"> <button type="submit">Merge Winner'
        '</button> <output id="merge-answer"></output></form>'
        if winner
        else ""
    )
    return (
        f'<div class="card {band(row.get("composite"))}" data-agent="{e(row["name"])}">'
        f'<h2><span class="rank">#{e(row["rank"])}</span> {e(row["name"])} '
        f'<span class="composite" data-value="{data(row.get("composite"))}">'
        f"{e(format_value(row.get('composite'), 'number'))}</span></h2>"
        f"<p>branch {e(row.get('branch'))} at {e(str(row.get('commit'))[:12])}</p>{dims}"
        f"{f'<ul>{notes}</ul>' if notes else ''}"
        f"<details><summary>Build, test and lint output</summary>"
        f"{outputs or '<p>no output captured</p>'}</details>{merge}</div>"
    )


def race_page(api: Api, ref: str) -> str:
    try:
        batch_id, info = race_info(api.db, api.batch_id(ref))
    except InputError as exc:
        raise HTTPException(404, str(exc)) from None
    summary = results_payload(info)
    tails = output_tails(api, batch_id)
    cards = "".join(
        race_card(row, tails.get(row["name"], {}), row["name"] == summary.get("winner"), batch_id)
        for row in summary.get("agents", [])
    )
    errors = "".join(
        f'<li data-agent="{e(n)}">{e(n)}: {e(why)}</li>'
        for n, why in sorted((summary.get("errors") or {}).items())
    )
    body = (
        f"<p>Task: {e(summary.get('task'))}<br>Base: {e(summary.get('base'))} · verdict "
        f'<b class="verdict">{e(summary.get("verdict"))}</b> · winner '
        f'<b class="winner">{e(summary.get("winner") or "none")}</b></p>{cards}'
        + (f'<h2>Not scored</h2><ul class="errors">{errors}</ul>' if errors else "")
        + f'<p>JSON: <a href="/races/{e(batch_id)}">/races/{e(batch_id)}</a></p>'
    )
    return layout(f"Race {info.run_id or batch_id[:12]}", body, script=True)


def replay_gif(api: Api, ref: str, agent: str, level: str | None, every: int = 4) -> bytes:
    """The agent's best episode of a Mario batch, played again from its action log (as
    `arena mario replay` does) or kept from an earlier request (arena/replays.py); 409 if it
    does not reproduce the stored result."""
    batch_id = api.batch_id(ref)
    info = api.db.batch(batch_id)
    if info is None:
        raise HTTPException(404, f"batch: no batch {ref!r}")
    # The best episode changes only when a result lands or the batch is run again.
    episode = f"{batch_id}:{info.created_at!r}:{info.completed}:{agent}:{level}:{every}"
    replayed = api.replays.get(episode, lambda: play(api, batch_id, agent, level, every))
    if replayed.differs:
        raise HTTPException(
            409, f"the replay differs from the stored result in {list(replayed.differs)}"
        )
    return replayed.gif


def play(api: Api, batch_id: str, agent: str, level: str | None, every: int) -> Replayed:
    import imageio.v3 as iio

    from arena.mario_cmd import pick_episode, replay

    try:
        unit, stored = pick_episode(api.db, batch_id, agent, level, None)
    except InputError as exc:
        raise HTTPException(404, str(exc)) from None
    _, differs, frames = replay(unit, stored, every)
    if differs:
        return Replayed(b"", tuple(differs))
    gif: bytes = iio.imwrite("<bytes>", frames, extension=".gif", duration=1000 * every / 60,
                             loop=0)  # fmt: skip
    return Replayed(gif)


def register(app: FastAPI, api: Api) -> None:
    """The page's routes; kept out of the OpenAPI schema (it documents the JSON API)."""

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> str:
        return index_page(api)

    @app.get("/ui/leaderboards/{name}", response_class=HTMLResponse, include_in_schema=False)
    def board(name: str) -> str:
        return board_page(api, name)

    @app.get("/ui/replays/{batch_id}/{agent}.gif", include_in_schema=False)
    def replay(batch_id: str, agent: str, level: str | None = None) -> Response:
        return Response(replay_gif(api, batch_id, agent, level), media_type="image/gif")

    @app.get("/ui/races/{batch_id}", response_class=HTMLResponse, include_in_schema=False)
    def race(batch_id: str) -> str:
        return race_page(api, batch_id)
