"""Evaluation during training (issue 25; docs/mario.md, "Evaluating while training") on the
embedded default shared by every command (issue 32): PPO trains on 1-1 with ArenaCallback while a
second training process (tests/integration/ppo_trainer.py) trains on the same data folder, and
`arena api` serves it; meanwhile `arena mario series`, `arena compare` and the board page (in
Chromium) read the evaluations as they land. Every checkpoint of both runs is evaluated, the
learning curve has one point per checkpoint, each equal to a separate evaluation of that
checkpoint (`arena run` of a spec naming all five, on another data folder), and the cluster stops
once training, the second process and the API are gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import ROOT, arena
from tests.integration.ppo_trainer import EPISODES, PARAMS, PREPROCESS, SEED, train
from tests.integration.test_embedded import embedded_env, no_leftovers
from tests.integration.test_embedded_host import answering, started
from tests.integration.test_serve import _free_port
from tests.needs import unavailable

pytestmark = pytest.mark.integration
STEPS, EVERY = 5_000, 1_000
BOARD = "mario-1-1"


class Readers(threading.Thread):
    """Users reading the folder while training runs: `arena mario series`, `arena compare` and
    the board's page (its HTML, and in Chromium when there is one), each noting when it first
    saw ppo-a's evaluations."""

    def __init__(self, base: str, env: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.base, self.env, self.done = base, env, threading.Event()
        self.series_at: float | None = None
        self.compared_at: float | None = None
        self.page_at: float | None = None
        self.browser: str | None = None  # the browser check's failure, or "missing"
        self.browser_at: float | None = None

    def run(self) -> None:
        while not self.done.wait(2) and not self.seen_all():
            read = arena("mario", "series", BOARD, "ppo-a", "--json", env=self.env)
            points = json.loads(read.stdout)["points"] if read.returncode == 0 else []
            if points and self.series_at is None:
                self.series_at = time.time()
            if len(points) >= 2 and self.compared_at is None:
                pair = [points[1]["agent"], points[0]["agent"]]
                compared = arena("compare", BOARD, *pair, "--json", env=self.env)
                if compared.returncode == 0 and json.loads(compared.stdout):
                    self.compared_at = time.time()
            if points and self.page_at is None:
                html = httpx.get(f"{self.base}/ui/leaderboards/{BOARD}", timeout=10).text
                if 'data-kind="series"' in html and points[0]["agent"] in html:
                    self.page_at = time.time()
            if self.page_at is not None and self.browser_at is None and self.browser is None:
                self.in_browser()

    def seen_all(self) -> bool:
        browser = self.browser_at is not None or self.browser is not None
        return browser and None not in (self.series_at, self.compared_at, self.page_at)

    def in_browser(self) -> None:
        from tests.api.test_page import CHROMIUM, CHROMIUM_ARGS

        if not Path(CHROMIUM).is_file():
            self.browser = "missing"
            return
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = chromium.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"{self.base}/ui/leaderboards/{BOARD}")
            curves = page.locator('figure.picture[data-kind="series"]')
            values = [
                curves.nth(i).get_attribute("data-values") or "" for i in range(curves.count())
            ]
            image = curves.first.locator("img")
            image.scroll_into_view_if_needed()
            page.wait_for_function("i => i.complete", arg=image.element_handle())
            loaded = image.evaluate("i => i.naturalWidth") > 0
            chromium.close()
        if loaded and any("ppo-a@" in v for v in values):
            self.browser_at = time.time()
        else:
            self.browser = f"no loaded learning curve of ppo-a in the page: {values}"


def test_checkpoints_are_evaluated_while_ppo_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if not os.environ.get("CI"):  # CI installs the sb3 extra: there it must run
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    data = tmp_path / "data"
    env = embedded_env(data)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ARENA_REDIS_URL", raising=False)
    port = _free_port()
    api = started("api", "--port", str(port), env=env)
    request.addfinalizer(api.kill)  # a failing test leaves no API keeping the cluster
    base = f"http://127.0.0.1:{port}"
    answering(f"{base}/", api)
    second = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.ppo_trainer", "ppo-b", "2000", "1000",
         str(tmp_path / "checkpoints-b")],
        cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    readers = Readers(base, env)
    readers.start()
    try:
        done = train("ppo-a", STEPS, EVERY, tmp_path / "checkpoints")
        out, err = second.communicate(timeout=900)
    finally:
        readers.done.set()
        readers.join(120)
        second.kill()
    trained = float(done["trained"])  # type: ignore[arg-type]
    assert done["errors"] == []
    names = [f"ppo-a@{k}k" for k in range(1, 6)]
    submitted: list[Any] = done["submitted"]  # type: ignore[assignment]
    assert [agent for agent, _, _ in submitted] == names
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("*.zip")) == [
        f"{n}.zip" for n in names
    ]
    assert (tmp_path / "checkpoints" / "best" / "best_model.zip").is_file()  # the best so far
    # The second training process on the same folder: attached, every checkpoint evaluated.
    assert second.returncode == 0, err[-3000:]
    run_b = json.loads(out.splitlines()[-1])
    assert run_b["errors"] == []
    assert [agent for agent, _, _ in run_b["submitted"]] == ["ppo-b@1k", "ppo-b@2k"]

    http = httpx.Client(base_url=base, timeout=30)
    batches = [http.get(f"/batches/{b}").json()["batch"] for _, b, _ in submitted]
    theirs = [http.get(f"/batches/{b}").json()["batch"] for _, b, _ in run_b["submitted"]]
    assert all(b["status"] == "done" for b in batches + theirs), batches + theirs
    series = http.get(f"/leaderboards/{BOARD}/series/ppo-a").json()
    series_b = http.get(f"/leaderboards/{BOARD}/series/ppo-b").json()
    assert [p["agent"] for p in series_b["points"]] == ["ppo-b@1k", "ppo-b@2k"]
    # Evaluated while training went on: finished before its last step, and read meanwhile.
    during = [b for b in batches if b["finished_at"] < trained]
    assert len(during) >= 3, ([b["finished_at"] for b in batches], trained)
    for seen in ("series_at", "compared_at", "page_at"):
        at = getattr(readers, seen)
        assert at is not None and at < trained, (seen, at, trained)
    assert readers.browser in (None, "missing"), readers.browser
    points = series["points"]
    assert [p["agent"] for p in points] == names
    assert [p["steps"] for p in points] == [1000, 2000, 3000, 4000, 5000]
    assert [p["batch"] for p in points] == [b for _, b, _ in submitted]

    # Every checkpoint evaluated again, apart (one batch of all five, another data folder):
    # each point has its own evaluation's numbers.
    alone = {
        "workload": "mario",
        "agents": [
            {"name": n, "sb3": str(tmp_path / "checkpoints" / f"{n}.zip"), "preprocess": PREPROCESS}
            for n in names
        ],
        "items": ["1-1"],
        "protocol": {"episodes": EPISODES, "seed": SEED},
        "params": PARAMS,
    }
    spec = tmp_path / "alone.json"
    spec.write_text(json.dumps(alone))
    other = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    other |= {
        "ARENA_DATA_DIR": str(tmp_path / "other"),
        "ARENA_WORKERS": "2",
        "PYTHONPATH": str(ROOT),
    }
    ran = arena("run", str(spec), "--json", env=other)
    assert ran.returncode == 0, ran.stderr
    rows = json.loads(ran.stdout)["results"]["mario-1-1"]
    assert sorted(rows) == names
    for point in points:
        row = rows[point["agent"]]
        assert point["score"] == row["score"], point["agent"]
        for key in ("success_rate", "success_ci95", "iqm_score", "iqm_ci95", "mean_score"):
            assert point[key] == row["stats"][key], (point["agent"], key)
        assert point["episodes"] == row["stats"]["episodes"] == 3
    api.send_signal(signal.SIGINT)
    api.communicate(timeout=60)
    no_leftovers(data)  # training, the second process and the API gone: the cluster stopped
    if readers.browser == "missing":
        unavailable("no chromium for the page's check (scripts/install-test-tools installs it)")
