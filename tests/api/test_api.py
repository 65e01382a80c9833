"""The HTTP API on a real Redis and real Celery workers: auth, validation, a batch end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from arena.web.app import create_app, published_schema
from tasks.settings import ArenaSettings
from tasks.store import Store
from tests.api.conftest import AUTH
from tests.integration.conftest import WorkerPools, arena, bandit_spec, wait_finished
from tests.race.projects import agent_spec_entries, git, make_python_repo

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def small_spec(**overrides: Any) -> dict[str, Any]:
    spec = bandit_spec(**{"leaderboard": "api-it", **overrides})
    spec["protocol"] = {"episodes": 3, "seed": 5, "unit_time_limit_s": 60}
    spec["params"] = {"pulls": 100}
    return spec


def snapshot(db: Store) -> dict[str, Any]:
    """Every key in Redis with its type and size: what a refused request must leave alone."""
    keys = sorted(db.r.keys("*"))
    return {k: (db.r.type(k), db.r.hgetall(k) if db.r.type(k) == "hash" else None) for k in keys}


def test_published_openapi_is_the_generated_one() -> None:
    published = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert published == published_schema()
    body = published["paths"]["/batches"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/BatchSpec"}
    assert "workload" in published["components"]["schemas"]["BatchSpec"]["properties"]


def test_healthz_and_unknown_things_are_404(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    for path, named in (
        ("/batches/nope", "'nope'"),
        ("/leaderboards/nope", "'nope'"),
        ("/leaderboards/nope/history/a", "'nope'"),
        ("/batches/nope/logs/u", "'nope'"),
        ("/races/nope", "'nope'"),
    ):
        response = client.get(path)
        assert response.status_code == 404, path
        assert named in response.json()["detail"]


def test_writes_without_a_valid_token_change_nothing(
    client: TestClient, db: Store, workers: WorkerPools
) -> None:
    submitted = client.post("/batches", json=small_spec(), headers=AUTH)
    assert submitted.status_code == 202, submitted.text
    batch_id = submitted.json()["batch_id"]
    before = snapshot(db)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic eDp5"}):
        post = client.post("/batches", json=small_spec(leaderboard="other"), headers=headers)
        delete = client.delete(f"/batches/{batch_id}", headers=headers)
        for response in (post, delete):
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
            assert "token" in response.json()["detail"]
    assert snapshot(db) == before
    assert db.status(batch_id) == "running"  # no workers: it waits in the queue
    assert db.batch_ids() == [batch_id]


def test_no_configured_token_refuses_writes(api_settings: ArenaSettings, db: Store) -> None:
    with TestClient(
        create_app(api_settings.model_copy(update={"api_tokens": SecretStr("")}))
    ) as client:
        response = client.post("/batches", json=small_spec(), headers=AUTH)
        assert response.status_code == 503
        assert "ARENA_API_TOKENS" in response.json()["detail"]
        assert client.delete("/batches/x", headers=AUTH).status_code == 503
    assert db.batch_ids() == []


def test_a_redis_that_refuses_writes_is_503_saying_why(client: TestClient, db: Store) -> None:
    """Out of memory (maxmemory, noeviction): the submission is 503 naming the refusal, not a
    500 (issue 20, item 5); reads still answer; nothing is stored."""
    db.r.config_set("maxmemory", 1)
    try:
        response = client.post("/batches", json=small_spec(), headers=AUTH)
        assert response.status_code == 503, response.text
        assert response.json()["detail"].startswith("Redis refuses writes (")
        assert "maxmemory" in response.json()["detail"]
        assert client.get("/batches").status_code == 200
    finally:
        db.r.config_set("maxmemory", 0)
    assert db.batch_ids() == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s.pop("workload"), "workload"),
        (lambda s: s.update(surprise=1), "surprise"),
        (lambda s: s["protocol"].update(episodes=-1), "protocol.episodes"),
        (lambda s: s.update(workload="nosuch"), "workload"),
        (lambda s: s["params"].update(pulls="many"), "params.pulls"),
    ],
)
def test_invalid_spec_is_422_naming_the_field(
    client: TestClient, db: Store, change: Any, field: str
) -> None:
    spec = small_spec()
    change(spec)
    before = snapshot(db)
    response = client.post("/batches", json=spec, headers=AUTH)
    assert response.status_code == 422, response.text
    assert field in json.dumps(response.json()["detail"])
    assert snapshot(db) == before


def test_malformed_bodies_and_queries_are_4xx(client: TestClient, db: Store) -> None:
    for content in (b"{not json", b"[1, 2]", b"null", b"", b"x" * (300 * 1024)):
        response = client.post(
            "/batches", content=content, headers={**AUTH, "Content-Type": "application/json"}
        )
        assert 400 <= response.status_code < 500, content[:20]
        assert "detail" in response.json()
    bad_label = client.post("/batches?run_id=../x", json=small_spec(), headers=AUTH)
    assert bad_label.status_code == 422
    assert "run_id" in bad_label.json()["detail"]
    assert db.batch_ids() == []


def test_a_batch_over_http_runs_on_workers(
    client: TestClient, db: Store, workers: WorkerPools, cluster_env: dict[str, str]
) -> None:
    workers.start(cluster_env)
    response = client.post("/batches?run_id=api-run", json=small_spec(), headers=AUTH)
    assert response.status_code == 202, response.text
    sub = response.json()
    assert sub["state"] == "enqueued" and sub["enqueued"] == sub["total"] == 30
    assert wait_finished(db, sub["batch_id"], timeout=120) == "done"

    detail = client.get("/batches/api-run").json()
    assert detail["batch"]["status"] == "done" and detail["batch"]["completed"] == 30
    assert detail["batch"]["identity"]["batch_id"] == sub["batch_id"]
    report = detail["report"]
    assert report["batch_id"] == sub["batch_id"] and report["counts"]["completed"] == 30
    assert set(report["results"]["api-it"]) == set(small_spec()["agents"])
    assert [b["id"] for b in client.get("/batches").json()] == [sub["batch_id"]]

    board = client.get("/leaderboards/api-it").json()
    cli = arena("leaderboard", "api-it", "--json", env=cluster_env)
    assert cli.returncode == 0, cli.stderr
    assert board == json.loads(cli.stdout)
    assert client.get("/leaderboards").json() == ["api-it"]
    history = client.get("/leaderboards/api-it/history/ucb1").json()
    assert len(history["points"]) == 1 and history["points"][0]["batch"] == sub["batch_id"]

    metrics = client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    assert 'arena_batches_stored{status="done"} 1.0' in metrics.text
    labels = f'batch="{sub["batch_id"]}",batch_status="done",count="completed",workload="bandit"'
    counted = f"arena_batch_units{{{labels}}} 30.0"
    assert counted in metrics.text
    assert 'arena_queue_depth{queue="cpu"} 0.0' in metrics.text

    unit = report["units"][0]["unit_id"]
    assert client.get(f"/batches/{sub['batch_id']}/logs/{unit}").status_code == 404
    db.r.hset(db.k_logs(sub["batch_id"]), unit, "pulled arm 2\n")
    log = client.get(f"/batches/{sub['batch_id']}/logs/{unit}")
    assert log.headers["content-type"].startswith("text/plain") and log.text == "pulled arm 2\n"

    again = client.post("/batches", json=small_spec(), headers=AUTH).json()
    assert again["state"] == "already-done"
    ended = client.delete(f"/batches/{sub['batch_id']}", headers=AUTH)
    assert ended.status_code == 409 and "already ended" in ended.json()["detail"]
    not_race = client.get(f"/races/{sub['batch_id']}")
    assert not_race.status_code == 404 and "not a race" in not_race.json()["detail"]


def test_delete_cancels_a_running_batch(client: TestClient, db: Store) -> None:
    sub = client.post("/batches", json=small_spec(), headers=AUTH).json()
    assert db.status(sub["batch_id"]) == "running"  # no workers yet: nothing ran
    response = client.delete(f"/batches/{sub['batch_id'][:10]}", headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json() == {"batch_id": sub["batch_id"], "status": "cancelled"}
    assert db.status(sub["batch_id"]) == "cancelled"
    assert client.get(f"/batches/{sub['batch_id']}").json()["report"]["status"] == "cancelled"


def test_lost_redis_is_503(api_settings: ArenaSettings, tmp_path: Path) -> None:
    gone = api_settings.model_copy(update={"redis_url": f"unix://{tmp_path}/none.sock"})
    with TestClient(create_app(gone)) as client:
        for path in ("/healthz", "/batches", "/metrics"):
            response = client.get(path)
            assert response.status_code == 503, path
            assert "Redis unreachable" in response.json()["detail"]


def test_a_race_over_http(
    client: TestClient,
    db: Store,
    workers: WorkerPools,
    cluster_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(tmp_path))  # the API names no other repository
    repo = make_python_repo(tmp_path / "repo")
    spec = {
        "workload": "race",
        "task": "add a feature",
        "repo": str(repo.path),
        "agents": agent_spec_entries(repo, ["clean", "adds-tests"]),
    }
    workers.start(cluster_env)
    sub = client.post("/batches", json=spec, headers=AUTH).json()
    assert wait_finished(db, sub["batch_id"], timeout=120) == "done"
    results = client.get(f"/races/{sub['batch_id']}").json()
    cli = arena("race", "results", sub["batch_id"], "--json", env=cluster_env)
    assert results == json.loads(cli.stdout) and results["winner"] == "clean"

    main = git(repo.path, "rev-parse", "main")
    assert client.post(f"/races/{sub['batch_id']}/merge").status_code == 401
    assert git(repo.path, "rev-parse", "main") == main  # nothing merged
    merged = client.post(f"/races/{sub['batch_id']}/merge", headers=AUTH)
    assert merged.status_code == 200, merged.text
    assert "merged clean" in merged.json()["message"]
    parents = git(repo.path, "rev-list", "--parents", "-n", "1", "main").split()
    assert parents[2] == results["agents"][0]["commit"]
    again = client.post(f"/races/{sub['batch_id']}/merge", headers=AUTH)
    assert again.status_code == 409 and "moved since the race" in again.json()["detail"]
