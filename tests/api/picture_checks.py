"""What each picture must show, computed from the JSON API alone (GET /leaderboards, .../history,
.../series/{run}, /batches/{id} and its report, /races/{id}), never from the service code that
draws it: a test compares these with a figure's `data-values` on the page and with its SVG's
<desc>."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import quote

from tasks.workloads import get_workload

SVG_NS = "{http://www.w3.org/2000/svg}"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# The statistic a trend draws as a band, as each workload declares it (its interval).
BANDS = {"mario": ("iqm_score", "iqm_ci95", "IQM [bootstrap 95%]")}


class Http(Protocol):
    def get(self, url: str, **kwargs: Any) -> Any: ...


def svg_numbers(body: bytes) -> dict[str, Any]:
    """An SVG picture's numbers (<desc id="arena-numbers">), parsed as XML."""
    root = ET.fromstring(body)
    assert root.tag == f"{SVG_NS}svg"
    assert root.find(f"{SVG_NS}title") is not None
    desc = root.find(f"{SVG_NS}desc")
    assert desc is not None and desc.get("id") == "arena-numbers" and desc.text
    numbers: dict[str, Any] = json.loads(desc.text)
    return numbers


def get(http: Http, url: str) -> Any:
    answer = http.get(url)
    assert answer.status_code == 200, (url, answer.text)
    return answer.json()


def board_entries(http: Http, board: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = get(http, f"/leaderboards/{quote(board)}")["entries"]
    return entries


def expected_board(http: Http, board: str, kind: str, agent: str | None = None) -> dict[str, Any]:
    entries = [e for e in board_entries(http, board) if agent is None or e["agent"] == agent]
    workload = get(http, f"/batches/{entries[0]['batch']}")["batch"]["workload"]
    if kind == "episodes":
        return {"board": board, "agents": [episodes_of(http, e) for e in entries]}
    if kind == "trend":
        band = BANDS.get(workload)
        return {
            "board": board,
            "score": get_workload(workload).score_header,
            "interval": band[2] if band else None,
            "agents": [trend_of(http, board, e["agent"], band) for e in entries],
        }
    if kind == "bars":
        columns = {
            c.key: c.header
            for c in get_workload(workload).board_page_columns()
            if c.shown_as == "bar"
        }
        agents = [
            {
                "agent": e["agent"],
                "score": e["score"],
                "values": {k: at(e["stats"], k) for k in columns},
            }
            for e in entries
        ]
        return {"board": board, "columns": columns, "agents": agents}
    assert kind == "heatmap", kind
    columns = [[c, g] for c, games in entries[0]["stats"]["games"].items() for g in games]
    values = [[e["stats"]["games"][c][g] for c, g in columns] for e in entries]
    return {
        "board": board,
        "columns": columns,
        "agents": [e["agent"] for e in entries],
        "values": values,
    }


def at(stats: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        stats = stats[part]
    return stats


def episodes_of(http: Http, entry: dict[str, Any]) -> dict[str, Any]:
    stats = entry["stats"]
    units = get(http, f"/batches/{entry['batch']}")["report"]["units"]
    mine = sorted(
        (u for u in units if u["agent"] == entry["agent"] and u["item"] == stats["level"]),
        key=lambda u: u["episode"],
    )
    return {
        "agent": entry["agent"],
        "batch": entry["batch"],
        "level": stats["level"],
        "scores": [u["result"]["arena_score"] for u in mine if u["status"] == "ok"],
        "failed": sum(u["status"] == "error" for u in mine),
        "best": entry["score"],
        "success_rate": stats["success_rate"],
        "success_ci95": stats["success_ci95"],
        "avg_max_x": stats["avg_max_x"],
        "trajectories": stats["trajectories"],  # distinct ones (docs/mario.md)
    }


def trend_of(
    http: Http, board: str, agent: str, band: tuple[str, str, str] | None
) -> dict[str, Any]:
    points = []
    for point in get(http, f"/leaderboards/{quote(board)}/history/{quote(agent)}")["points"]:
        shown = {**point, "point": None, "ci95": None}
        if band is not None:
            batch = get(http, f"/batches/{point['batch']}")["batch"]
            first = next(iter(batch["boards"]))
            stats = next(
                e["stats"]
                for e in batch["entries"]
                if e["agent"] == agent and (e["board"] or first) == board
            )
            shown |= {"point": stats[band[0]], "ci95": stats[band[1]]}
        points.append(shown)
    return {"agent": agent, "points": points}


def expected_series(http: Http, board: str, run: str) -> dict[str, Any]:
    """A run's learning curve: its checkpoints' rows by steps, as GET .../series/{run} has them."""
    return {
        "board": board,
        "series": [get(http, f"/leaderboards/{quote(board)}/series/{quote(run)}")],
    }


def expected_race(http: Http, batch_id: str) -> dict[str, Any]:
    race = get(http, f"/races/{batch_id}")
    dims = [c.css for c in get_workload("race").board_page_columns()]
    agents = [
        {"name": a["name"], "rank": a["rank"], "composite": a["composite"], "scores": a["scores"]}
        for a in race["agents"]
    ]
    assert all(set(a["scores"]) == set(dims) for a in agents)
    return {
        "batch_id": race["batch_id"],
        "verdict": race["verdict"],
        "winner": race["winner"],
        "dimensions": dims,
        "agents": agents,
    }


def unix(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def expected_timeline(http: Http, batch_id: str) -> dict[str, Any]:
    detail = get(http, f"/batches/{batch_id}")
    batch, units = detail["batch"], (detail["report"] or {}).get("units", [])
    if detail["report"] is None:  # running: the report so far
        units = get(http, f"/batches/{batch_id}/report")["units"]
    spans = [
        {
            "unit_id": u["unit_id"],
            "agent": u["agent"],
            "host": u["host"],
            "status": u["status"],
            "start_s": round(unix(u["started_at"]) - batch["created_at"], 3),
            "end_s": round(unix(u["finished_at"]) - batch["created_at"], 3),
        }
        for u in units
    ]
    spans.sort(key=lambda s: (s["start_s"], s["unit_id"]))
    keys = ("status", "total", "completed", "errors")
    return {"batch_id": batch["id"], **{k: batch[k] for k in keys}, "spans": spans}


def expected_for(http: Http, where: str) -> Any:
    """What a figure of the page at `where` (a board's name, or a race's or a batch's id) must
    show: kind, its numbers -> the numbers computed from the API."""

    def expected(kind: str, numbers: dict[str, Any]) -> dict[str, Any]:
        if kind == "race":
            return expected_race(http, where)
        if kind == "timeline":
            return expected_timeline(http, where)
        if kind == "series":  # one run's learning curve
            return expected_series(http, where, numbers["series"][0]["run"])
        agent = numbers["agents"][0]["agent"] if kind == "trend" else None
        return expected_board(http, where, kind, agent)

    return expected


def check_pictures(page: Any, http: Http, where: str) -> list[str]:
    """Every picture on the browser's page: its <img> loaded (under the page's
    Content-Security-Policy), its numbers (data-values) the API's, its SVG's <desc> the same.
    The kinds, in page order."""
    from playwright.sync_api import expect

    expected = expected_for(http, where)
    figures = page.locator("figure.picture[data-kind]")
    kinds = []
    for i in range(figures.count()):
        figure = figures.nth(i)
        kind = figure.get_attribute("data-kind")
        numbers = json.loads(figure.get_attribute("data-values"))
        image = figure.locator("img")
        image.scroll_into_view_if_needed()
        expect(image).to_have_js_property("complete", True)
        assert image.evaluate("i => i.naturalWidth") > 0, f"{kind}: the picture did not load"
        assert numbers == expected(kind, numbers), kind
        answer = http.get(image.get_attribute("src"))
        assert answer.headers["content-type"] == "image/svg+xml"
        assert svg_numbers(answer.content) == numbers, kind
        kinds.append(kind)
    return kinds
