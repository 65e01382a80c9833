"""A running batch's page in a real browser (headless Chromium through Playwright) against a real
uvicorn server, Redis and a Celery worker: the page follows the batch live (its script asks
GET /batches/{id} under the page's Content-Security-Policy), loads itself again when the batch
ends, and then shows every unit as the report has it, with the timeline picture of the API's
numbers. Screenshots of the running and the finished batch are saved (tmp_path/screenshots,
and $ARENA_SCREENSHOTS when set)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tasks.store import Store
from tests.api.conftest import AUTH
from tests.api.picture_checks import check_pictures
from tests.api.test_page import (  # noqa: F401 (fixtures)
    browser,
    keep_screenshots,
    live_server,
    shoot,
)
from tests.integration.conftest import WorkerPools, wait_finished

pytestmark = pytest.mark.integration
EPISODES = 6  # per agent: 12 units, one at a time, a second or so each


def slow_mario() -> dict[str, Any]:
    return {
        "workload": "mario",
        "leaderboard": "live-mario",
        "agents": ["right", "jump-right"],
        "items": ["1-1"],
        "protocol": {"episodes": EPISODES, "seed": 3},
        "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 400},
    }


def test_a_running_batch_is_followed_live(
    browser: Any,  # noqa: F811
    live_server: str,  # noqa: F811
    db: Store,
    workers: WorkerPools,
    cluster_env: dict[str, str],
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    http = httpx.Client(base_url=live_server, timeout=30)
    submitted = http.post("/batches?run_id=live-mario", json=slow_mario(), headers=AUTH)
    assert submitted.status_code == 202, submitted.text
    batch_id, total = submitted.json()["batch_id"], submitted.json()["total"]
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if "Security Policy" in m.text else None)
    page.goto(f"{live_server}/ui/batches/live-mario")  # no worker yet: it waits
    assert page.locator("b.status").inner_text() == "running"
    assert page.locator("span.counts").inner_text() == f"0/{total} units, 0 errors"
    assert page.locator("tr.unit.waiting").count() == total
    assert page.locator("#live").get_attribute("data-url") == f"/batches/{batch_id}"

    workers.start(cluster_env, concurrency=1)
    # The page's own poll moves its counts and progress bar (no reload before 10 s).
    counts = page.locator("span.counts")
    expect(counts).not_to_have_text(f"0/{total} units, 0 errors", timeout=60_000)
    done = int(counts.inner_text().split("/")[0])
    assert done > 0 and page.locator("progress.units").evaluate("p => p.value") == done
    page.reload()  # as the page does itself 10 s on: its table and timeline as they are now
    shots = tmp_path / "screenshots"
    shots.mkdir()
    saved = [shoot(page, shots, "batch-running")]

    assert wait_finished(db, batch_id, timeout=180) == "done"
    # The batch ended: the page loads itself again and shows it finished, every unit ran.
    expect(page.locator("b.status")).to_have_text("done", timeout=15_000)
    expect(counts).to_have_text(re.compile(rf"^{total}/{total} units"))
    assert page.locator("#live").count() == 0
    units = http.get(f"/batches/{batch_id}").json()["report"]["units"]
    rows = page.locator("tr.unit")
    assert rows.count() == total == len(units)
    for i, unit in enumerate(units):
        shown = json.loads(rows.nth(i).get_attribute("data-value"))
        assert (shown["unit_id"], shown["status"], shown["host"]) == (
            unit["unit_id"],
            unit["status"],
            unit["host"],
        )
    assert check_pictures(page, http, batch_id) == ["timeline"]
    saved.append(shoot(page, shots, "batch-done"))
    assert blocked == []

    keep_screenshots(saved)
