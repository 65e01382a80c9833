"""Series (docs/mario.md, "Series"): a board's checkpoints `<run>@<steps>` read as a learning
curve by the API, the CLI and the page, the same numbers as the board's rows, each checkpoint
after the first compared with the previous one as `arena compare` compares them; bad input is a
404 or one line and exit 2."""

from __future__ import annotations

import html
import json
import re
from itertools import pairwise
from typing import Any

import pytest
from fastapi.testclient import TestClient

from arena.service.series import checkpoint_name, parse_checkpoint, steps_label
from tasks.store import Store
from tests.api.picture_batches import run_into
from tests.integration.conftest import arena

BOARD = "series-mario-1-1"
RUN_AGENTS = {"walk@20k": "right", "walk@1k": "random", "walk@3M": "jump-right"}


def spec() -> dict[str, Any]:
    agents = [{"name": n, "builtin": b} for n, b in RUN_AGENTS.items()]
    return {
        "workload": "mario",
        "leaderboard": "series-mario",
        "agents": ["right", *agents],
        "items": ["1-1"],
        # Under sticky actions (the default) `right` (walk@20k) repeats an episode often: with
        # master seed 11 its 2 episodes are 2 distinct trajectories, so a comparison can conclude.
        "protocol": {"episodes": 2, "seed": 11},
        "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 60},
    }


@pytest.fixture
def board(db: Store) -> str:
    run_into(db, spec())
    return BOARD


def test_steps_are_written_compactly_and_read_back() -> None:
    cases = {500_000: "500k", 1_000_000: "1M", 2048: "2048", 0: "0", 1_500_000: "1500k"}
    for steps, label in cases.items():
        assert steps_label(steps) == label
        assert parse_checkpoint(checkpoint_name("ppo-a", steps)) == ("ppo-a", steps)
    assert parse_checkpoint("right") is None and parse_checkpoint("a@5q") is None
    with pytest.raises(ValueError, match="run"):
        checkpoint_name("bad name", 1000)


def test_the_series_is_the_rows_by_steps(client: TestClient, board: str) -> None:
    got = client.get(f"/leaderboards/{board}/series/walk")
    assert got.status_code == 200, got.text
    series = got.json()
    assert [p["agent"] for p in series["points"]] == ["walk@1k", "walk@20k", "walk@3M"]
    assert [p["steps"] for p in series["points"]] == [1_000, 20_000, 3_000_000]
    rows = {r["agent"]: r for r in client.get(f"/leaderboards/{board}").json()["entries"]}
    for point in series["points"]:
        row = rows[point["agent"]]
        assert point["score"] == row["score"] and point["batch"] == row["batch"]
        for key in ("success_rate", "success_ci95", "iqm_score", "iqm_ci95", "episodes"):
            assert point[key] == row["stats"][key], key
        assert point["avg_max_x"] == row["stats"]["avg_max_x"]  # the distance view
    # The page draws one learning curve per run, with the API's numbers in data-values.
    page = client.get(f"/ui/leaderboards/{board}").text
    figures = re.findall(
        r'<figure class="picture series" data-kind="series" data-values="([^"]*)"', page
    )
    assert len(figures) == 1
    assert json.loads(html.unescape(figures[0]))["series"] == [series]
    svg = client.get(f"/leaderboards/{board}/charts/series.svg?run=walk")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert "learning curve of walk" in svg.text and 'id="iqm-walk"' in svg.text
    # Beside the composite, the distance: each checkpoint's mean max x.
    first = series["points"][0]
    assert 'id="max-x-walk"' in svg.text
    assert f"max-x-walk: {steps_label(first['steps'])} {first['avg_max_x']:g} [" in svg.text
    assert client.get(f"/leaderboards/{board}/charts/series.png").status_code == 200


def test_each_checkpoint_against_the_previous_is_compare_s_answer(
    client: TestClient, board: str
) -> None:
    points = client.get(f"/leaderboards/{board}/series/walk").json()["points"]
    assert len(points) >= 3 and points[0]["vs_previous"] is None
    for previous, point in pairwise(points):
        pair = {"a": point["agent"], "b": previous["agent"]}
        compared = client.get(f"/leaderboards/{board}/compare", params=pair)
        assert compared.status_code == 200, compared.text
        assert point["vs_previous"] == compared.json()["comparison"], pair
    # This board's 2 episodes a checkpoint separate each from the one before: 20k is worse than
    # 1k, 3M better than 20k; the picture marks each on its IQM (△ better, ▽ worse).
    assert [p["vs_previous"]["better"] for p in points[1:]] == ["b", "a"]
    svg = client.get(f"/leaderboards/{board}/charts/series.svg?run=walk").text
    assert 'id="worse-walk"' in svg and 'id="better-walk"' in svg
    assert "walk, better than the previous checkpoint: P(beats previous) 3M 1.00" in svg


def test_an_unknown_board_or_run_is_a_404(client: TestClient, board: str) -> None:
    run = client.get(f"/leaderboards/{board}/series/sprint")
    assert run.status_code == 404 and "no checkpoints of run 'sprint'" in run.json()["detail"]
    missing = client.get("/leaderboards/nowhere/series/walk")
    assert missing.status_code == 404 and "no leaderboard 'nowhere'" in missing.json()["detail"]
    chart = client.get(f"/leaderboards/{board}/charts/series.svg?run=sprint")
    assert chart.status_code == 404


def test_the_cli_prints_the_series(cluster_env: dict[str, str], board: str) -> None:
    table = arena("mario", "series", board, "walk", env=cluster_env)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0] == f"series walk on {board}: 3 checkpoints"
    assert [line.split()[1] for line in lines[2:]] == ["walk@1k", "walk@20k", "walk@3M"]
    assert lines[1].endswith("episodes  P(> prev) [bootstrap 95%]"), lines[1]
    # Each checkpoint against the previous: P, its interval and the verdict; none for the first.
    assert [line.split("  ")[-1] for line in lines[2:]] == [
        "-",
        "0.00 [0.00, 0.00] worse",
        "1.00 [1.00, 1.00] better",
    ]
    as_json = arena("mario", "series", board, "walk", "--json", env=cluster_env)
    points = json.loads(as_json.stdout)["points"]
    assert [p["steps"] for p in points] == [1000, 20000, 3000000]
    assert "max x" in lines[1]  # the distance column, beside the best score
    assert [line.split()[3] for line in lines[2:]] == [f"{p['avg_max_x']:,.0f}" for p in points]
    assert points[0]["vs_previous"] is None
    for previous, point in pairwise(points):  # what `arena compare THIS PREVIOUS --json` says
        compared = arena("compare", board, point["agent"], previous["agent"], "--json",
                         env=cluster_env)  # fmt: skip
        assert compared.returncode == 0, compared.stderr
        assert point["vs_previous"] == json.loads(compared.stdout)["comparison"]
    for args, said in (((board, "sprint"), "no checkpoints of run 'sprint'"),
                       (("nowhere", "walk"), "no leaderboard 'nowhere'")):  # fmt: skip
        bad = arena("mario", "series", *args, env=cluster_env)
        assert bad.returncode == 2 and bad.stdout == ""
        assert bad.stderr.count("\n") == 1 and said in bad.stderr, bad.stderr
