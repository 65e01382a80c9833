"""The web page in a real browser (headless Chromium through Playwright) against a real uvicorn
server, Redis and Celery workers: a Mario, an Alympics and a race batch, every number on the
page checked against the JSON API, a race card's output expanded, the winner merged, and a
screenshot of each page saved (tmp_path/screenshots)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import imageio.v3 as iio
import pytest
import uvicorn
import yaml
from fastapi.testclient import TestClient

from arena.service.numbers import format_value
from arena.web.app import create_app
from tasks.settings import ArenaSettings
from tasks.store import Store
from tests.api.conftest import AUTH, TOKEN
from tests.api.picture_checks import check_pictures, expected_timeline
from tests.integration.conftest import ROOT, WorkerPools, wait_finished
from tests.needs import unavailable
from tests.race.projects import agent_spec_entries, git, make_python_repo

pytestmark = pytest.mark.integration
CHROMIUM = os.environ.get("ARENA_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
MIN_PNG_BYTES = 10_000


@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install playwright)")
    if not Path(CHROMIUM).is_file():
        unavailable(f"no chromium at {CHROMIUM} (scripts/install-test-tools installs it)")
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def live_server(api_settings: ArenaSettings) -> Iterator[str]:
    """The API under a real uvicorn server on 127.0.0.1, in a thread; its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(api_settings), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)
    sock.close()


def specs(repo_path: Path, branches: list[str], repo: Any) -> dict[str, dict[str, Any]]:
    alympics = yaml.safe_load((ROOT / "examples" / "alympics.yaml").read_text())
    return {
        "mario": {
            "workload": "mario",
            "leaderboard": "page-mario",
            "agents": ["right", "jump-right"],
            "items": ["1-1"],
            "protocol": {"episodes": 2, "seed": 5},
            "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 100},
        },
        "alympics": {**alympics, "leaderboard": "page-alympics"},
        "race": {
            "workload": "race",
            "task": "add a feature",
            "repo": str(repo_path),
            "agents": agent_spec_entries(repo, branches),
        },
    }


def shoot(page: Any, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > MIN_PNG_BYTES, f"{path}: a blank screenshot?"
    return path


def keep_screenshots(saved: list[Path]) -> None:
    """The test's screenshots copied to ARENA_SCREENSHOTS, a folder for CI's artifacts, if set."""
    keep = os.environ.get("ARENA_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for path in saved:
            shutil.copy(path, Path(keep) / path.name)
    print("screenshots:", *saved)


def shoot_picture(page: Any, folder: Path, name: str) -> Path:
    """A screenshot of a picture opened by itself (an SVG document: no full-page size, and a
    chart on white compresses below MIN_PNG_BYTES): it must not be blank."""
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    pixels = iio.imread(path)
    assert (pixels[..., :3] < 200).any(axis=-1).sum() > 2000, f"{path}: a blank screenshot?"
    return path


def check_index(page: Any, http: httpx.Client, ids: dict[str, str]) -> None:
    assert page.title() == "Arena · Arena"
    links = page.locator("ul.boards a").all_inner_texts()
    assert links == http.get("/leaderboards").json()
    for batch in http.get("/batches").json():
        row = page.locator(f'tr.batch[data-batch="{batch["id"]}"]')
        assert row.locator("td.status").inner_text() == batch["status"] == "done"
        assert row.locator("td.progress").inner_text() == f"{batch['completed']}/{batch['total']}"
    assert set(ids.values()) == {b["id"] for b in http.get("/batches").json()}


def check_board(page: Any, entries: list[dict[str, Any]], kind: str, http: httpx.Client) -> None:
    from playwright.sync_api import expect

    assert page.locator("table.board").get_attribute("data-kind") == kind
    rows = page.locator("tr.entry")
    assert rows.count() == len(entries) > 0
    board = page.url.rsplit("/", 1)[1]
    for i, entry in enumerate(entries):
        row = rows.nth(i)
        assert row.get_attribute("data-agent") == entry["agent"]
        assert row.locator("td.rank").inner_text() == str(entry["rank"])
        score = row.locator("td.score")
        assert json.loads(score.get_attribute("data-value")) == entry["score"]
        assert score.inner_text() == format_value(entry["score"], "number")
        history = http.get(f"/leaderboards/{board}/history/{entry['agent']}").json()
        trend = json.loads(row.locator("td.trend figure").get_attribute("data-values"))
        points = [p["score"] for p in trend["agents"][0]["points"]]
        assert points == [p["score"] for p in history["points"]] and points
        assert len(points) == (2 if kind == "mario" else 1)
        stats = entry["stats"]
        if kind == "mario":
            success = row.locator("td.success")
            low, high = (format_value(v, "percent", digits=3) for v in stats["success_ci95"])
            rate = format_value(stats["success_rate"], "percent", digits=3)
            shown = json.loads(row.locator("td.iqm").get_attribute("data-value"))
            if stats["trajectories"] < 2:  # one episode repeated: no interval (docs/mario.md)
                assert success.inner_text() == f"{rate} (1 distinct trajectory)"
                assert shown == {"point": stats["iqm_score"], "ci95": None, "trajectories": 1}
            else:
                assert success.inner_text() == f"{rate} [{low}, {high}]"
                assert shown == {"point": stats["iqm_score"], "ci95": stats["iqm_ci95"]}
            if i == 0:  # the best episode's replay: a GIF of the real game, checked on replay
                gif = http.get(row.locator("a.replay").get_attribute("href"), timeout=60)
                assert gif.status_code == 200 and gif.headers["content-type"] == "image/gif"
                frames = iio.imread(gif.content, extension=".gif", index=None)
                assert frames.shape[0] > 5 and frames.shape[1:3] == (240, 256)
                inline = page.locator("figure.best-episode img")  # the leader's, on the page itself
                assert inline.get_attribute("src") == row.locator("a.replay").get_attribute("href")
                page.locator("details.best-episode > summary").click()  # played above: kept
                expect(inline).to_have_js_property("complete", True, timeout=60_000)
                assert inline.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [256, 240]
        if kind in ("alympics", "race"):
            bars = stats["categories" if kind == "alympics" else "scores"]
            for category, value in bars.items():
                cell = row.locator(f"span.{category}")
                assert json.loads(cell.get_attribute("data-value")) == value
                assert cell.inner_text().strip() == format_value(value, "number")


def check_race(page: Any, results: dict[str, Any], http: httpx.Client) -> None:
    cards = page.locator("div.card")
    assert cards.count() == len(results["agents"]) == 3
    assert page.locator("b.winner").inner_text() == results["winner"]
    assert page.locator("b.verdict").inner_text() == results["verdict"]
    units = http.get(f"/batches/{results['batch_id']}").json()["report"]["units"]
    for i, agent in enumerate(results["agents"]):
        card = cards.nth(i)
        assert card.get_attribute("data-agent") == agent["name"]
        composite = card.locator("span.composite")
        assert json.loads(composite.get_attribute("data-value")) == agent["composite"]
        assert composite.inner_text() == format_value(agent["composite"], "number")
        band = "good" if agent["composite"] > 80 else "fair" if agent["composite"] >= 50 else "poor"
        assert band in (card.get_attribute("class") or "")
        for dim, value in agent["scores"].items():
            assert json.loads(card.locator(f"span.{dim}").get_attribute("data-value")) == value
        tail = card.locator("pre.tail.tests")
        assert not tail.is_visible()
        card.locator("details > summary").click()
        assert tail.is_visible()
        unit = next(u for u in units if u["agent"] == agent["name"])
        assert tail.inner_text().strip() == unit["result"]["tests"]["output_tail"].strip()
        assert "passed" in tail.inner_text()
        assert card.locator("pre.tail.lint").inner_text().strip() != ""


def test_the_web_page_in_a_browser(
    browser: Any,
    live_server: str,
    db: Store,
    workers: WorkerPools,
    cluster_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from playwright.sync_api import expect

    monkeypatch.setenv("ARENA_REPO_ROOTS", str(tmp_path))  # the API names no other repository
    repo = make_python_repo(tmp_path / "repo")
    workers.start(cluster_env, concurrency=4)
    http = httpx.Client(base_url=live_server, timeout=30)
    ids = {}
    batches = specs(repo.path, ["clean", "adds-tests", "breaks-test"], repo)
    mario = batches["mario"]
    for kind, spec in batches.items():
        response = http.post(f"/batches?run_id=page-{kind}", json=spec, headers=AUTH)
        assert response.status_code == 202, response.text
        ids[kind] = response.json()["batch_id"]
    for batch_id in ids.values():
        assert wait_finished(db, batch_id, timeout=120) == "done"
    again = http.post("/batches?fresh=true&run_id=page-mario-2", json=mario, headers=AUTH)
    assert again.status_code == 202, again.text  # a second point on each Mario trend
    ids["mario-2"] = again.json()["batch_id"]
    assert wait_finished(db, ids["mario-2"], timeout=120) == "done"

    shots = tmp_path / "screenshots"
    shots.mkdir()
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    # The page runs under its Content-Security-Policy: a style or script it blocks is a bug.
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if "Security Policy" in m.text else None)
    page.goto(f"{live_server}/")
    check_index(page, http, ids)
    saved = [shoot(page, shots, "index")]
    race_board = next(n for n in http.get("/leaderboards").json() if n.startswith("race-"))
    for board, kind, pictures in (
        ("page-mario-1-1", "mario", ["trend", "trend", "episodes"]),
        ("page-alympics", "alympics", ["trend", "bars", "heatmap"]),
        (race_board, "race", ["trend"] * 3 + ["bars"]),
    ):
        page.goto(f"{live_server}/ui/leaderboards/{board}")
        check_board(page, http.get(f"/leaderboards/{board}").json()["entries"], kind, http)
        assert check_pictures(page, http, board) == pictures
        saved.append(shoot(page, shots, board))
    page.goto(f"{live_server}/leaderboards/page-mario-1-1/charts/trend.svg")  # the nightly trend
    saved.append(shoot_picture(page, shots, "mario-trend"))

    page.goto(f"{live_server}/ui/races/page-race")
    results = http.get("/races/page-race").json()
    check_race(page, results, http)
    assert check_pictures(page, http, results["batch_id"]) == ["race"]
    saved.append(shoot(page, shots, "race"))
    main = git(repo.path, "rev-parse", "main")
    merge = page.locator("form.merge")
    merge.locator("button").click()
    # expect() waits in Playwright's own world: the page's CSP admits no eval (wait_for_function)
    expect(page.locator("#merge-answer")).to_have_text(re.compile(r"^401: "))
    assert git(repo.path, "rev-parse", "main") == main
    merge.locator("input[name=token]").fill(TOKEN)
    merge.locator("button").click()
    expect(page.locator("#merge-answer")).to_have_text(re.compile(r"^200: merged clean"))
    assert git(repo.path, "rev-parse", "main") != main
    saved.append(shoot(page, shots, "race-merged"))
    page.goto(f"{live_server}/ui/batches/page-mario")
    check_batch_page(page, http, ids["mario"])
    saved.append(shoot(page, shots, "batch"))
    assert blocked == []

    keep_screenshots(saved)


def check_batch_page(page: Any, http: httpx.Client, batch_id: str) -> None:
    """A finished batch's page: its state, a row per unit as its report has it (status,
    duration, worker, error kind and reason), each log link and the report link answering."""
    detail = http.get(f"/batches/{batch_id}").json()
    batch, units = detail["batch"], detail["report"]["units"]
    assert page.locator("b.status").inner_text() == batch["status"] == "done"
    assert page.locator("#live").count() == 0  # nothing to follow
    counts = json.loads(page.locator("span.counts").get_attribute("data-value"))
    assert counts == [batch["completed"], batch["total"], batch["errors"]]
    rows = page.locator("tr.unit")
    assert rows.count() == len(units) == batch["total"]
    for i, unit in enumerate(units):
        shown = json.loads(rows.nth(i).get_attribute("data-value"))
        assert shown["unit_id"] == unit["unit_id"] == rows.nth(i).get_attribute("data-unit")
        for key in ("status", "duration_s", "host", "error_kind", "reason"):
            assert shown[key] == unit[key], key
        assert rows.nth(i).locator("td.host").inner_text() == unit["host"]
        link = rows.nth(i).locator("a.log")
        if unit["log_tail"]:
            log = http.get(link.get_attribute("href"))
            assert log.status_code == 200 and log.text.endswith(unit["log_tail"])
        else:
            assert link.count() == 0
    report = http.get(page.locator("a.report").get_attribute("href"))
    assert report.status_code == 200 and report.json() == detail["report"]
    assert check_pictures(page, http, batch_id) == ["timeline"]
    shown = json.loads(page.locator("figure.timeline").get_attribute("data-values"))
    assert shown == expected_timeline(http, batch_id)


def test_the_index_refreshes_while_a_batch_runs(client: TestClient) -> None:
    from tests.api.test_api import small_spec

    sub = client.post("/batches?run_id=page-wait", json=small_spec(), headers=AUTH).json()
    index = client.get("/")  # no workers: the batch waits in the queue
    assert index.headers["content-type"].startswith("text/html")
    assert '<meta http-equiv="refresh" content="5">' in index.text
    assert f'data-batch="{sub["batch_id"]}"' in index.text and f">0/{sub['total']}<" in index.text
    assert f'<a href="/ui/batches/{sub["batch_id"]}">' in index.text  # the batch's own page
    for path in ("/ui/leaderboards/nope", "/ui/races/nope", f"/ui/races/{sub['batch_id']}"):
        assert client.get(path).status_code == 404, path
    assert "/ui/races/{batch_id}" not in client.get("/openapi.json").json()["paths"]


BANDS = [(100, "good"), (80.5, "good"), (80, "fair"), (50, "fair"), (49.9, "poor"), (None, "poor")]


@pytest.mark.parametrize(("value", "band"), BANDS)
def test_colour_bands(value: float | None, band: str) -> None:
    from arena.web.html import band as colour

    assert colour(value) == band


def test_a_race_page_says_why_it_failed_or_needs_review() -> None:
    """The reason a race failed at the start (or is held for review) is on its page, escaped:
    pip's message can quote whatever the branch declared."""
    from arena.web.page import failed_or_review

    failed = failed_or_review({"failed_reason": "the base's environment: <script>x</script>"})
    assert failed.startswith('<p class="failed-reason">Failed: the base')
    assert "<script>" not in failed and "&lt;script&gt;" in failed
    review = failed_or_review({"failed_reason": None, "review_reason": "1 check did not run"})
    assert review == '<p class="review-reason">Review: 1 check did not run</p>'
    assert failed_or_review({"verdict": "auto-merge"}) == ""


def test_a_race_card_names_the_baseline_tests_its_branch_broke() -> None:
    """Each agent's card says which baseline tests its branch broke or skipped, escaped (a
    parametrised test id can hold any text); a card whose branch changed none says nothing."""
    from arena.web.page import race_card

    row = {
        "rank": 1,
        "name": "B",
        "composite": 96.5,
        "scores": {},
        "branch": "b",
        "commit": "c" * 40,
        "test_changes": {"broken": ["t::test_int_bytes[0-<b>]"], "skipped": [], "missing": []},
    }
    card = race_card(row, {}, True, "b1")
    assert (
        '<p class="test-changes">broke 1 baseline test (t::test_int_bytes[0-&lt;b&gt;])</p>' in card
    )
    for changes in (None, {"broken": [], "skipped": [], "missing": [], "unnamed": False}):
        assert "test-changes" not in race_card({**row, "test_changes": changes}, {}, True, "b1")
