"""Leaderboard tables (arena/cli/tables.py): the columns a workload declares, intact at 100 columns,
intervals with their overlap mark, errors when there are any. Pure rendering: no Redis."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table

from arena.cli.tables import OVERLAP_CAPTION, OVERLAP_MARK, leaderboard_table
from arena.service.alympics import benchmark_spec, result_of
from arena.service.boards import Board, ranked
from arena.service.numbers import MISSING, format_value, overlaps_above, significant, stat
from scoring.bandit import summarise_bandit
from tasks.execute import execute_batch
from tasks.store import LeaderboardRow
from tasks.workloads import get_workload, validate_batch

BANDIT = get_workload("bandit")
ALYMPICS = get_workload("alympics")
# Five agents, names up to 24 characters: what a real board holds.
NAMES = [
    "thompson-sampling-tuned1",
    "ucb1",
    "epsilon-greedy-0.10",
    "greedy-optimistic-init",
    "random",
]


def leaderboard_view(name: str, rows: list[LeaderboardRow], workload: Any) -> tuple[Table, Any]:
    """The table `arena leaderboard` prints and the JSON rows, of rows in the workload's order."""
    board = Board(name, ranked(rows, workload), workload)
    return leaderboard_table(board), board.payload()


def row(agent: str, score: float, stats: dict[str, Any]) -> LeaderboardRow:
    return LeaderboardRow(agent=agent, score=score, stats=stats, batch="b1", updated_at=0.0)


def render(table: Table, width: int = 100) -> str:
    console = Console(width=width, record=True)
    console.print(table)
    return console.export_text()


def header_block(text: str) -> str:
    """The lines of the header: those between the title and the rule."""
    lines = text.splitlines()
    assert lines[0].strip().startswith("Leaderboard: ")
    rule = next(i for i, line in enumerate(lines) if line.strip().startswith("─"))
    return "\n".join(lines[1:rule])


def body(text: str) -> dict[str, str]:
    """Agent name → its row's line."""
    lines = (re.match(r"\s*\d+\s+(\S+)", line) for line in text.splitlines())
    return {m.group(1): m.string for m in lines if m}


def assert_fits(text: str, width: int = 100) -> None:
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    assert "…" not in text


def bandit_stats(mean: float, errors: int = 0, seed: int = 0, **extra: Any) -> dict[str, Any]:
    """Real summary stats (scoring.bandit) of 30 noisy episodes around `mean`, as stored (JSON)."""
    rng = random.Random(seed)
    n = 30 - errors
    rewards = [min(1.0, max(0.0, rng.gauss(mean, 0.05))) for _ in range(n)]
    regrets = [12_345.6 * (1 - r) for r in rewards]
    stats = summarise_bandit(rewards, regrets, [mean] * n, errors=errors).model_dump(mode="json")
    return stats | extra


def bandit_rows(errors: dict[str, int] | None = None) -> list[LeaderboardRow]:
    errors = errors or {}
    rows = []
    for i, name in enumerate(NAMES):
        stats = bandit_stats(0.9 - 0.1 * i, errors.get(name, 0), seed=i)
        rows.append(row(name, stats["mean_reward"], stats))
    return rows


@pytest.fixture(scope="module")
def alympics_stats() -> dict[str, Any]:
    """A real Alympics entry: the standard suite, one episode a game, the built-in agent."""
    batch = validate_batch(benchmark_spec(episodes=1))
    results = execute_batch(batch)
    [entry] = ALYMPICS.reduce(batch, results).entries
    assert entry.score == pytest.approx(result_of(batch, results).composite_score)
    return entry.stats


def alympics_rows(stats: dict[str, Any], failed: dict[str, int]) -> list[LeaderboardRow]:
    rows = []
    for i, name in enumerate(NAMES):
        composite = stats["composite_score"] - 7.5 * i
        entry = stats | {"composite_score": composite, "failed_match_sets": failed.get(name, 0)}
        rows.append(row(name, composite, entry))
    return rows


# -- fits, nothing cut ------------------------------------------------------------------------


def test_bandit_table_fits_100_columns_with_every_header_and_name_whole():
    text = render(leaderboard_view("bandit", bandit_rows({"ucb1": 3}), BANDIT)[0])
    assert_fits(text)
    headers = header_block(text)
    assert "IQM [95% CI]" in headers
    for word in [
        "#",
        "Agent",
        "Mean",
        "reward",
        "Regret",
        "Best-arm",
        "rate",
        "Episodes",
        "Errors",
    ]:
        assert word in headers.split(), word
    assert list(body(text)) == NAMES  # whole names, in rank order


def test_alympics_table_fits_100_columns_with_the_four_categories(alympics_stats):
    rows = alympics_rows(alympics_stats, failed={"ucb1": 2})
    text = render(leaderboard_view("alympics", rows, ALYMPICS)[0])
    assert_fits(text)
    words = header_block(text).split()
    for word in [
        "Composite",
        "Strategic",
        "Cooperation",
        "Fairness",
        "Robustness",
        "Faults",
        "Failed",
        "match",
        "sets",
    ]:
        assert word in words, word
    assert list(body(text)) == NAMES
    strategic = format_value(alympics_stats["categories"]["strategic"], "number")
    assert strategic in body(text)["random"]


def test_llm_columns_only_on_a_board_with_an_llm_agent(alympics_stats):
    """Tokens and Cost $ are optional columns: absent on a board of Python agents, shown (and
    the table still fits) once one row is a model's, with — for the others."""
    plain = render(leaderboard_view("alympics", alympics_rows(alympics_stats, {}), ALYMPICS)[0])
    assert "Tokens" not in header_block(plain) and "Cost" not in header_block(plain)
    rows = alympics_rows(alympics_stats, {})
    usage = {"total_tokens": 1_234_567, "cost_usd": 0.4321}
    rows[0] = row(rows[0].agent, rows[0].score, rows[0].stats | {"llm": usage})
    text = render(leaderboard_view("alympics", rows, ALYMPICS)[0])
    assert_fits(text)
    assert {"Tokens", "Cost", "$"} <= set(header_block(text).split())
    ranked = {line.split()[0]: line for line in text.splitlines() if re.match(r"\d+\s", line)}
    assert "1,234,567" in ranked["1"] and "0.4321" in ranked["1"]  # names wrap; ranks do not
    assert ranked["2"].split()[-2:] == [MISSING, MISSING]


def test_declared_keys_exist_in_the_stats_the_workloads_store(alympics_stats):
    for workload, stats in ((BANDIT, bandit_stats(0.5)), (ALYMPICS, alympics_stats)):
        declared = [c.key for c in workload.table_columns if not c.optional]
        declared.append(workload.errors_column.key)
        if workload.interval:
            declared += [workload.interval.point, workload.interval.ci95]
        for key in declared:
            assert stat(stats, key) is not None, (workload.name, key)


# -- the columns are the workload's, not the first row's -----------------------------------------


def test_a_stat_equal_to_the_first_rows_score_keeps_its_column(alympics_stats):
    # The old table dropped every stat whose value in the first row equalled that row's score.
    stats = alympics_stats | {"categories": alympics_stats["categories"] | {"fairness": 60.0}}
    top = row("top", 60.0, stats | {"composite_score": 60.0})
    second = row("second", 50.0, stats | {"composite_score": 50.0})
    text = render(leaderboard_view("alympics", [top, second], ALYMPICS)[0])
    headers = header_block(text).split()
    fairness = headers.index("Fairness")
    assert headers[2] == "Composite"
    assert body(text)["top"].split()[fairness] == "60.00"
    assert body(text)["second"].split()[fairness] == "60.00"


def test_bandit_iqm_equal_to_the_score_keeps_its_interval_column():
    # Every episode alike: IQM == mean reward == score in the first row.
    stats = summarise_bandit([0.75] * 10, [3.0] * 10, [1.0] * 10, errors=0).model_dump(mode="json")
    text = render(leaderboard_view("b", [row("steady", 0.75, stats)], BANDIT)[0])
    assert "IQM [95% CI]" in header_block(text)
    assert "0.750 [0.750, 0.750]" in body(text)["steady"]


# -- the interval and its overlap mark ------------------------------------------------------------


def interval_row(agent: str, score: float, low: float, high: float) -> LeaderboardRow:
    stats = bandit_stats(0.5) | {"iqm_reward": score, "iqm_ci95": [low, high]}
    return row(agent, score, stats)


def test_the_interval_is_shown_next_to_its_point_estimate():
    stats = bandit_stats(0.7) | {"iqm_reward": 0.71234, "iqm_ci95": [0.70123, 0.73011]}
    text = render(leaderboard_view("b", [row("a", 0.7, stats)], BANDIT)[0])
    assert "0.712 [0.701, 0.730]" in body(text)["a"]


def test_overlap_mark_is_set_exactly_on_rows_whose_interval_overlaps_the_row_above():
    rows = [  # given out of order: the mark follows the rank order, not the store's
        interval_row("c", 0.50, 0.45, 0.55),  # clear of b
        interval_row("a", 0.90, 0.80, 0.95),
        interval_row("d", 0.45, 0.30, 0.46),  # overlaps c
        interval_row("b", 0.85, 0.75, 0.82),  # overlaps a
        interval_row("e", 0.20, 0.10, 0.30),  # touches d's low end exactly: 0.30
    ]
    table, payload = leaderboard_view("b", rows, BANDIT)
    text = render(table)
    assert [p["agent"] for p in payload] == ["a", "b", "c", "d", "e"]
    marked = {agent for agent, line in body(text).items() if OVERLAP_MARK in line}
    assert marked == {"b", "d", "e"}
    assert OVERLAP_CAPTION in text
    assert_fits(text)


def test_no_mark_and_no_caption_when_every_interval_is_clear_of_the_row_above():
    rows = [interval_row("a", 0.9, 0.85, 0.95), interval_row("b", 0.5, 0.45, 0.55)]
    text = render(leaderboard_view("b", rows, BANDIT)[0])
    assert OVERLAP_MARK not in text
    assert "IQM [95% CI]" in header_block(text)


def test_no_interval_declared_no_mark(alympics_stats):
    text = render(leaderboard_view("a", alympics_rows(alympics_stats, {}), ALYMPICS)[0])
    assert OVERLAP_MARK not in text and "[" not in text


def test_overlaps_above():
    assert overlaps_above([]) == []
    assert overlaps_above([(0.0, 1.0)]) == [False]
    assert overlaps_above([(0.5, 0.9), (0.1, 0.5), (0.2, 0.3), None, (0.2, 0.3)]) == [
        False,
        True,
        True,
        False,
        False,
    ]
    assert overlaps_above([(0.5, 0.9), (0.6, 0.7)]) == [False, True]  # inside the one above


# -- errors ---------------------------------------------------------------------------------------


def test_errors_column_only_when_some_row_has_errors():
    clean = render(leaderboard_view("b", bandit_rows(), BANDIT)[0])
    assert "Errors" not in header_block(clean)
    failing = render(leaderboard_view("b", bandit_rows({"greedy-optimistic-init": 4}), BANDIT)[0])
    assert "Errors" in header_block(failing)
    assert body(failing)["greedy-optimistic-init"].split()[-1] == "4"
    assert body(failing)["ucb1"].split()[-1] == "0"


def test_alympics_failed_match_sets_only_when_some_failed(alympics_stats):
    clean = render(leaderboard_view("a", alympics_rows(alympics_stats, {}), ALYMPICS)[0])
    assert "Failed" not in header_block(clean)
    failing = alympics_rows(alympics_stats, {"random": 13})
    text = render(leaderboard_view("a", failing, ALYMPICS)[0])
    assert "Failed" in header_block(text)
    assert body(text)["random"].split()[-1] == "13"


# -- numbers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "fmt", "text"),
    [
        (12_345.6, "number", "12,346"),
        (1_018_181.8, "number", "1,018,182"),
        (0.712345, "number", "0.7123"),
        (3.14159, "number", "3.142"),
        (9.99996, "number", "10.00"),
        (0.0, "number", "0"),
        (-42.126, "number", "-42.13"),
        (0.912345, "percent", "91.2%"),
        (1.0, "percent", "100%"),
        (1_234_567, "count", "1,234,567"),
        (None, "number", "—"),
        ("n/a", "count", "—"),
        (True, "count", "—"),
    ],
)
def test_format_value(value: Any, fmt: Any, text: str):
    assert format_value(value, fmt) == text


def test_never_scientific():
    for value in (1e-9, 3.2e-5, 12_345.6, 1e12, 123_456_789.123):
        assert "e" not in significant(value), value


def test_large_regret_is_readable_in_the_table():
    stats = bandit_stats(0.5) | {"mean_regret": 12_345.6}
    text = render(leaderboard_view("b", [row("a", 0.5, stats)], BANDIT)[0])
    assert "12,346" in body(text)["a"]


# -- the JSON payload and the CLI's wrapper -------------------------------------------------------


def test_payload_is_rank_and_row_in_rank_order():
    rows = list(reversed(bandit_rows()))
    _, payload = leaderboard_view("b", rows, BANDIT)
    by_agent = {r.agent: r for r in rows}
    assert payload == [
        {"rank": rank, **by_agent[name].model_dump()} for rank, name in enumerate(NAMES, 1)
    ]


def test_unknown_workload_shows_rank_agent_and_score():
    text = render(leaderboard_view("x", bandit_rows(), None)[0])
    assert header_block(text).split() == ["#", "Agent", "Score"]
    assert list(body(text)) == NAMES


def test_empty_board():
    table, payload = leaderboard_view("b", [], BANDIT)
    assert payload == []
    assert "Mean reward" in header_block(render(table))


def test_cluster_leaderboard_table_uses_the_workloads_columns():
    rows = bandit_rows({"ucb1": 1})
    table, payload = leaderboard_view("bandit", rows, BANDIT)
    text = render(table)
    assert_fits(text)
    assert "IQM [95% CI]" in header_block(text) and "Errors" in header_block(text)
    assert [p["rank"] for p in payload] == [1, 2, 3, 4, 5]
    assert payload[0] == {"rank": 1, **rows[0].model_dump()}
