"""The web page (docs/api.md, "The web page"): server-rendered HTML over the API's own data.

Every number shown is read with the service functions the JSON endpoints use (a board's rows
from `boards.read_board`, a race's summary from `races.results_payload`, the history from the
store), formatted as `arena leaderboard` formats it; nothing is scored again here. Which
columns a board shows is what its workload declares (`Workload.board_page_columns`), so a new
workload gets its page without a change here. Each value also sits in a `data-value`
attribute, as JSON, so a test can read it back exactly.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse, Response

from arena.service import boards, pictures, races
from arena.service.batches import recent_batches
from arena.service.boards import Board
from arena.service.compare import neighbour_comparisons
from arena.service.numbers import format_value, stat
from arena.web.figures import CAPTIONS, board_figures, figure, replay_figure, trends
from arena.web.html import PAGE_CSP, band, bar, data, e, interval, layout, number
from arena.web.state import ApiState, not_found
from scoring.compare import Comparison, trajectories_word
from scoring.race_tests import TestChanges
from tasks.records import FINISHED, BatchInfo
from tasks.store import LeaderboardRow, Store
from tasks.validation import InputError, RunFailed
from tasks.workloads.base import PageColumn

__all__ = ["PAGE_CSP", "router"]

RECENT = 20  # batches on the index
CHECKS = ("build", "tests", "lint")  # a race check's runs whose output a card shows
# The page is not the JSON API: its routes stay out of the OpenAPI schema.
router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def index(api: ApiState) -> str:
    names = api.db.leaderboard_names()
    links = "".join(f'<li><a href="/ui/leaderboards/{e(n)}">{e(n)}</a></li>' for n in names)
    infos = recent_batches(api.db, RECENT)
    rows = "".join(batch_row(i) for i in infos)
    running = any(i.status not in FINISHED for i in infos)
    body = (
        f'<h2>Leaderboards</h2><ul class="boards">{links or "<li>none yet</li>"}</ul>'
        '<h2>Recent batches</h2><table class="batches"><tr><th class=name>Batch</th>'
        "<th class=name>Workload</th><th class=name>Boards</th><th class=name>Status</th>"
        f"<th>Completed</th><th>Errors</th></tr>{rows}</table>"
    )
    return layout("Arena", body, refresh=running)


def batch_row(info: BatchInfo) -> str:
    """A batch links its page (its units, progress and report); a race also its scoreboard."""
    label = info.run_id or info.id[:12]
    scoreboard = (
        f' (<a class="scoreboard" href="/ui/races/{e(info.id)}">scoreboard</a>)'
        if info.workload == "race"
        else ""
    )
    return (
        f'<tr class="batch" data-batch="{e(info.id)}"><td class=name>'
        f'<a href="/ui/batches/{e(info.id)}">{e(label)}</a></td>'
        f"<td class=name>{e(info.workload)}{scoreboard}</td>"
        f'<td class=name>{e(info.leaderboard)}</td><td class="name status">{e(info.status)}</td>'
        f'<td class="progress" data-value="{data([info.completed, info.total])}">'
        f"{info.completed}/{info.total}</td><td>{info.errors}</td></tr>"
    )


def cell(column: PageColumn, stats: dict[str, Any]) -> str:
    value = stat(stats, column.key)
    few = stats.get("trajectories")
    if column.shown_as == "interval" and isinstance(few, int) and few < 2:
        # one outcome repeated (a deterministic protocol): its interval would claim certainty
        values = {"point": value, "ci95": None, "trajectories": few}
        shown = f"{format_value(value, column.fmt)} ({trajectories_word(few)})"
        return f'<td class="{e(column.css)}" data-value="{data(values)}">{e(shown)}</td>'
    if column.shown_as == "interval":
        return interval(value, stat(stats, column.ci95 or ""), column.fmt, column.css)
    if column.shown_as == "bar":
        return f"<td>{bar(value, column.css)}</td>"
    return number(value, column.fmt, column.css)


def replay_url(db: Store, board: str, row: LeaderboardRow) -> str | None:
    """A row's best episode, replayed as a GIF (`/ui/replays/...`): the batch that wrote the
    row, and the level when that batch played several."""
    info = db.batch(row.batch)
    if info is None:
        return None
    items = [i if isinstance(i, str) else str(i.get("name")) for i in info.spec.get("items", [])]
    level = next((i for i in items if board.endswith(f"-{i}")), None)
    query = f"?level={quote(level)}" if len(items) > 1 and level else ""
    return f"/ui/replays/{quote(row.batch)}/{quote(row.agent)}.gif{query}"


def replay_link(url: str | None) -> str:
    return f'<td><a class="replay" href="{e(url)}">replay</a></td>' if url else "<td></td>"


def versus_cell(found: Comparison | None) -> str:
    """P(this row's agent beats the next row's), its interval, and whether they separate."""
    if found is None:
        return '<td class="versus"></td>'
    low, high = found.ci95
    verdict = "better" if found.better == "a" else "worse" if found.better else "not separated"
    values = {"probability": found.probability, "ci95": [low, high], "better": found.better}
    if not found.conclusive:  # a side is one trajectory repeated: no interval, no verdict
        few = min(found.trajectories_a or 0, found.trajectories_b or 0)
        values = {**values, "ci95": None, "conclusive": False}
        return (
            f'<td class="versus" data-value="{data(values)}">'
            f"{found.probability:.2f} no conclusion: {trajectories_word(few)}</td>"
        )
    return (
        f'<td class="versus" data-value="{data(values)}">'
        f"{found.probability:.2f} [{low:.2f}, {high:.2f}] {verdict}</td>"
    )


def board_rows(
    board: Board,
    columns: tuple[PageColumn, ...],
    replays: dict[str, str | None],
    trend: dict[str, str],
    versus: dict[str, Comparison] | None = None,
) -> str:
    rows = []
    for rank, row in zip(board.ranks, board.rows, strict=True):
        cells = "".join(cell(c, row.stats) for c in columns)
        replay = replay_link(replays.get(row.agent)) if replays else ""
        beats = versus_cell(versus.get(row.agent)) if versus else ""
        rows.append(
            f'<tr class="entry" data-agent="{e(row.agent)}"><td class="rank">{rank}</td>'
            f'<td class="name agent">{e(row.agent)}</td>{number(row.score, "number", "score")}'
            f'{cells}{replay}{beats}<td class="trend">{trend.get(row.agent, "")}</td></tr>'
        )
    return "".join(rows)


@router.get("/ui/leaderboards/{name}", response_class=HTMLResponse)
def board_page(api: ApiState, name: str) -> str:
    try:
        board = boards.read_board(api.db, name)
    except InputError as exc:
        raise not_found(exc) from None
    workload = board.workload
    declared = workload.board_page_columns() if workload else ()
    columns = tuple(
        c
        for c in declared
        if not c.optional or any(stat(r.stats, c.key) is not None for r in board.rows)
    )
    replays = workload is not None and workload.replays
    versus = neighbour_comparisons(api.db, board)
    heads = [c.header for c in columns] + (["Best episode"] if replays else [])
    heads += ["P(beats next) [95%]"] if versus else []
    urls = {r.agent: replay_url(api.db, name, r) for r in board.rows} if replays else {}
    kinds = pictures.board_kinds(board)
    trend, legend = trends(api.db, board, kinds)
    rows = board_rows(board, columns, urls, trend, versus)
    leader = board.rows[0].agent if board.rows else ""
    best = urls.get(leader)
    replay = replay_figure(best, leader) if best else ""
    body = (
        f'<table class="board" data-kind="{e(workload.name if workload else "generic")}">'
        "<tr><th>#</th><th class=name>Agent</th><th>Score</th>"
        + "".join(f"<th>{e(h)}</th>" for h in heads)
        + f"<th>Trend</th></tr>{rows}</table>{legend}"
        f'<section class="pictures">{board_figures(api.db, board, kinds)}{replay}</section>'
        f'<p>JSON: <a href="/leaderboards/{e(name)}">/leaderboards/{e(name)}</a></p>'
    )
    return layout(f"Leaderboard {name}", body)


def output_tails(db: Store, batch_id: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Agent -> check -> its build, test or lint run: command, exit code and the end of what
    it printed (the unit results' `output_tail`, as GET /batches/{id} returns them)."""
    tails: dict[str, dict[str, dict[str, Any]]] = {}
    for unit in db.unit_results(batch_id).values():
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
        for d in pictures.race_dimensions()
    )
    outputs = "".join(check_output(c, tails[c]) for c in CHECKS if c in tails)
    notes = "".join(f"<li>{e(n)}</li>" for n in row.get("notes", []))
    changes = TestChanges.model_validate(row.get("test_changes") or {}, strict=False)
    broke = f'<p class="test-changes">{e(changes.describe())}</p>' if changes.holds else ""
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
        f"{f'<ul>{notes}</ul>' if notes else ''}{broke}"
        f"<details><summary>Build, test and lint output</summary>"
        f"{outputs or '<p>no output captured</p>'}</details>{merge}</div>"
    )


@router.get("/ui/races/{batch_id}", response_class=HTMLResponse)
def race_page(api: ApiState, batch_id: str) -> str:
    try:
        resolved, info = races.race_info(api.db, api.batch_id(batch_id))
    except InputError as exc:
        raise not_found(exc) from None
    summary = races.results_payload(info)
    tails = output_tails(api.db, resolved)
    cards = "".join(
        race_card(row, tails.get(row["name"], {}), row["name"] == summary.get("winner"), resolved)
        for row in summary.get("agents", [])
    )
    errors = "".join(
        f'<li data-agent="{e(n)}">{e(n)}: {e(why)}</li>'
        for n, why in sorted((summary.get("errors") or {}).items())
    )
    numbers = pictures.race_picture(summary, pictures.race_dimensions())
    chart = figure(
        f"/races/{resolved}/chart", "race", numbers, CAPTIONS["race"], f"race {resolved}"
    )
    # The label it was asked by, when that is one of its runs': a batch keeps only its latest
    # run's label, and a --fresh rerun of the same commits under another would retitle it.
    label = batch_id if api.db.run_labels().get(batch_id) == resolved else info.run_id
    rerun = (
        f'<p class="rerun">Last run as {e(info.run_id)} (the same commits checked again): '
        "these are its results.</p>"
        if label and info.run_id and info.run_id != label
        else ""
    )
    body = rerun + (
        f"<p>Task: {e(summary.get('task'))}<br>Base: {e(summary.get('base'))} · verdict "
        f'<b class="verdict">{e(summary.get("verdict"))}</b> · winner '
        f'<b class="winner">{e(summary.get("winner") or "none")}</b> · '
        f'<a href="/ui/batches/{e(resolved)}">units</a></p>'
        + failed_or_review(summary)
        + (chart if numbers.agents else "")
        + cards
        + (f'<h2>Not scored</h2><ul class="errors">{errors}</ul>' if errors else "")
        + f'<p>JSON: <a href="/races/{e(resolved)}">/races/{e(resolved)}</a></p>'
    )
    return layout(f"Race {label or resolved[:12]}", body, script=True)


def failed_or_review(summary: dict[str, Any]) -> str:
    """Why the race failed at the start, or why it needs a review, when it does."""
    if summary.get("failed_reason"):
        return f'<p class="failed-reason">Failed: {e(summary["failed_reason"])}</p>'
    if summary.get("review_reason"):
        return f'<p class="review-reason">Review: {e(summary["review_reason"])}</p>'
    return ""


@router.get("/ui/replays/{batch_id}/{agent}.gif")
def replay(api: ApiState, batch_id: str, agent: str, level: str | None = None) -> Response:
    """The agent's best episode of a Mario batch, played again from its action log (as `arena
    mario replay` does) or kept from an earlier request; 409 if it does not reproduce the
    stored result, 503 while as many replays play as may (app.busy)."""
    try:
        gif = api.replays.best_episode(api.db, api.batch_id(batch_id), agent, level)
    except InputError as exc:
        raise not_found(exc) from None
    except RunFailed as exc:
        raise HTTPException(409, str(exc)) from None
    return Response(gif, media_type="image/gif")
