"""What a board, `arena compare`, a series and the page say about episodes that are one
trajectory, on a real Redis holding real batches (the real emulator; units run in this process,
tests/api/picture_batches.py). Under `sticky_p: 0` the built-in `right` plays one trajectory
however many episodes it plays: everywhere it is compared or given an interval they say "1
distinct trajectory" and draw no conclusion. Before (c3f317a) nothing counted trajectories:
`arena compare` called such a pair "better" on an interval [1.000, 1.000] (issue 35: two
checkpoints of 4 byte-identical episodes each) and the series marked it, two such rows that
tied were "not separated" with "episodes needed", and the board gave each an interval. Under the
default protocol the same agent's 16 episodes are several trajectories, and an agent compared
with a fresh evaluation of itself (other master seed) gives an interval holding 0.5 (the A/A
check)."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from arena.cli.main import main
from arena.embedded import embedded_redis
from arena.service.boards import read_board
from arena.service.compare import episode_scores
from arena.service.pictures import episodes_picture, trajectories_of
from arena.web.app import create_app
from scoring.compare import compare_scores
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.submit import check_leaderboards
from tasks.validation import InputError
from tasks.workloads import validate_batch
from tests.api.picture_batches import run_into

pytestmark = pytest.mark.integration
STILL = "still-1-1"
AGENTS = [
    {"name": "walk@1k", "builtin": "right"},
    {"name": "walk@2k", "builtin": "right"},
    {"name": "walk@3k", "builtin": "jump-right"},
]


def mario(board: str, agents: list[Any], episodes: int, seed: int, **params: Any) -> Any:
    return {
        "workload": "mario",
        "leaderboard": board,
        "agents": agents,
        "items": ["1-1"],
        "protocol": {"episodes": episodes, "seed": seed},
        "params": {"max_steps": 60, **params},
    }


class World:
    def __init__(self, url: str, db: Store, client: TestClient) -> None:
        self.url, self.db, self.client = url, db, client


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("trajectories")
    with embedded_redis(folder / "redis") as url:
        db = Store(redis.Redis.from_url(url, decode_responses=True))
        run_into(db, mario("still", AGENTS, 4, 5, sticky_p=0))
        run_into(db, mario("lively", ["right"], 16, 0))
        for seed in (1, 2):  # the A/A check: one agent, two evaluations
            run_into(db, mario(f"aa{seed}", ["jump-right"], 8, seed, max_steps=100))
        settings = ArenaSettings(redis_url=url, data_dir=folder / "data", api_tokens="t")
        with TestClient(create_app(settings)) as client:
            yield World(url, db, client)


def arena(world: World, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str]:
    monkeypatch.setenv("ARENA_REDIS_URL", world.url)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue()


def trajectories(db: Store, board: str) -> dict[str, int]:
    return {r.agent: r.stats["trajectories"] for r in db.leaderboard(board)}


def test_the_rows_count_their_trajectories(world: World) -> None:
    still = trajectories(world.db, STILL)
    assert still["walk@1k"] == still["walk@2k"] == 1 and still["walk@3k"] >= 2
    assert trajectories(world.db, "lively-1-1")["right"] >= 2  # 16 episodes, sticky actions
    # A row written before the stats kept the count: counted from its unit results alike.
    board = read_board(world.db, STILL)
    for row in board.rows:
        results = [r for r in world.db.unit_results(row.batch).values() if r.agent == row.agent]
        older = row.model_copy(update={"stats": {**row.stats, "trajectories": None}})
        assert trajectories_of(world.db, older, results) == still[row.agent]


def test_compare_draws_no_conclusion_from_one_trajectory(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    for a, b in (("walk@3k", "walk@1k"), ("walk@2k", "walk@1k")):  # a win; a tie
        code, out = arena(world, monkeypatch, "compare", STILL, a, b, "--json")
        c = json.loads(out)["comparison"]
        assert code == 0 and c["conclusive"] is False and c["trajectories_b"] == 1
        assert c["better"] is None and c["episodes_needed"] is None
        answer = world.client.get(f"/leaderboards/{STILL}/compare", params={"a": a, "b": b})
        assert answer.json()["comparison"] == c
        code, out = arena(world, monkeypatch, "compare", STILL, a, b)
        assert code == 0, out
        assert "walk@1k's 4 episodes are 1 distinct trajectory" in out
        assert out.splitlines()[-1].startswith("no conclusion: ")
        for claim in ("better", "not separated", "interval", "roughly"):
            assert claim not in out


def test_the_series_and_the_board_say_one_trajectory(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out = arena(world, monkeypatch, "mario", "series", STILL, "walk")
    assert code == 0, out
    lines = out.splitlines()[2:]
    assert "(1 distinct trajectory)" in lines[0] and "(1 distinct trajectory)" in lines[1]
    assert lines[1].endswith("0.50 no conclusion: 1 distinct trajectory")
    assert lines[2].endswith("no conclusion: 1 distinct trajectory")
    points = world.client.get(f"/leaderboards/{STILL}/series/walk").json()["points"]
    assert [p["trajectories"] for p in points][:2] == [1, 1]
    assert all(p["vs_previous"]["better"] is None for p in points[1:])
    code, out = arena(world, monkeypatch, "leaderboard", STILL)
    rows = {line.split()[1]: line for line in out.splitlines() if "walk@" in line}
    assert "1 distinct trajectory" in rows["walk@1k"] and "1 distinct trajectory" in rows["walk@2k"]
    assert "1 distinct trajectory" not in rows["walk@3k"]


def test_the_page_shows_no_interval_for_one_trajectory(world: World) -> None:
    page = world.client.get(f"/ui/leaderboards/{STILL}").text
    rows = dict(re.findall(r'<tr class="entry" data-agent="([^"]+)">(.*?)</tr>', page))
    for agent in ("walk@1k", "walk@2k"):
        assert html.unescape(rows[agent]).count("(1 distinct trajectory)") == 2  # success, IQM
    versus = [re.search(r'<td class="versus"[^>]*>([^<]*)</td>', cells) for cells in rows.values()]
    shown = [m[1] for m in versus if m and m[1]]
    assert shown and all("no conclusion: 1 distinct trajectory" in text for text in shown)
    assert not any(word in text for text in shown for word in ("better", "worse", "separated"))


def test_an_agent_against_a_fresh_evaluation_of_itself(world: World) -> None:
    """A/A: jump-right evaluated under master seeds 1 and 2, compared as `arena compare`
    compares two rows: both sides several trajectories, and the interval holds 0.5."""
    sides = []
    for seed in (1, 2):
        board = read_board(world.db, f"aa{seed}-1-1")
        (agent,) = episodes_picture(world.db, board, board.rows).agents
        sides.append((episode_scores(agent), agent.trajectories or 0))
    (a, ta), (b, tb) = sides
    c = compare_scores(a, b, trajectories=(ta, tb))
    assert ta >= 2 and tb >= 2 and c.conclusive
    assert c.ci95[0] <= 0.5 <= c.ci95[1] and c.better is None


def test_a_board_of_the_old_default_refuses_the_new_one_saying_how_to_add_to_it(
    world: World,
) -> None:
    """The `still` board holds sticky_p 0 (the default before): a batch under the new default is
    refused naming the way back, one that says sticky_p 0 is its protocol."""
    fresh = validate_batch(mario("still", AGENTS[:1], 4, 5), asker="operator")
    with pytest.raises(InputError, match=re.escape("sticky_p 0: params: {sticky_p: 0} adds to")):
        check_leaderboards(world.db, fresh)
    same = validate_batch(mario("still", AGENTS[:1], 4, 5, sticky_p=0), asker="operator")
    assert check_leaderboards(world.db, same) == {STILL: world.db.leaderboard_protocol(STILL)}
