"""Match sets to categories: the SEED-NOTES readings, checked by hand."""

from __future__ import annotations

import pytest

from scoring.alympics import GAMES
from scoring.alympics_benchmark import MatchMeasures, benchmark_input, score_benchmark

MEASURE_FIELDS = {
    "prisoners_dilemma": {"cooperation": 100.0},
    "public_goods": {"cooperation": 50.0, "fairness": 80.0},
    "auction": {"fairness": 90.0},
    "colonel_blotto": {},
    "congestion": {"fairness": 75.0},
}


def matches(raw_by_game: dict[str, list[float]]) -> list[MatchMeasures]:
    return [
        MatchMeasures(game=game, opponent=f"opp{i}", raw=raw, **MEASURE_FIELDS[game])
        for game, raws in raw_by_game.items()
        for i, raw in enumerate(raws)
    ]


def test_strategic_is_the_mean_and_robustness_the_worst_normalised_payoff():
    data = benchmark_input(
        matches(
            {
                "prisoners_dilemma": [3.0, 1.0],  # 100 and 0
                "public_goods": [5.0, 5.0, 5.0, 10.0],
                "auction": [25.0, 50.0],
                "colonel_blotto": [0.6, 0.8],
                "congestion": [-1.0, -20.0],
            }
        ),
        "a",
    )
    pd, pg = data.games["prisoners_dilemma"], data.games["public_goods"]
    assert (pd.strategic, pd.robustness, pd.cooperation) == (50.0, 0.0, 100.0)
    assert (pg.robustness, pg.cooperation, pg.fairness) == (50.0, 50.0, 80.0)
    assert data.games["auction"].strategic == 75.0
    assert data.games["colonel_blotto"].strategic == pytest.approx(70.0)
    assert data.games["congestion"].robustness == 0.0


def test_a_match_set_that_failed_counts_as_zero():
    played = matches({g: [1e9] for g in GAMES})  # clamps to 100 everywhere
    failed = MatchMeasures(game="auction", opponent="shade", error="agent could not be loaded")
    result = score_benchmark([*played, failed], "a")
    auction = result.categories["strategic"].games["auction"]
    assert auction == 50.0  # (100 + 0) / 2
    assert result.categories["robustness"].games["auction"] == 0.0
    assert result.categories["fairness"].games["auction"] == 45.0


def test_every_game_must_be_played():
    with pytest.raises(ValueError, match="congestion: no match set played"):
        benchmark_input(matches({g: [0.0] for g in GAMES if g != "congestion"}), "a")
