"""`arena compare` and the board page's neighbouring rows on a real Redis holding real batches
(a Mario board of three built-ins × 8 episodes and a bandit board, their units run in this
process: tests/api/picture_batches.py): the probability is U / (n·m) of the episodes the board's
rows were scored from; jump-right and random are not separated by 8 episodes, random and right
are; bad input is one line and exit 2; GET /leaderboards/{name}/compare answers what
`arena compare --json` prints, and bad input there is a 404 or 422 naming it, with nothing
stored changed; the page shows each row against the next."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
from collections.abc import Iterator
from itertools import pairwise

import pytest
import redis
from fastapi.testclient import TestClient
from scipy import stats

from arena.cli.main import main
from arena.embedded import embedded_redis
from arena.service.compare import compare_agents
from arena.web.app import create_app
from tasks.settings import ArenaSettings
from tasks.store import Store
from tests.api.picture_batches import run_into
from tests.integration.conftest import bandit_spec

pytestmark = pytest.mark.integration
BOARD = "versus-1-1"
BANDIT_BOARD = "versus-bandit"
MARIO = {
    "workload": "mario",
    "leaderboard": "versus",
    "agents": ["right", "jump-right", "random"],
    "items": ["1-1"],
    "protocol": {"episodes": 8, "seed": 5},
    "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 150},
}


class World:
    def __init__(self, url: str, db: Store, client: TestClient) -> None:
        self.url, self.db, self.client = url, db, client


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("compare")
    with embedded_redis(folder / "redis") as url:
        db = Store(redis.Redis.from_url(url, decode_responses=True))
        run_into(db, MARIO, "versus-mario")
        bandit = bandit_spec(leaderboard=BANDIT_BOARD, agents=["random", "greedy"])
        run_into(db, {**bandit, "protocol": {"episodes": 2, "seed": 1}, "params": {"pulls": 20}})
        settings = ArenaSettings(redis_url=url, data_dir=folder / "data", api_tokens="t")
        with TestClient(create_app(settings)) as client:
            yield World(url, db, client)


def arena(world: World, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("ARENA_REDIS_URL", world.url)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def unit_scores(db: Store, agent: str) -> list[float]:
    """The agent's episode scores as its units stored them, read here without the service."""
    (row,) = [r for r in db.leaderboard(BOARD) if r.agent == agent]
    units = db.unit_results(row.batch).values()
    return [float(u.result["arena_score"]) for u in units if u.agent == agent]


def test_compare_on_a_real_board(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = arena(world, monkeypatch, "compare", BOARD, "jump-right", "random", "--json")
    assert code == 0, err
    found = json.loads(out)
    jump, rand = unit_scores(world.db, "jump-right"), unit_scores(world.db, "random")
    assert sorted(found["scores_a"]) == sorted(jump) and sorted(found["scores_b"]) == sorted(rand)
    c = found["comparison"]
    assert c["probability"] == stats.mannwhitneyu(jump, rand).statistic / 64
    assert c["episodes_a"] == c["episodes_b"] == 8 and c["resamples"] == 2000
    low, high = c["ci95"]
    assert low <= c["probability"] <= high and low <= 0.5 <= high
    assert c["better"] is None and c["episodes_needed"] > 8
    code, out, _ = arena(world, monkeypatch, "compare", BOARD, "jump-right", "random")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (  # each side's distinct trajectories (sticky actions: all 8 differ)
        f"leaderboard {BOARD}: jump-right (8 episodes, 8 distinct trajectories) "
        "vs random (8, 8 distinct trajectories)"
    )
    assert lines[1].startswith(f"P(jump-right beats random) = {c['probability']:.3f}, ")
    assert f"95% interval [{low:.3f}, {high:.3f}]" in lines[1]
    assert lines[2].startswith("not separated: 8 and 8 episodes are too few to tell them apart")
    assert f"roughly {c['episodes_needed']:,} episodes each" in lines[2]


def test_a_separated_pair(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """right goes right at the same pace every episode; random's jumps take it past it in all
    8 (its worst episode scores above right's every one): P = 1 and the interval [1, 1]."""
    code, out, _ = arena(world, monkeypatch, "compare", BOARD, "right", "random")
    assert code == 0
    assert "P(right beats random) = 0.000, 95% interval [0.000, 0.000]" in out
    assert out.splitlines()[-1] == "random is better: the interval excludes 0.5"
    found = compare_agents(world.db, BOARD, "random", "right")
    assert found.comparison.probability == 1.0 and found.comparison.better == "a"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nope", "a", "b"], "no leaderboard 'nope'"),
        ([BOARD, "jump-right", "nobody"], "compare: no agent 'nobody' on leaderboard"),
        ([BOARD, "right", "right"], "'right' against itself"),
        ([BANDIT_BOARD, "random", "greedy"], "is a board of bandit: its rows keep no per-episode"),
        ([BOARD, "right", "random", "--resamples", "5"], "--resamples"),
    ],
)
def test_bad_input_is_one_line(
    world: World, monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    code, out, err = arena(world, monkeypatch, "compare", *argv)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("arena: error: ") and message in line, line


@pytest.mark.parametrize(
    ("a", "b", "seed"),
    [("jump-right", "random", None), ("random", "right", None), ("right", "jump-right", 3)],
)
def test_the_route_answers_as_the_cli(
    world: World, monkeypatch: pytest.MonkeyPatch, a: str, b: str, seed: int | None
) -> None:
    """The same model, the same numbers: the route and `arena compare --json` call one service
    function (compare_agents), with the CLI's defaults unless a seed is given."""
    options = [] if seed is None else ["--seed", str(seed)]
    code, out, err = arena(world, monkeypatch, "compare", BOARD, a, b, "--json", *options)
    assert code == 0, err
    query = {"a": a, "b": b} if seed is None else {"a": a, "b": b, "seed": str(seed)}
    answer = world.client.get(f"/leaderboards/{BOARD}/compare", params=query)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found == json.loads(out)
    assert (found["board"], found["a"], found["b"]) == (BOARD, a, b)
    assert found["comparison"]["seed"] == (seed or 0) and found["comparison"]["resamples"] == 2000


def stored(url: str) -> dict[bytes, object]:
    """Every key in Redis with its value: what a refused request must leave alone. Values, not
    DUMP's bytes: a hash stored as a hashtable is dumped in its table's order, which a read can
    change (an incremental rehash step) without changing a field."""
    r = redis.Redis.from_url(url)
    read = {
        b"string": r.get,
        b"hash": r.hgetall,
        b"list": lambda k: r.lrange(k, 0, -1),
        b"set": lambda k: sorted(r.smembers(k)),
        b"zset": lambda k: r.zrange(k, 0, -1, withscores=True),
    }
    return {k: (r.type(k), read.get(r.type(k), r.dump)(k)) for k in sorted(r.keys("*"))}


@pytest.mark.parametrize(
    ("path", "query", "status", "message"),
    [
        ("nope", {"a": "a", "b": "b"}, 404, "leaderboard: no leaderboard 'nope'"),
        (BOARD, {"a": "jump-right", "b": "nobody"}, 404, "compare: no agent 'nobody' on lead"),
        (BOARD, {"a": "nobody", "b": "random"}, 404, "compare: no agent 'nobody' on leaderboard"),
        (BOARD, {"a": "right", "b": "right"}, 422, "compare: 'right' against itself"),
        (BANDIT_BOARD, {"a": "random", "b": "greedy"}, 422, "is a board of bandit: its rows keep"),
    ],
)
def test_bad_input_over_http_names_it(
    world: World, path: str, query: dict[str, str], status: int, message: str
) -> None:
    before = stored(world.url)
    answer = world.client.get(f"/leaderboards/{path}/compare", params=query)
    assert answer.status_code == status and message in answer.json()["detail"], answer.text
    assert stored(world.url) == before


def test_the_route_needs_both_agents(world: World) -> None:
    answer = world.client.get(f"/leaderboards/{BOARD}/compare", params={"a": "right"})
    assert answer.status_code == 422
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == ["query", "b"] and problem["type"] == "missing"


def versus_cells(page: str) -> list[tuple[str, str, str]]:
    """(agent, data-value, text) of each row's comparison with the next."""
    rows = re.findall(r'<tr class="entry" data-agent="([^"]+)">(.*?)</tr>', page)
    found = []
    for agent, cells in rows:
        match = re.search(r'<td class="versus"(?: data-value="([^"]*)")?>([^<]*)</td>', cells)
        assert match, agent
        found.append((html.unescape(agent), html.unescape(match[1] or ""), match[2]))
    return found


def test_the_page_shows_each_row_against_the_next(world: World) -> None:
    page = world.client.get(f"/ui/leaderboards/{BOARD}").text
    assert "<th>P(beats next) [95%]</th>" in page
    cells = versus_cells(page)
    agents = [agent for agent, _, _ in cells]
    entries = world.client.get(f"/leaderboards/{BOARD}").json()["entries"]
    assert agents == [r["agent"] for r in entries]
    verdicts = []
    for (upper, shown, text), (lower, _, _) in pairwise(cells):
        c = compare_agents(world.db, BOARD, upper, lower).comparison
        values = json.loads(shown)
        assert values == {"probability": c.probability, "ci95": list(c.ci95), "better": c.better}
        low, high = c.ci95
        assert text.startswith(f"{c.probability:.2f} [{low:.2f}, {high:.2f}] ")
        verdicts.append(text.rsplit("] ", 1)[1])
    assert cells[-1][1:] == ("", "")  # the last row has no row below it
    assert agents == ["jump-right", "random", "right"] and verdicts == ["not separated", "better"]
    bandit = world.client.get(f"/ui/leaderboards/{BANDIT_BOARD}").text
    assert 'class="versus"' not in bandit and "beats next" not in bandit
