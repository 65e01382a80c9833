"""What the page costs at 1,000 rows and 50 agents (docs/api.md, "Pictures"): measured and
printed, not asserted (`.venv/bin/python bench/page_pictures.py`; it needs Debian's chromium and
the playwright package, as tests/api/test_page.py does).

A Mario board of 50 agents evaluated on 20 nights: 1,000 history points, each night a batch of
50 agents x 20 episodes (1,000 units). The episodes are made up (no emulator: 20,000 episodes
would take hours) but stored, reduced and published as the workers and the reducer do
(save_unit, Workload.reduce, finish_batch), on a real Redis, and the page is served by a real
uvicorn and loaded in Chromium."""

from __future__ import annotations

import random
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import redis
import uvicorn

from arena.embedded import embedded_redis
from arena.web.app import create_app
from arena.web.charts.cache import KEPT
from scoring.mario import compute_arena_score
from tasks.execute import unit_result
from tasks.provenance import finished_provenance, provenance_of, utc_iso
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.mario import scoring_episode
from workers.mario.runner import encode_actions

AGENTS, NIGHTS, EPISODES = 50, 20, 20
CHROMIUM = "/usr/bin/chromium"
# The page's images but the replay a reader opens (in a closed <details>: never loaded by itself).
SHOWN_IMAGES = "[...document.images].filter(i => !i.closest('details:not([open])'))"
SHOWN = f"{SHOWN_IMAGES}.every(i => i.complete)"


def episode(rng: random.Random, skill: float, night: int) -> dict[str, Any]:
    max_x = max(40, int(min(3161, rng.gauss(400 + 2000 * skill + 30 * night, 300))))
    done = max_x > 3100
    raw: dict[str, Any] = {
        "level": "1-1", "completed": done, "world": 1, "stage": 1, "max_x": max_x,
        "steps": rng.randint(100, 900), "frames": 1000, "emulator_frames": 1100,
        "coins": rng.randint(0, 5), "time_remaining": rng.randint(0, 300) if done else 0,
        "lives_lost": 0 if done else 1, "wall_s": 1.0, "actions": encode_actions(b""),
    }  # fmt: skip
    raw["arena_score"] = compute_arena_score(scoring_episode(raw, 4))
    return raw


def night(db: Store, rng: random.Random, n: int) -> str:
    """One night's batch, stored and reduced: its id."""
    spec = {
        "workload": "mario",
        "leaderboard": "bench",
        "occasion": f"nightly@{n}",
        "agents": [{"name": f"agent-{i:02d}", "builtin": "random"} for i in range(AGENTS)],
        "items": ["1-1"],
        "protocol": {"episodes": EPISODES, "seed": 1},
        "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 1000},
    }
    batch = validate_batch(spec, asker="operator")
    workload = get_workload("mario")
    boards, units = workload.boards(batch), workload.expand(batch)
    submitted = provenance_of(batch, f"night-{n}")
    db.start_batch(batch.normalised(), "mario", boards, len(units), batch.identity, submitted)
    start, results = time.time(), []
    for k, unit in enumerate(units):
        took = rng.uniform(0.5, 3)
        result = unit_result(
            unit,
            took,
            status="ok",
            result=episode(rng, int(unit.agent[-2:]) / AGENTS, n),
            host=f"worker-{rng.randint(1, 8)}",
            started_at=utc_iso(start + k * 0.4),
            finished_at=utc_iso(start + k * 0.4 + took),
        )
        db.save_unit(batch.batch_id, result)
        results.append(result)
    info = db.batch(batch.batch_id)
    assert info is not None
    finished, per_agent = finished_provenance(submitted, info.created_at, results)
    db.finish_batch(batch.batch_id, workload.reduce(batch, results), boards, finished, per_agent)
    return batch.batch_id


def serve(url: str, folder: Path) -> tuple[str, uvicorn.Server]:
    """The API as `arena api` serves it (arena/web/serve.py: uvicorn on a host and port; one
    handed a bound socket, as the browser tests do, answers 40 ms late: its connections keep
    Nagle's algorithm, which meets the client's delayed ACK)."""
    app = create_app(ArenaSettings(redis_url=url, data_dir=folder / "data", api_tokens="x"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def timed(http: httpx.Client, path: str, n: int = 1, **kwargs: Any) -> tuple[float, httpx.Response]:
    """The median of n requests, in ms, and the last answer."""
    took = []
    for _ in range(n):
        start = time.perf_counter()
        answer = http.get(path, **kwargs)
        took.append(time.perf_counter() - start)
        assert answer.status_code in (200, 304), (path, answer.status_code)
    return statistics.median(took) * 1000, answer


def pictures(http: httpx.Client, batch: str) -> None:
    for path in [
        "/leaderboards/bench-1-1/charts/episodes.svg",
        "/leaderboards/bench-1-1/charts/episodes.png",
        "/leaderboards/bench-1-1/charts/trend.svg?agent=agent-25",
        "/leaderboards/bench-1-1/charts/trend.svg",
        f"/batches/{batch}/chart.svg",
        f"/batches/{batch}/chart.png",
    ]:
        drawn, answer = timed(http, path)
        kept = timed(http, path, 5)[0]
        again = timed(http, path, 5, headers={"If-None-Match": answer.headers["etag"]})[0]
        size = len(answer.content)
        print(f"{path}: drawn {drawn:.0f} ms ({size} B), kept {kept:.0f} ms, 304 {again:.0f} ms")


def in_chromium(base: str, paths: dict[str, str]) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        for name, path in paths.items():
            for run in ("first view (pictures drawn)", "again (pictures kept)"):
                # Taller than the page: every lazy picture is in view and loads at once.
                page = browser.new_page(viewport={"width": 1200, "height": 30000})
                page.route("**/*.gif", lambda route: route.abort())  # made-up episodes
                start = time.perf_counter()
                page.goto(base + path, wait_until="load")
                loaded = time.perf_counter() - start
                deadline = start + 120
                while not page.evaluate(SHOWN) and time.perf_counter() < deadline:
                    time.sleep(0.01)
                shown = time.perf_counter() - start
                images = page.evaluate(f"{SHOWN_IMAGES}.length")
                page.close()
                print(
                    f"Chromium {name}, {run}: load event {loaded * 1000:.0f} ms, "
                    f"all {images} images {shown * 1000:.0f} ms"
                )
        browser.close()


def main() -> None:
    folder, rng = Path(tempfile.mkdtemp()), random.Random(7)
    with embedded_redis(folder / "redis") as url:
        db = Store(redis.Redis.from_url(url, decode_responses=True))
        ids = [night(db, rng, n) for n in range(NIGHTS)]
        base, server = serve(url, folder)
        http = httpx.Client(base_url=base, timeout=120)
        board, batch = "/ui/leaderboards/bench-1-1", f"/ui/batches/{ids[-1]}"
        pages = {"board page, 50 agents x 20 nights": board, "batch page, 1,000 units": batch}
        for name, path in pages.items():
            first, answer = timed(http, path)
            again = timed(http, path, 5)[0]
            print(
                f"HTML {name}: first {first:.0f} ms ({len(answer.content)} B), again {again:.0f} ms"
            )
        in_chromium(base, pages)
        KEPT.clear()  # each picture drawn again, alone
        pictures(http, ids[-1])
        server.should_exit = True


if __name__ == "__main__":
    main()
