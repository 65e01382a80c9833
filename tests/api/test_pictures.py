"""The pictures' routes (docs/api.md, "Pictures") on a real Redis holding real batches (a Mario
board evaluated on two nights, an Alympics board, a race: their units run in this process,
tests/api/picture_batches.py): every SVG and PNG route answers its content type, an SVG parses
as XML and carries the numbers the JSON API gives, a PNG is a PNG, the same numbers give the
same bytes and a browser that has a picture gets a 304; the page's figures carry the same
numbers; the report downloads."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from arena.embedded import embedded_redis
from arena.web.app import create_app
from arena.web.charts.cache import Kept
from tasks.settings import ArenaSettings
from tasks.store import Store
from tests.api.picture_batches import ALYMPICS_BOARD, MARIO_BOARD, run_all
from tests.api.picture_checks import (
    PNG_MAGIC,
    expected_board,
    expected_race,
    expected_timeline,
    svg_numbers,
)

pytestmark = pytest.mark.integration
BOARD_KINDS = [
    (MARIO_BOARD, "episodes"),
    (MARIO_BOARD, "trend"),
    (ALYMPICS_BOARD, "trend"),
    (ALYMPICS_BOARD, "bars"),
    (ALYMPICS_BOARD, "heatmap"),
]


class World:
    def __init__(self, client: TestClient, ids: dict[str, str]) -> None:
        self.client, self.ids = client, ids

    def race_board(self) -> str:
        names: list[str] = self.client.get("/leaderboards").json()
        return next(n for n in names if n.startswith("race-"))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("pictures")
    with embedded_redis(folder / "redis") as url:
        ids = run_all(Store(redis.Redis.from_url(url, decode_responses=True)), folder)
        settings = ArenaSettings(redis_url=url, data_dir=folder / "data", api_tokens="t")
        with TestClient(create_app(settings)) as client:
            yield World(client, ids)


def fetch(client: TestClient, url: str, media_type: str) -> bytes:
    answer = client.get(url)
    assert answer.status_code == 200, (url, answer.text)
    assert answer.headers["content-type"] == media_type, url
    assert answer.headers["etag"].startswith('"')
    body: bytes = answer.content
    return body


@pytest.mark.parametrize(("board", "kind"), BOARD_KINDS)
def test_a_boards_picture_as_svg_and_png(world: World, board: str, kind: str) -> None:
    client = world.client
    svg = fetch(client, f"/leaderboards/{board}/charts/{kind}.svg", "image/svg+xml")
    assert svg_numbers(svg) == expected_board(client, board, kind)
    png = fetch(client, f"/leaderboards/{board}/charts/{kind}.png", "image/png")
    assert png.startswith(PNG_MAGIC) and len(png) > 2000


def test_one_agents_trend_and_a_race_boards_bars(world: World) -> None:
    client = world.client
    svg = fetch(
        client, f"/leaderboards/{MARIO_BOARD}/charts/trend.svg?agent=right", "image/svg+xml"
    )
    numbers = svg_numbers(svg)
    assert numbers == expected_board(client, MARIO_BOARD, "trend", agent="right")
    assert [a["agent"] for a in numbers["agents"]] == ["right"]
    assert len(numbers["agents"][0]["points"]) == 2  # two nights
    assert all(p["ci95"] is not None for p in numbers["agents"][0]["points"])
    board = world.race_board()
    svg = fetch(client, f"/leaderboards/{board}/charts/bars.svg", "image/svg+xml")
    numbers = svg_numbers(svg)
    assert numbers == expected_board(client, board, "bars")
    assert list(numbers["columns"]) == [
        f"scores.{d}" for d in expected_race(client, world.ids["race"])["dimensions"]
    ]


def test_a_races_picture(world: World) -> None:
    race = world.ids["race"]
    svg = fetch(world.client, f"/races/{race}/chart.svg", "image/svg+xml")
    numbers = svg_numbers(svg)
    assert numbers == expected_race(world.client, race)
    assert numbers["verdict"] == "auto-merge" and numbers["winner"] == "clean"
    png = fetch(world.client, f"/races/{race}/chart.png", "image/png")
    assert png.startswith(PNG_MAGIC)


def test_a_batchs_timeline(world: World) -> None:
    batch = world.ids["mario"]
    svg = fetch(world.client, f"/batches/{batch}/chart.svg", "image/svg+xml")
    numbers = svg_numbers(svg)
    assert numbers == expected_timeline(world.client, batch)
    assert len(numbers["spans"]) == numbers["total"] == 6
    png = fetch(world.client, "/batches/pictures-mario/chart.png", "image/png")  # a run id
    assert png.startswith(PNG_MAGIC)


def test_the_same_numbers_give_the_same_bytes_and_a_304(world: World) -> None:
    """Deterministic SVG (no date, a fixed hash salt) and PNG; the ETag is the numbers'."""
    from arena.service.pictures import board_picture
    from arena.web.charts.draw import draw

    url = f"/leaderboards/{ALYMPICS_BOARD}/charts/heatmap.svg"
    first = world.client.get(url)
    assert "Date" not in first.text and "<dc:date>" not in first.text
    policy = first.headers["content-security-policy"]
    assert "script-src" not in policy and policy.startswith("default-src 'none'")
    again = world.client.get(url, headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    db = world.client.app.state.api.db  # type: ignore[attr-defined]
    numbers = board_picture(db, ALYMPICS_BOARD, "heatmap")
    for fmt in ("svg", "png"):
        assert draw("heatmap", fmt, numbers) == draw("heatmap", fmt, numbers)
    assert draw("heatmap", "svg", numbers) == first.content  # kept, then drawn anew: the same


def test_kept_pictures_stay_under_their_budget() -> None:
    kept = Kept(max_bytes=10)
    kept.put("a", b"12345")
    kept.put("b", b"12345")
    assert kept.get("a") == b"12345"  # a used last: b goes first
    kept.put("c", b"123")
    assert kept.get("b") is None and kept.get("a") == b"12345" and kept.get("c") == b"123"
    kept.put("huge", b"x" * 11)
    assert kept.get("huge") is None and len(kept) == 2


@pytest.mark.parametrize(
    ("url", "status", "detail"),
    [
        ("/leaderboards/nope/charts/trend.svg", 404, "no leaderboard 'nope'"),
        (f"/leaderboards/{ALYMPICS_BOARD}/charts/episodes.png", 404, "has no episodes chart"),
        (f"/leaderboards/{MARIO_BOARD}/charts/heatmap.svg", 404, "has no heatmap chart"),
        (f"/leaderboards/{MARIO_BOARD}/charts/trend.svg?agent=nobody", 404, "no agent 'nobody'"),
        (f"/leaderboards/{MARIO_BOARD}/charts/pie.svg", 422, "episodes"),
        ("/races/pictures-mario/chart.svg", 404, "not a race"),
        ("/batches/nope/chart.png", 404, "nope"),
        ("/batches/nope/report", 404, "nope"),
    ],
)
def test_what_has_no_picture_is_named(world: World, url: str, status: int, detail: str) -> None:
    answer = world.client.get(url)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert detail in json.dumps(answer.json()["detail"])


def test_the_report_downloads(world: World) -> None:
    batch = world.ids["alympics"]
    answer = world.client.get("/batches/pictures-alympics/report")
    assert answer.status_code == 200
    disposition = answer.headers["content-disposition"]
    assert disposition == 'attachment; filename="arena-report-pictures-alympics.json"'
    assert answer.json() == world.client.get(f"/batches/{batch}").json()["report"]


def figures(page: str) -> list[tuple[str, dict[str, Any], str]]:
    """(kind, numbers, the <img>'s src) of each picture on a page."""
    found = re.findall(
        r'<figure class="picture [^"]*" data-kind="([^"]+)" data-values="([^"]*)">'
        r'(?:<a [^>]*>)?<img src="([^"]+)"',
        page,
    )
    return [
        (kind, json.loads(html.unescape(values)), html.unescape(src)) for kind, values, src in found
    ]


def test_each_page_shows_its_pictures_with_the_apis_numbers(world: World) -> None:
    client, ids = world.client, world.ids
    pages = {
        f"/ui/leaderboards/{MARIO_BOARD}": ["trend", "trend", "episodes"],
        f"/ui/leaderboards/{ALYMPICS_BOARD}": ["trend", "bars", "heatmap"],
        f"/ui/races/{ids['race']}": ["race"],
        f"/ui/batches/{ids['mario']}": ["timeline"],
    }
    for url, kinds in pages.items():
        page = client.get(url).text
        shown = figures(page)
        assert [k for k, _, _ in shown] == kinds, url
        for _, numbers, src in shown:
            assert svg_numbers(fetch(client, src, "image/svg+xml")) == numbers, src
    mario = client.get(f"/ui/leaderboards/{MARIO_BOARD}").text
    (_, episodes, _) = figures(mario)[2]
    assert episodes == expected_board(client, MARIO_BOARD, "episodes")
    assert 'class="picture best-episode"' in mario and f"/ui/replays/{ids['mario-2']}/" in mario
