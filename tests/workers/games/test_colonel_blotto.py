"""Colonel Blotto: fields won (ties half), allocation rules, bounds, baselines, the built-in."""

from __future__ import annotations

import pytest

from scoring.alympics import normalise
from tests.workers.games.helpers import Scripted, payoffs_of, play
from workers.games import BUILTIN, InvalidAction, game_measures
from workers.games.base import EpisodeRecord
from workers.games.colonel_blotto import ColonelBlotto, Concentrated, Skirmisher, Uniform


@pytest.mark.parametrize(
    ("first", "second", "payoffs"),
    [
        ([20, 20, 20, 20, 20], [20, 20, 20, 20, 20], [0.5, 0.5]),
        ([34, 33, 33, 0, 0], [20, 20, 20, 20, 20], [0.6, 0.4]),
        ([21, 21, 21, 21, 16], [20, 20, 20, 20, 20], [0.8, 0.2]),
        ([100, 0, 0, 0, 0], [0, 25, 25, 25, 25], [0.2, 0.8]),
        ([30, 30, 20, 10, 10], [10, 10, 20, 30, 30], [0.5, 0.5]),  # 2 won, 1 tie, 2 lost
        ([25, 25, 25, 25, 0], [0, 0, 50, 25, 25], [0.5, 0.5]),  # 2 won, 1 tie, 2 lost
    ],
)
def test_fraction_of_fields_won_ties_half(first, second, payoffs):
    assert payoffs_of(ColonelBlotto(1), [first, second]) == pytest.approx(payoffs)


def test_the_rubric_bounds_normalise_fraction_won():
    def measured(fraction):
        record = EpisodeRecord(
            game="colonel_blotto",
            seed=0,
            players=["a", "b"],
            actions=[[[20] * 5, [20] * 5]],
            payoffs=[[fraction, 1 - fraction]],
            details=[{}],
            faults=[0, 0],
            fault_reasons=[],
            faulted=[[], []],
        )
        return game_measures([record])["strategic"]

    assert measured(1.0) == 100 == normalise("colonel_blotto", 1.0)
    assert measured(0.0) == 0 == normalise("colonel_blotto", 0.0)


def test_with_equal_armies_four_fields_of_five_is_the_most_anyone_wins():
    # Winning every field needs more troops than the opponent in total: with both at 100 the
    # reachable extremes are 4 of 5 (normalised 80) and 1 of 5 (normalised 20).
    best = play(ColonelBlotto(1), [Scripted([21, 21, 21, 21, 16]), Uniform()])
    assert game_measures([best])["strategic"] == pytest.approx(80)
    assert game_measures([best], player=1)["strategic"] == pytest.approx(20)


@pytest.mark.parametrize(
    ("action", "parsed"),
    [
        ([20, 20, 20, 20, 20], [20] * 5),
        ((100, 0, 0, 0, 0), [100, 0, 0, 0, 0]),
        ([20.0] * 5, [20] * 5),
    ],
)
def test_parse_normalises(action, parsed):
    assert ColonelBlotto(1).parse_action(0, action) == parsed


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ([20, 20, 20, 20], "list of 5"),
        ([20, 20, 20, 20, 21], "sum to 100"),
        ([120, -20, 0, 0, 0], "non-negative"),
        ([20.5, 19.5, 20, 20, 20], "whole"),
        ([True, 20, 20, 20, 39], "whole"),
        (["20", 20, 20, 20, 20], "whole"),
        ("20,20,20,20,20", "list of 5"),
        (None, "list of 5"),
    ],
)
def test_parse_rejects(action, message):
    with pytest.raises(InvalidAction, match=message):
        ColonelBlotto(1).parse_action(0, action)


def test_concentrated_puts_34_33_33_on_three_seeded_fields():
    placements = set()
    for seed in range(30):
        action = play(ColonelBlotto(1), [Concentrated(), Uniform()], seed).actions[0][0]
        assert sorted(action) == [0, 0, 33, 33, 34]
        placements.add(tuple(action))
    assert len(placements) > 5


def test_builtin_beats_both_baselines_more_often_than_not():
    assert BUILTIN["colonel_blotto"] is Skirmisher
    for opponent in (Uniform, Concentrated):
        results = [
            play(ColonelBlotto(1), [Skirmisher(), opponent()], seed).payoffs[0][0]
            for seed in range(200)
        ]
        assert sum(r > 0.5 for r in results) > 0.75 * len(results)
