"""First-price auction: values from the seed, who wins and pays what, bounds, fairness."""

from __future__ import annotations

import statistics

import pytest

from scoring.alympics import normalise
from tests.workers.games.helpers import Scripted, play
from workers.games import InvalidAction, game_measures
from workers.games.auction import FirstPriceAuction, Shade, Truthful, bid_fairness
from workers.games.base import EpisodeRecord, SeededStrategy


class BidShare(SeededStrategy):
    """Bids a fixed share of its value."""

    label = "bid-share"

    def __init__(self, share: float) -> None:
        self.share = share

    def act(self, observation):
        return observation["value"] * self.share


def test_highest_bid_wins_and_pays_its_bid():
    game = FirstPriceAuction(3)
    game.reset(7)
    values = game.values
    assert game.step([30, 20]) == [values[0][0] - 30, 0]
    assert game.step([20, 30.5]) == [0, values[1][1] - 30.5]
    assert game.step([100, 0]) == [values[2][0] - 100, 0]  # overpaying loses money
    assert game.details[0] == {"values": values[0], "winner": 0, "price": 30}


def test_ties_are_broken_by_the_seed():
    winners = set()
    for seed in range(20):
        game = FirstPriceAuction(1)
        game.reset(seed)
        payoffs = game.step([10, 10])
        winner = game.details[0]["winner"]
        assert winner == game.tie_orders[0][0]
        assert payoffs[winner] == game.values[0][winner] - 10
        winners.add(winner)
        game.reset(seed)
        game.step([10, 10])
        assert game.details[0]["winner"] == winner  # same seed, same tie-break
    assert winners == {0, 1}


def test_values_are_uniform_on_0_100_and_drawn_from_the_seed():
    game = FirstPriceAuction(2000)
    game.reset(1)
    values = [v for pair in game.values for v in pair]
    assert all(0 <= v <= 100 for v in values)
    assert statistics.fmean(values) == pytest.approx(50, abs=1.5)
    again = FirstPriceAuction(2000)
    again.reset(1)
    assert again.values == game.values
    again.reset(2)
    assert again.values != game.values


def test_observation_shows_only_the_own_value():
    game = FirstPriceAuction(2)
    game.reset(3)
    first, second = game.observation(0), game.observation(1)
    assert first["value"] == game.values[0][0] and second["value"] == game.values[0][1]
    game.step([1, 2])
    entry = game.observation(0)["history"][0]
    assert entry == {"actions": [1.0, 2.0], "payoff": 0.0, "value": game.values[0][0], "winner": 1}
    assert game.observation(0)["value"] == game.values[1][0]


def test_no_profit_is_0():
    records = [play(FirstPriceAuction(1), [Truthful(), Truthful()], seed) for seed in range(10)]
    measures = game_measures(records)
    assert measures["raw"] == 0 and normalise("auction", 0) == 0 == measures["strategic"]
    assert measures["fairness"] == 100


def test_winning_every_time_at_price_0_averages_50_and_scores_100():
    # Whenever a bid of 0 wins, the profit is the whole value...
    record = play(FirstPriceAuction(500), [Scripted(0), Scripted(0)], seed=4)
    won = [r for r, d in enumerate(record.details) if d["winner"] == 0]
    assert won and all(record.payoffs[r][0] == record.details[r]["values"][0] for r in won)
    # ...so winning every auction at 0 earns the mean value: 50 for values uniform on [0, 100].
    values = [d["values"][0] for d in record.details]
    always_won = EpisodeRecord(
        game="auction",
        seed=4,
        players=["a", "b"],
        actions=[[0.0, 0.0]] * len(values),
        payoffs=[[v, 0.0] for v in values],
        details=record.details,
        faults=[0, 0],
        fault_reasons=[],
        faulted=[[], []],
    )
    assert game_measures([always_won])["raw"] == pytest.approx(50, abs=3)
    assert normalise("auction", 50) == 100


def test_baseline_bids():
    record = play(FirstPriceAuction(5), [Truthful(), Shade()], seed=2)
    for actions, details in zip(record.actions, record.details, strict=True):
        assert actions == [details["values"][0], details["values"][1] / 2]


@pytest.mark.parametrize(
    ("value", "bid", "fairness"),
    [(60, 60, 100), (60, 30, 50), (60, 90, 50), (60, 0, 0), (60, 130, 0), (0, 0, 100), (0, 5, 0)],
)
def test_bid_fairness(value, bid, fairness):
    assert bid_fairness(value, bid) == fairness


def test_measures_hand_checked():
    record = play(FirstPriceAuction(3), [BidShare(0.75), Truthful()], seed=5)
    profits = [
        d["values"][0] * 0.25 if d["values"][0] * 0.75 > d["values"][1] else 0.0
        for d in record.details
    ]
    measures = game_measures([record])
    assert measures["raw"] == pytest.approx(statistics.fmean(profits))
    assert measures["fairness"] == pytest.approx(75)
    assert game_measures([record], player=1)["fairness"] == 100


@pytest.mark.parametrize("action", [-0.01, 100.5, "cheap", None, False, [10], {"bid": 10}])
def test_parse_rejects(action):
    with pytest.raises(InvalidAction, match="bid"):
        FirstPriceAuction(1).parse_action(0, action)


def test_parse_accepts_numbers_and_numeric_text():
    game = FirstPriceAuction(1)
    assert game.parse_action(0, 42) == 42.0 and game.parse_action(0, " 42.5 ") == 42.5
