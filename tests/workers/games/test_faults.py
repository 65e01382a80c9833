"""Faults cost: a faulted move plays the game's default so the episode goes on, but earns the
faulting player nothing (at most the rubric's lower bound), counts as neither cooperative nor
fair, and a match set with more than half of the agent's moves faulted is forfeit."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.workers.games.helpers import Scripted, play
from workers.games import (
    BASELINES,
    BUILTIN,
    GAMES,
    AgentForfeit,
    ForfeitWatch,
    game_measures,
    opponent_lineup,
    play_episode,
)
from workers.games.auction import FirstPriceAuction
from workers.games.base import EpisodeRecord
from workers.games.colonel_blotto import ColonelBlotto, Concentrated
from workers.games.congestion import Congestion
from workers.games.prisoners_dilemma import AlwaysDefect, PrisonersDilemma, TitForTat
from workers.games.public_goods import FreeRider, FullContributor, PublicGoods

BAD = "?"  # an action no game accepts
ROUNDS = {
    "prisoners_dilemma": 6,
    "public_goods": 5,
    "auction": 4,
    "colonel_blotto": 3,
    "congestion": 3,
}
MATCH_SETS = [(game, opponent) for game in GAMES for opponent in BASELINES[game]]


class Raises:
    label = "raises"

    def reset(self, game: str, player: int, seed: int) -> None:
        pass

    def act(self, observation: dict[str, Any]) -> Any:
        raise RuntimeError("model unavailable")


class FailsReset(Scripted):
    def reset(self, game: str, player: int, seed: int) -> None:
        raise ConnectionError("no route to host")


class PlaysDefault:
    """Plays, as its own move, exactly what a faulting player is given."""

    label = "plays-default"

    def reset(self, game: str, player: int, seed: int) -> None:
        self.game = GAMES[game](1)
        self.player = player

    def act(self, observation: dict[str, Any]) -> Any:
        return self.game.default_action(self.player)


def match_set(game: str, opponent: str, agent: Any, seed: int = 7) -> EpisodeRecord:
    players = [agent, *opponent_lineup(game, opponent)]
    return play_episode(GAMES[game](ROUNDS[game]), players, seed)


# Which moves faulted ------------------------------------------------------------------------


def test_the_record_lists_each_players_faulted_rounds():
    record = play(PrisonersDilemma(5), [Scripted("D", BAD, "D", 0, "C"), TitForTat()])
    assert [a[0] for a in record.actions] == ["D", "C", "D", "C", "C"]  # defaults stood in
    assert record.faulted == [[1, 3], []]
    assert record.faults == [2, 0]


def test_a_failed_reset_is_a_fault_but_not_a_move():
    record = play(PrisonersDilemma(3), [FailsReset("C"), TitForTat()])
    assert record.faults == [1, 0] and record.faulted == [[], []]
    measures = game_measures([record])
    assert measures["faults"] == 1
    assert (measures["raw"], measures["cooperation"]) == (3.0, 100.0)  # its moves were its own


def test_same_seed_same_record_with_faults():
    def played() -> EpisodeRecord:
        agent = Scripted(*([BAD, [20, 20, 20, 20, 20], 7] * 2))
        return match_set("colonel_blotto", "concentrated", agent, seed=3)

    assert played() == played()


# Per game: a faulted round earns nothing ----------------------------------------------------


def test_prisoners_dilemma_faulted_round_is_credited_mutual_defection_and_is_a_defection():
    # The default (C) meets tit-for-tat's C and pays 3, but a fault is credited at most 1.
    record = play(PrisonersDilemma(4), [Scripted("C", BAD, "C", BAD), TitForTat()])
    assert [p[0] for p in record.payoffs] == [3, 3, 3, 3]
    measures = game_measures([record])
    assert measures == {"raw": 2.0, "strategic": 50.0, "faults": 2.0, "cooperation": 50.0}
    # The opponent's own measures are untouched: it played every move itself.
    assert game_measures([record], player=1)["raw"] == 3.0


def test_prisoners_dilemma_credit_is_the_lower_of_the_two():
    # Against a defector the default C earns 0, below the bound's 1: it keeps the 0.
    record = play(PrisonersDilemma(3), [Raises(), AlwaysDefect()])
    measures = game_measures([record])
    assert (measures["raw"], measures["strategic"], measures["cooperation"]) == (0.0, 0.0, 0.0)


def test_public_goods_faulted_round_contributes_nothing_and_is_unfair():
    # Round 1: the agent gives 10 like everyone (payoff 20, raw 10, fair 100). Round 2 faults:
    # the default 0 pays 10 + 2 * 30 / 4 = 25, credited at most 10 (raw 0), fairness 0.
    lineup = [FullContributor() for _ in range(3)]
    record = play(PublicGoods(2), [Scripted(10, BAD), *lineup])
    assert [p[0] for p in record.payoffs] == [20, 25]
    assert game_measures([record]) == {
        "raw": 5.0,
        "strategic": 50.0,
        "faults": 1.0,
        "cooperation": 50.0,
        "fairness": 50.0,
    }


def test_public_goods_a_faulting_free_rider_among_free_riders_is_not_fair():
    # Contributing 0 like the others would be fully fair; faulting into it is not.
    own = play(PublicGoods(3), [FreeRider(), *[FreeRider() for _ in range(3)]])
    faulted = play(PublicGoods(3), [Raises(), *[FreeRider() for _ in range(3)]])
    assert own.actions == faulted.actions
    assert game_measures([own])["fairness"] == 100
    assert game_measures([faulted])["fairness"] == 0


def test_auction_faulted_bid_earns_nothing_even_when_it_wins():
    # The default bid 0 ties the other's 0 and wins about half of the rounds, for the value.
    record = play(FirstPriceAuction(40), [Raises(), Scripted(0)], seed=2)
    assert any(p[0] > 0 for p in record.payoffs)
    measures = game_measures([record])
    assert (measures["raw"], measures["strategic"], measures["fairness"]) == (0.0, 0.0, 0.0)


def test_colonel_blotto_faulted_allocation_wins_no_credit():
    # The default 20s win 2 of 5 fields against 34/33/33 but earn nothing.
    record = play(ColonelBlotto(2), [Raises(), Concentrated()])
    assert [p[0] for p in record.payoffs] == [0.4, 0.4]
    assert (game_measures([record])["raw"], game_measures([record])["strategic"]) == (0.0, 0.0)


def test_congestion_faulted_route_is_credited_the_worst_latency_and_is_unfair():
    # Alone on the bridge the default takes 1 minute (the best); a fault is credited 20.
    record = play(Congestion(2), [Scripted(BAD, 1), *[Scripted(1) for _ in range(3)]])
    assert [p[0] for p in record.payoffs] == [-1, -5]
    measures = game_measures([record])
    assert measures["raw"] == (-20 - 5) / 2
    assert measures["fairness"] == pytest.approx((0 + 100 * 14 / 20) / 2)


# Across every match set ---------------------------------------------------------------------


@pytest.mark.parametrize(("game", "opponent"), MATCH_SETS)
def test_an_agent_that_always_faults_scores_0_everywhere(game, opponent):
    measures = game_measures([match_set(game, opponent, Raises())])
    assert measures.pop("faults") == ROUNDS[game]
    assert measures.pop("strategic") == 0
    measures.pop("raw")
    assert measures == {name: 0.0 for name in measures}  # cooperation, fairness where read


@pytest.mark.parametrize(("game", "opponent"), MATCH_SETS)
def test_a_fault_never_scores_better_than_playing_the_same_move(game, opponent):
    own = game_measures([match_set(game, opponent, PlaysDefault())])
    faulted = game_measures([match_set(game, opponent, Raises())])
    scored = [name for name in own if name not in ("raw", "faults")]
    assert all(faulted[name] <= own[name] for name in scored)
    # The same moves: wherever playing them earns something, faulting into them earns less.
    assert all(own[name] == 0 for name in scored) or any(
        faulted[name] < own[name] for name in scored
    )


@pytest.mark.parametrize(
    ("game", "opponent"),
    [
        ("prisoners_dilemma", "tit-for-tat"),
        ("public_goods", "full-contributor"),
        ("auction", "shade"),  # against truthful the builtin earns nothing to lose
        ("colonel_blotto", "uniform"),
        ("congestion", "selfish-router"),
    ],
)
def test_some_faults_cost_the_builtin_agent(game, opponent):
    # The builtin's own moves, but every other one lost to a fault (after it was chosen, so
    # the strategy's state runs exactly as without faults).
    class Faulty:
        def __init__(self) -> None:
            self.inner = BUILTIN[game]()
            self.moves = 0

        def reset(self, game: str, player: int, seed: int) -> None:
            self.inner.reset(game, player, seed)

        def act(self, observation: dict[str, Any]) -> Any:
            action = self.inner.act(observation)
            self.moves += 1
            if self.moves % 2:
                raise RuntimeError("lost")
            return action

    own = game_measures([match_set(game, opponent, BUILTIN[game]())])
    faulty = game_measures([match_set(game, opponent, Faulty())])
    assert faulty["strategic"] < own["strategic"]
    for name in ("cooperation", "fairness"):
        if name in own:
            assert faulty[name] < own[name]


# Forfeit ------------------------------------------------------------------------------------


def test_forfeit_when_more_than_half_of_the_moves_fault():
    watch = ForfeitWatch(moves=4)
    watch.fault(0, 0, 1, "act failed: RuntimeError: one")
    watch.fault(0, 1, 1, "an opponent's fault does not count")
    watch.fault(0, 0, 0, "reset failed: a reset is not a move")
    watch.fault(1, 0, 1, "invalid action: InvalidAction: two")  # half: not yet forfeit
    with pytest.raises(AgentForfeit) as raised:
        watch.fault(1, 0, 2, "act failed: RuntimeError: one")  # the same again: not repeated
    assert str(raised.value) == (
        "3 of 4 moves faulted (forfeit: more than half); first: "
        "episode 1, round 1: act failed: RuntimeError: one; "
        "episode 2, round 1: invalid action: InvalidAction: two"
    )


def test_forfeit_stops_the_episode_as_soon_as_it_is_certain():
    class Counting(Raises):
        calls = 0

        def act(self, observation: dict[str, Any]) -> Any:
            self.calls += 1
            return super().act(observation)

    agent = Counting()
    watch = ForfeitWatch(moves=2 * 10)
    play_episode(PrisonersDilemma(10), [agent, TitForTat()], 0, on_fault=partial(watch.fault, 0))
    with pytest.raises(AgentForfeit, match=r"^11 of 20 moves faulted \(forfeit"):
        play_episode(
            PrisonersDilemma(10), [agent, TitForTat()], 1, on_fault=partial(watch.fault, 1)
        )
    assert agent.calls == 11


def test_exactly_half_faulted_is_not_forfeit():
    watch = ForfeitWatch(moves=10)
    record = play_episode(
        PrisonersDilemma(10),
        [Scripted(*[BAD, "C"] * 5), TitForTat()],
        0,
        on_fault=partial(watch.fault, 0),
    )
    assert record.faults == [5, 0] and watch.faulted == 5
