"""The `llm` agent end to end, against the scripted chat-completions server (a real HTTP server in
this process), real Redis and real Celery worker processes: no mocks.

- A model that plays tit-for-tat scores what the Python tit-for-tat scores, in one process (the
  whole alympics_lite suite, 8,200 requests) and on the cluster (`arena run SPEC`).
- An endpoint's requests per minute hold across worker processes; the batch's token and cost
  accounting is the endpoint's.
- `--replay-cache` reruns a batch from the cache, byte for byte, sending nothing; a batch never
  run fails its units at once, saying why.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration import conftest as integration
from tests.integration.conftest import ROOT, WorkerPools, arena
from tests.llm.chat_server import ChatServer
from tests.workers.jails import NO_BWRAP

pytestmark = pytest.mark.integration

# The integration tests' fixtures (their conftest is not this folder's): a real Redis, the
# environment pointing `arena` at it, and real Celery worker pools.
redis_url, cluster_env, workers = (
    integration.redis_url,
    integration.cluster_env,
    integration.workers,
)

MODEL = "arena-test-model"
GAMES = ["prisoners_dilemma", "public_goods", "auction", "colonel_blotto", "congestion"]
PRICES = {"prompt_per_1k": 0.5, "completion_per_1k": 1.5}

# The Python agent the model is compared with: the built-in tit-for-tat in the Prisoner's Dilemma
# and, in the other games, what the scripted server answers (tests/llm/chat_server.py), so every
# match set, not only the dilemma's, must come out the same. A package of its own (in tmp_path):
# its source fingerprint covers only this file.
SCRIPTED_AGENT = """
from workers.games.prisoners_dilemma import TitForTat


class Scripted:
    def reset(self, game=None, player=0, seed=0, **context):
        self.dilemma = TitForTat()
        self.dilemma.reset(game, player, seed)

    def act(self, observation):
        game = observation["game"]
        if game == "prisoners_dilemma":
            return self.dilemma.act(observation)
        if game == "public_goods":
            return 10
        if game == "auction":
            return round(float(observation["value"]) / 2, 2)
        if game == "colonel_blotto":
            return [20, 20, 20, 20, 20]
        return 1  # congestion: the bypass


def make():
    return Scripted()
"""


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(model=MODEL, behaviour="tit-for-tat") as chat:
        yield chat


def embedded_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """No cluster: `arena game benchmark` in this process, its data in `data_dir`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return {**env, "ARENA_DATA_DIR": str(data_dir), **extra}


def llm_spec(base_url: str, suite: str, board: str, seed: int = 0, **llm: Any) -> dict[str, Any]:
    agent = {"name": "tft-model", "llm": {"base_url": base_url, "model": MODEL, **llm}}
    return {
        "workload": "alympics",
        "leaderboard": board,
        "agents": [agent],
        "items": GAMES,
        "protocol": {"seed": seed},
        "params": {"suite": suite},
    }


def write(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(spec))
    return path


def ok(result: Any, what: str) -> Any:
    assert result.returncode == 0, f"{what}: rc {result.returncode}\n{result.stderr[-3000:]}"
    return result


def run_json(env: dict[str, str], spec: Path, report: Path, *extra: str) -> tuple[dict, dict]:
    """`arena run SPEC --json --output-path REPORT`: its summary (stdout) and its report."""
    out = ok(
        arena("run", str(spec), "--json", "--output-path", str(report), *extra, env=env), "run"
    )
    return json.loads(out.stdout), json.loads(report.read_text())


def outcome(unit: dict[str, Any]) -> dict[str, Any]:
    """What a match set came to (the unit's result less the llm accounting)."""
    result = {k: v for k, v in unit["result"].items() if k != "llm"}
    return {"item": unit["item"], "status": unit["status"], "reason": unit["reason"], **result}


def from_matches(out: dict[str, Any]) -> list[dict[str, Any]]:
    """`arena game benchmark --output json`'s matches, as `outcome` has them."""
    return [{k: v for k, v in m.items() if k != "llm"} for m in out["matches"]]


def dilemma(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """The Prisoner's Dilemma match sets: measures (raw, cooperation, faults) and payoffs."""
    return {
        o["item"]: {"measures": o["measures"], "episode_payoffs": o["episode_payoffs"]}
        for o in outcomes
        if o["item"].startswith("prisoners_dilemma@")
    }


def unit_llm_totals(report: dict[str, Any]) -> dict[str, Any]:
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "requests": 0}
    for unit in report["units"]:
        for key in totals:
            totals[key] += unit["result"]["llm"][key]
    return totals


def board_rows(env: dict[str, str], board: str) -> list[dict[str, Any]]:
    out = ok(arena("leaderboard", board, "--json", env=env), "leaderboard")
    rows: list[dict[str, Any]] = json.loads(out.stdout)["entries"]
    return rows


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


def test_a_tit_for_tat_model_scores_as_the_python_tit_for_tat_in_process_and_on_the_cluster(
    tmp_path: Path, server: ChatServer, cluster_env: dict[str, str], workers: WorkerPools
):
    """The lite suite (8,200 moves) three ways: the Python agent in one process, the model in one
    process and the model on two worker processes; the same match sets, Prisoner's Dilemma
    first, from `--output json`, the reports and `arena report`."""
    workers.start(cluster_env, concurrency=2)
    package = tmp_path / "agents" / "tftagent"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(SCRIPTED_AGENT)
    trusted = {
        "ARENA_TRUST_AGENTS": "true",
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "agents"), str(ROOT)]),
        **NO_BWRAP,
    }
    python_env = embedded_env(tmp_path / "python", **trusted)
    as_json = ("--output", "json", "--output-path")
    python = ok(
        arena(
            "game", "benchmark", "--agent", "tftagent:make", *as_json, str(tmp_path / "py.json"),
            env=python_env,
        ),
        "python agent",
    )  # fmt: skip
    python_out = json.loads(python.stdout)
    python_report = json.loads((tmp_path / "py.json").read_text())
    assert "llm" not in python_out

    started = time.monotonic()
    agent = f"llm:{MODEL}@{server.base_url}"
    model = ok(
        arena(
            "game", "benchmark", "--agent", agent, *as_json, str(tmp_path / "llm.json"),
            env=embedded_env(tmp_path / "model"),
        ),
        "llm agent in process",
    )  # fmt: skip
    in_process_s = time.monotonic() - started
    model_out = json.loads(model.stdout)
    model_report = json.loads((tmp_path / "llm.json").read_text())
    in_process_requests = len(server.requests)
    assert in_process_requests == 8_200, "the lite suite is 8,200 moves, one request each"
    assert all(r.status == 200 for r in server.requests)
    usage = model_out["llm"]
    assert (usage["requests"], usage["attempts"], usage["reasks"]) == (8_200, 8_200, 0)
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == server.usage_totals()
    assert model_report["summary"]["llm"] == usage
    assert model_out["agent"] == "llm-arena-test-model"

    spec = write(tmp_path / "lite.yaml", llm_spec(server.base_url, "alympics_lite", "llm-lite"))
    started = time.monotonic()
    cluster_summary, cluster_report = run_json(cluster_env, spec, tmp_path / "cluster.json")
    cluster_s = time.monotonic() - started
    assert cluster_summary["status"] == "done" and cluster_summary["counts"]["errors"] == 0
    assert len(server.requests) - in_process_requests == 8_200
    stored = json.loads(
        ok(arena("report", cluster_summary["batch_id"], env=cluster_env), "report").stdout
    )

    python_matches = from_matches(python_out)
    views = {
        "python --output json": python_matches,
        "python report": [outcome(u) for u in python_report["units"]],
        "model --output json": from_matches(model_out),
        "model report": [outcome(u) for u in model_report["units"]],
        "model on the cluster, report": [outcome(u) for u in cluster_report["units"]],
        "model on the cluster, arena report": [outcome(u) for u in stored["units"]],
    }
    expected = dilemma(python_matches)
    assert len(expected) == 2 and all(len(m["episode_payoffs"]) == 20 for m in expected.values())
    assert expected["prisoners_dilemma@tit-for-tat"]["measures"]["raw"] == 3.0
    for name, view in views.items():
        assert dilemma(view) == expected, name
    for name, view in views.items():  # and every other game's match sets too
        assert canonical(view) == canonical(python_matches), name
    python_row = python_report["results"]["alympics"]["tftagent-make"]
    for report in (model_report, cluster_report, stored):
        (row,) = next(iter(report["results"].values())).values()
        assert row["score"] == python_row["score"]
        assert row["stats"]["categories"] == python_row["stats"]["categories"]
    print(f"lite suite: in process {in_process_s:.1f}s, on 2 worker processes {cluster_s:.1f}s")


def test_requests_per_minute_hold_across_worker_processes_and_the_accounting_is_the_endpoints(
    tmp_path: Path, server: ChatServer, cluster_env: dict[str, str], workers: WorkerPools
):
    """alympics_smoke (87 moves) at 60 requests a minute: the endpoint never sees more than 60
    in any 60 s, so the batch takes a minute; tokens and cost as the endpoint counted them."""
    workers.start(cluster_env, concurrency=2)
    limited = llm_spec(
        server.base_url,
        "alympics_smoke",
        "llm-limited",
        limits={"requests_per_minute": 60},
        prices=PRICES,
    )
    started = time.monotonic()
    summary, report = run_json(
        cluster_env, write(tmp_path / "limited.yaml", limited), tmp_path / "r.json"
    )
    took = time.monotonic() - started
    assert summary["status"] == "done" and report["status"] == "done"
    assert report["counts"] == {"total": 13, "completed": 13, "errors": 0}
    assert all(u["status"] == "ok" for u in report["units"])

    assert len(server.requests) == 87 and all(r.status == 200 for r in server.requests)
    received = sorted(r.received for r in server.requests)
    # How far beyond 60 s after any request the endpoint got the 60th request after it.
    margin = min(b - a for a, b in zip(received, received[60:], strict=False)) - 60
    assert server.max_per_window(60) <= 60, f"the 61st request {-margin * 1000:.1f} ms early"
    assert received[-1] - received[0] >= 55, "held back: 87 requests at 60 a minute"
    assert took >= 55

    prompt, completion = server.usage_totals()
    cost = (prompt * PRICES["prompt_per_1k"] + completion * PRICES["completion_per_1k"]) / 1000
    for usage in (
        report["summary"]["llm"],
        report["results"]["llm-limited"]["tft-model"]["stats"]["llm"],
        board_rows(cluster_env, "llm-limited")[0]["stats"]["llm"],
        unit_llm_totals(report),
    ):
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == (prompt, completion)
        assert usage["requests"] == 87
        assert usage["cost_usd"] == pytest.approx(cost, rel=1e-9, abs=1e-9)
    print(
        f"smoke at 60 requests/min: {took:.1f}s, first to last request "
        f"{received[-1] - received[0]:.1f}s, at most {server.max_per_window(60)} in 60 s "
        f"(the 61st {margin * 1000:.1f} ms after 60 s)"
    )


def unit_views(report: dict[str, Any]) -> str:
    return canonical(
        [
            {k: u[k] for k in ("unit_id", "status", "reason", "error_kind", "result", "log_tail")}
            for u in report["units"]
        ]
    )


def row_view(row: dict[str, Any]) -> dict[str, Any]:
    """A board row less when it was written (a replay writes it again)."""
    return {k: v for k, v in row.items() if k not in ("updated_at", "provenance")}


def test_replay_cache_reruns_a_batch_byte_for_byte_without_the_endpoint(
    tmp_path: Path, server: ChatServer, cluster_env: dict[str, str], workers: WorkerPools
):
    workers.start(cluster_env, concurrency=2)
    spec = write(tmp_path / "smoke.yaml", llm_spec(server.base_url, "alympics_smoke", "llm-smoke"))
    first_summary, first = run_json(cluster_env, spec, tmp_path / "first.json")
    assert first["status"] == "done" and first["counts"]["errors"] == 0
    first_rows = board_rows(cluster_env, "llm-smoke")
    sent = len(server.requests)
    assert sent == 87

    # In one process too: its replay cache is the data folder's.
    local = embedded_env(tmp_path / "local")
    agent = f"llm:{MODEL}@{server.base_url}"
    bench = ("game", "benchmark", "--agent", agent, "--suite", "alympics_smoke", "--output", "json")
    local_first = ok(arena(*bench, env=local), "benchmark").stdout
    assert len(server.requests) == 2 * sent

    server.stop()
    replay_summary, replay = run_json(cluster_env, spec, tmp_path / "replay.json", "--replay-cache")
    assert replay_summary["batch_id"] == first_summary["batch_id"]
    assert replay["status"] == "done"
    assert unit_views(replay) == unit_views(first)
    assert canonical(replay["summary"]) == canonical(first["summary"])
    replay_rows = board_rows(cluster_env, "llm-smoke")
    assert canonical([row_view(r) for r in replay_rows]) == canonical(
        [row_view(r) for r in first_rows]
    )
    local_replay = ok(arena(*bench, "--replay-cache", env=local), "benchmark replay").stdout
    assert local_replay == local_first
    assert len(server.requests) == 2 * sent

    # Serving again, on the same port: a replay still sends nothing.
    server.start()
    _, again = run_json(cluster_env, spec, tmp_path / "again.json", "--replay-cache")
    assert unit_views(again) == unit_views(first)
    assert ok(arena(*bench, "--replay-cache", env=local), "again").stdout == local_first
    assert len(server.requests) == 2 * sent

    # A batch never run: every unit fails at once, saying why, and the command exits 1.
    never = write(
        tmp_path / "never.yaml", llm_spec(server.base_url, "alympics_smoke", "llm-never", seed=7)
    )
    started = time.monotonic()
    missed = arena(
        "run", str(never), "--replay-cache", "--json", "--output-path", str(tmp_path / "m.json"),
        env=cluster_env, timeout=120,
    )  # fmt: skip
    assert missed.returncode == 1, missed.stderr
    assert "not in the replay cache" in missed.stderr
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["counts"]["errors"] == 13
    assert all(
        u["status"] == "error" and "not in the replay cache" in (u["reason"] or "")
        for u in report["units"]
    ), [u["reason"] for u in report["units"]]
    local_missed = arena(*bench, "--seed", "7", "--replay-cache", env=local, timeout=120)
    assert local_missed.returncode == 1 and "not in the replay cache" in local_missed.stderr
    assert time.monotonic() - started < 60
    assert len(server.requests) == 2 * sent
