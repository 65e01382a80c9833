"""A training run's learning curve (docs/mario.md, "Series") on the board page in a real browser
(headless Chromium through Playwright) against a real uvicorn server and Redis: three
checkpoints `walk@<steps>` stored as board rows, the page's series picture loaded under its
Content-Security-Policy, beside the table and not over it, with the API's numbers; the SVG as
the browser draws it shows one mark per checkpoint, apart and in order of steps, on an axis of
training steps. Screenshots of the board and of the picture are saved (tmp_path/screenshots,
and $ARENA_SCREENSHOTS when set)."""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.picture_checks import check_pictures
from tests.api.test_page import (  # noqa: F401 (fixtures)
    browser,
    keep_screenshots,
    live_server,
    shoot,
    shoot_picture,
)
from tests.api.test_series import board  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration
RUN = "walk"
STEPS = re.compile(r"[0-9]+[kM]?")  # a tick written as a checkpoint's steps (steps_label)
MARKS = ("iqm", "best", "success")  # a mark per checkpoint in each (arena/web/charts/series.py)


def test_a_run_s_learning_curve_in_the_browser(
    browser: Any,  # noqa: F811
    live_server: str,  # noqa: F811
    board: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    http = httpx.Client(base_url=live_server, timeout=30)
    series = http.get(f"/leaderboards/{board}/series/{RUN}").json()
    steps = [p["steps"] for p in series["points"]]
    assert len(steps) >= 3 and steps == sorted(steps), series
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if "Security Policy" in m.text else None)
    page.goto(f"{live_server}/ui/leaderboards/{board}")

    curve = page.locator('figure.picture[data-kind="series"]')
    expect(curve).to_have_count(1)  # the run's learning curve, and only one
    assert json.loads(curve.get_attribute("data-values"))["series"] == [series]
    assert curve.locator("figcaption").inner_text().startswith(f"{RUN}: Learning curve")
    assert "by training steps" in curve.locator("figcaption").inner_text()
    image = curve.locator("img")
    assert image.get_attribute("alt").endswith(f"learning curve of {RUN}, {len(steps)} checkpoints")
    image.scroll_into_view_if_needed()
    expect(image).to_have_js_property("complete", True)
    assert image.evaluate("i => i.naturalWidth") > 0, "the learning curve did not load"
    # Drawn whole, inside the page's width, readable (not squeezed), below the table.
    shown, table = image.bounding_box(), page.locator("table").first.bounding_box()
    assert shown is not None and table is not None
    assert shown["width"] >= 0.9 * image.evaluate("i => i.naturalWidth"), shown
    assert shown["x"] >= 0 and shown["x"] + shown["width"] <= 1200, shown
    assert shown["y"] >= table["y"] + table["height"], (shown, table)
    kinds = check_pictures(page, http, board)  # every picture's numbers, the series' included
    assert kinds.count("series") == 1, kinds

    shots = tmp_path / "screenshots"
    shots.mkdir()
    saved = [shoot(page, shots, "series-board")]
    saved.append(check_drawn(browser, live_server + image.get_attribute("src"), steps, shots))
    assert blocked == []
    keep_screenshots(saved)


def check_drawn(chromium: Any, url: str, steps: list[int], shots: Path) -> Path:
    """The picture opened by itself, as Chromium lays out its SVG: one visible mark per
    checkpoint in each of its curves, apart from one another and left to right by steps, and
    the three panels' x axes named training steps, their ticks written as checkpoints' steps are."""
    page = chromium.new_page(viewport={"width": 900, "height": 400})
    page.goto(url)
    for curve in MARKS:
        marks = page.locator(f"g#{curve}-{RUN} use")
        assert marks.count() == len(steps), curve
        boxes = [marks.nth(i).bounding_box() for i in range(len(steps))]
        assert all(b is not None and b["width"] > 0 for b in boxes), (curve, boxes)
        xs = [b["x"] + b["width"] / 2 for b in boxes]
        widest = max(b["width"] for b in boxes)
        gaps = [right - left for left, right in pairwise(xs)]
        assert min(gaps) > widest, f"{curve}: checkpoints drawn over each other at x {xs}"
    texts = [t.strip() for t in page.locator("text").all_text_contents()]
    assert texts.count("training steps") == 3, texts  # each panel's x axis (IQM, success, max x)
    ticks = [t.strip() for t in page.locator("g[id^=xtick_] text").all_text_contents()]
    assert len(ticks) >= 4 and all(STEPS.fullmatch(t) for t in ticks), ticks
    return shoot_picture(page, shots, f"series-{RUN}")
