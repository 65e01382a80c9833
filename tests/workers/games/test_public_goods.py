"""Public goods: payoffs with the punishment stage, the rubric's bounds, baselines, measures."""

from __future__ import annotations

import math

import pytest

from scoring.alympics import normalise
from tests.workers.games.helpers import Scripted, payoffs_of, play
from workers.games import InvalidAction, game_measures, opponent_lineup
from workers.games.public_goods import (
    ConditionalCooperator,
    FreeRider,
    FullContributor,
    PublicGoods,
    Punisher,
)

PUNISH = {"contribution": 10, "punish": True}


@pytest.mark.parametrize(
    ("actions", "payoffs"),
    [
        ([0, 0, 0, 0], [10, 10, 10, 10]),
        ([10, 10, 10, 10], [20, 20, 20, 20]),
        # share = 2 * 30 / 4 = 15; the free rider keeps its 10.
        ([0, 10, 10, 10], [25, 15, 15, 15]),
        # The punisher pays 1 to fine the free rider 3.
        ([0, 10, 10, PUNISH], [22, 15, 15, 14]),
        # share 17.5: player 0 keeps 5 and is fined 3.
        ([5, 10, 10, PUNISH], [19.5, 17.5, 17.5, 16.5]),
        # Nobody contributed less than the punisher: no punishment.
        ([10, 10, 10, PUNISH], [20, 20, 20, 20]),
        # share 12. Player 0 (4) punishes player 2 (2); player 1 (8) punishes players 0 and 2.
        (
            [{"contribution": 4, "punish": True}, {"contribution": 8, "punish": True}, 2, 10],
            [10 - 4 + 12 - 1 - 3, 10 - 8 + 12 - 2, 10 - 2 + 12 - 6, 12],
        ),
    ],
)
def test_payoffs(actions, payoffs):
    assert payoffs_of(PublicGoods(1), actions) == payoffs


def test_round_details_and_history_show_the_punishment():
    game = PublicGoods(2)
    game.reset(0)
    game.step([0, 10, 10, PUNISH])
    assert game.details[0] == {"punishment_costs": [0, 0, 0, 1], "fines": [3, 0, 0, 0]}
    entry = game.observation(0)["history"][0]
    assert entry["payoff"] == 22 and entry["fine"] == 3 and entry["punishment_cost"] == 0
    assert entry["actions"][3] == {"contribution": 10.0, "punish": True}


@pytest.mark.parametrize(
    ("action", "parsed"),
    [
        (5, {"contribution": 5.0, "punish": False}),
        ("7.5", {"contribution": 7.5, "punish": False}),
        (0, {"contribution": 0.0, "punish": False}),
        ({"contribution": 3, "punish": True}, {"contribution": 3.0, "punish": True}),
        ({"contribution": 10}, {"contribution": 10.0, "punish": False}),
    ],
)
def test_parse_normalises(action, parsed):
    assert PublicGoods(1).parse_action(0, action) == parsed


@pytest.mark.parametrize(
    "action",
    [
        -1,
        10.5,
        "lots",
        None,
        True,
        math.nan,
        math.inf,
        [5],
        {"amount": 3},
        {"contribution": 3, "punish": "yes"},
        {"contribution": 3, "punish": True, "extra": 1},
    ],
)
def test_parse_rejects(action):
    with pytest.raises(InvalidAction):
        PublicGoods(1).parse_action(0, action)


def test_nobody_contributing_is_0_and_everyone_contributing_all_is_100():
    nobody = game_measures([play(PublicGoods(10), [FreeRider() for _ in range(4)])])
    everyone = play(
        PublicGoods(10), [FullContributor(), Punisher(), Punisher(), ConditionalCooperator()]
    )
    assert nobody["raw"] == 0 and normalise("public_goods", nobody["raw"]) == 0
    assert all(p == [20, 20, 20, 20] for p in everyone.payoffs)  # no punishment happens
    assert game_measures([everyone])["raw"] == 10
    assert normalise("public_goods", 10) == 100 == game_measures([everyone])["strategic"]


def test_free_riding_among_punishers():
    record = play(PublicGoods(3), [FreeRider(), *opponent_lineup("public_goods", "punisher")])
    assert record.payoffs == [[10 + 15 - 9, 14, 14, 14]] * 3


def test_conditional_cooperator_matches_the_others_mean():
    strategies = [Scripted(0, 4), ConditionalCooperator(), FullContributor(), FreeRider()]
    record = play(PublicGoods(3), strategies)
    # Round 1: opens with 10. Round 2: mean(0, 10, 0). Round 3: mean(4, 10, 0).
    assert [a[1]["contribution"] for a in record.actions] == [10, 10 / 3, 14 / 3]


def test_measures_hand_checked():
    # Round 1: agent gives 4 to the others' 10s: 10 - 4 + 2 * 34 / 4 = 23 (raw 13), gap 6.
    # Round 2: everyone gives 10: 20 (raw 10), gap 0.
    record = play(PublicGoods(2), [Scripted(4, 10), *[FullContributor() for _ in range(3)]])
    measures = game_measures([record])
    assert measures == {
        "raw": 11.5,
        "strategic": 100.0,
        "faults": 0.0,
        "cooperation": 70.0,
        "fairness": 70.0,
    }
    # A full contributor's view of round 1: gap |10 - mean(4, 10, 10)| = 2.
    assert game_measures([record], player=1)["fairness"] == pytest.approx(100 - (2 + 0) / 2 * 10)
