"""`arena compare BOARD A B --runs` and GET /leaderboards/{name}/compare-runs on a real Redis
holding a real Mario batch (its units run in this process on the emulator: tests/api/
picture_batches.py): 3 seeds × 2 algorithms, runs named `<algorithm>-seed<k>@<steps>`, each run
read at its latest checkpoint. The numbers are rliable's on the stored episode scores, computed
here apart (scipy's trim_mean and Mann-Whitney U, a numpy stratified bootstrap); bad groups are
one line and exit 2 (404/422 over HTTP, nothing stored changed)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient
from scipy import stats

from arena.embedded import embedded_redis
from arena.web.app import create_app
from tasks.settings import ArenaSettings
from tasks.store import Store
from tests.api.picture_batches import run_into
from tests.api.test_compare import World, arena, stored
from tests.scoring.test_runs import assert_same_interval, numpy_bootstrap, numpy_probability

pytestmark = pytest.mark.integration
BOARD = "seeds-1-1"
RUNS = [
    *({"name": f"jr-seed{k}@1k", "builtin": "jump-right"} for k in range(3)),
    {"name": "jr-seed0@500", "builtin": "right"},  # an earlier checkpoint: not the run's latest
    *({"name": f"rnd-seed{k}@1k", "builtin": "random"} for k in range(3)),
    {"name": "solo-seed0@1k", "builtin": "right"},  # an algorithm of one run
]
MARIO = {
    "workload": "mario",
    "leaderboard": "seeds",
    "agents": RUNS,
    "items": ["1-1"],
    "protocol": {"episodes": 4, "seed": 5},
    "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 120},
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("runs")
    with embedded_redis(folder / "redis") as url:
        db = Store(redis.Redis.from_url(url, decode_responses=True))
        run_into(db, MARIO, "seeds-mario")
        settings = ArenaSettings(redis_url=url, data_dir=folder / "data", api_tokens="t")
        with TestClient(create_app(settings)) as client:
            yield World(url, db, client)


def unit_matrix(db: Store, agents: list[str]) -> np.ndarray:
    """Runs × episodes as the units stored them, read here without the service."""
    (batch,) = {r.batch for r in db.leaderboard(BOARD)}
    units = db.unit_results(batch).values()
    return np.array(
        [
            [
                float(u.result["arena_score"])
                for u in sorted(units, key=lambda u: u.episode)
                if u.agent == agent
            ]
            for agent in agents
        ]
    )


def test_three_seeds_of_two_algorithms_give_rliables_numbers(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = arena(world, monkeypatch, "compare", BOARD, "jr", "rnd", "--runs", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert found["agents_a"] == ["jr-seed0@1k", "jr-seed1@1k", "jr-seed2@1k"]
    assert found["agents_b"] == ["rnd-seed0@1k", "rnd-seed1@1k", "rnd-seed2@1k"]
    assert found["episodes"] == [0, 1, 2, 3]
    a, b = unit_matrix(world.db, found["agents_a"]), unit_matrix(world.db, found["agents_b"])
    assert found["scores_a"] == a.tolist() and found["scores_b"] == b.tolist()
    c = found["comparison"]
    assert c["iqm_a"] == pytest.approx(stats.trim_mean(a, 0.25, axis=None), abs=1e-9)
    assert c["iqm_b"] == pytest.approx(stats.trim_mean(b, 0.25, axis=None), abs=1e-9)
    u = [stats.mannwhitneyu(a[:, t], b[:, t]).statistic / 9 for t in range(4)]
    assert c["probability"] == pytest.approx(float(np.mean(u)), abs=1e-12)
    rng = np.random.default_rng(1)
    x, y = (numpy_bootstrap(s, 20_000, rng) for s in (a, b))
    assert c["conclusive"]  # sticky actions: each side's episodes differ
    # 2,000 resamples here: the quantile moves by sqrt(.025·.975·(1/2000 + 1/20000)) ≈ 0.0037
    # around its target, within assert_same_interval's 0.012 (over 3 of them).
    assert_same_interval(c["ci95"], numpy_probability(x, y))
    for key, resampled in (("iqm_ci95_a", x), ("iqm_ci95_b", y)):
        assert_same_interval(c[key], stats.trim_mean(resampled.reshape(20_000, -1), 0.25, axis=1))
    assert c["trajectories_a"] >= len({v for run in found["scores_a"] for v in run})


def test_the_lines_and_the_route(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = arena(world, monkeypatch, "compare", BOARD, "jr", "rnd", "--runs")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        f"leaderboard {BOARD}: jr (3 runs) vs rnd (3 runs), 4 episodes each, latest checkpoints"
    )
    assert lines[1].startswith("IQM jr = ") and lines[2].startswith("IQM rnd = ")
    assert lines[3].startswith("P(jr > rnd) = ")
    code, out, err = arena(
        world, monkeypatch, "compare", BOARD, "jr", "rnd", "--runs", "--json", "--seed", "4"
    )
    answer = world.client.get(
        f"/leaderboards/{BOARD}/compare-runs", params={"a": "jr", "b": "rnd", "seed": "4"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == json.loads(out)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([BOARD, "jr", "nobody", "--runs"], "0 run(s) of 'nobody' on leaderboard 'seeds-1-1'"),
        ([BOARD, "solo", "jr", "--runs"], "1 run(s) of 'solo' on leaderboard 'seeds-1-1'"),
        ([BOARD, "jr", "rnd", "--runs", "--steps", "500"], "1 run(s) of 'jr' on leaderboard"),
        ([BOARD, "jr", "jr", "--runs"], "'jr' against itself; name two algorithms"),
        ([BOARD, "jr", "rnd", "--steps", "500"], "--steps: only with --runs"),
        (["nope", "jr", "rnd", "--runs"], "no leaderboard 'nope'"),
    ],
)
def test_bad_groups_are_one_line(
    world: World, monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    code, out, err = arena(world, monkeypatch, "compare", *argv)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("arena: error: ") and message in line, line


@pytest.mark.parametrize(
    ("path", "query", "status", "message"),
    [
        ("nope", {"a": "jr", "b": "rnd"}, 404, "no leaderboard 'nope'"),
        (BOARD, {"a": "solo", "b": "rnd"}, 422, "1 run(s) of 'solo'"),
        (BOARD, {"a": "jr", "b": "jr"}, 422, "'jr' against itself"),
    ],
)
def test_bad_groups_over_http_name_them(
    world: World, path: str, query: dict[str, str], status: int, message: str
) -> None:
    before = stored(world.url)
    answer = world.client.get(f"/leaderboards/{path}/compare-runs", params=query)
    assert answer.status_code == status and message in answer.json()["detail"], answer.text
    assert stored(world.url) == before
