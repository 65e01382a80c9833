"""play_episode and the registry, across all five games: determinism, faults, observations."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.workers.games.helpers import Scripted
from workers.games import (
    BASELINES,
    BUILTIN,
    GAMES,
    derive_seed,
    game_measures,
    opponent_lineup,
    play_episode,
)
from workers.games.base import EpisodeRecord

ROUNDS = {
    "prisoners_dilemma": 5,
    "public_goods": 4,
    "auction": 3,
    "colonel_blotto": 2,
    "congestion": 3,
}
MATCH_SETS = [(game, opponent) for game in GAMES for opponent in BASELINES[game]]
# The baselines whose episodes depend on the seed (the others are deterministic whatever it is).
RANDOM_MATCH_SETS = [
    ("auction", "truthful"),
    ("colonel_blotto", "concentrated"),
    ("congestion", "epsilon-greedy"),
]


def episode(game: str, opponent: str, seed: int, agent=None) -> EpisodeRecord:
    players = [agent or BUILTIN[game](), *opponent_lineup(game, opponent)]
    return play_episode(GAMES[game](ROUNDS[game]), players, seed)


def test_registry_names_the_rubric_games_and_baselines():
    assert list(GAMES) == [
        "prisoners_dilemma",
        "public_goods",
        "auction",
        "colonel_blotto",
        "congestion",
    ]
    assert set(BASELINES) == set(BUILTIN) == set(GAMES)
    assert {name for names in BASELINES.values() for name in names} == {
        "tit-for-tat",
        "always-defect",
        "full-contributor",
        "free-rider",
        "conditional-cooperator",
        "punisher",
        "truthful",
        "shade",
        "uniform",
        "concentrated",
        "selfish-router",
        "social-optimum",
        "epsilon-greedy",
    }


@pytest.mark.parametrize(("game", "opponent"), MATCH_SETS)
def test_lineup_fills_the_table_and_labels_the_players(game, opponent):
    lineup = opponent_lineup(game, opponent)
    assert len(lineup) == GAMES[game].n_players - 1
    assert len({id(s) for s in lineup}) == len(lineup)  # fresh copies, no shared state
    record = episode(game, opponent, 0)
    assert record.players[1:] == [opponent] * len(lineup)
    assert len(record.actions) == len(record.payoffs) == len(record.details) == ROUNDS[game]
    assert record.faults == [0] * GAMES[game].n_players


def test_lineup_refuses_unknown_names():
    with pytest.raises(ValueError, match="baselines: tit-for-tat, always-defect"):
        opponent_lineup("prisoners_dilemma", "grudger")
    with pytest.raises(ValueError, match="unknown game"):
        opponent_lineup("chess", "uniform")


@pytest.mark.parametrize(("game", "opponent"), MATCH_SETS)
def test_same_seed_same_episode(game, opponent):
    assert episode(game, opponent, 11) == episode(game, opponent, 11)


@pytest.mark.parametrize(("game", "opponent"), RANDOM_MATCH_SETS)
def test_different_seed_different_episode(game, opponent):
    records = [episode(game, opponent, seed) for seed in range(5)]
    assert len({json.dumps(r.model_dump(exclude={"seed"})) for r in records}) > 1


def test_strategy_seeds_are_derived_per_player_with_hashlib():
    assert derive_seed(5, "player", 0) == derive_seed(5, "player", 0)
    assert derive_seed(5, "player", 0) != derive_seed(5, "player", 1)
    # sha256, not Python's per-process salted hash(): the same seed in every worker.
    digest = hashlib.sha256(b"5:player:0").digest()
    assert derive_seed(5, "player", 0) == int.from_bytes(digest[:8], "big") >> 1
    seen = []

    class Recorder(Scripted):
        def reset(self, game, player, seed):
            seen.append((game, player, seed))

    play_episode(GAMES["prisoners_dilemma"](1), [Recorder("C"), Recorder("C")], 5)
    assert seen == [("prisoners_dilemma", p, derive_seed(5, "player", p)) for p in (0, 1)]


@pytest.mark.parametrize("game", list(GAMES))
def test_observations_are_json_and_complete(game):
    instance = GAMES[game](2)
    instance.reset(1)
    instance.step([instance.default_action(p) for p in range(instance.n_players)])
    for player in range(instance.n_players):
        observation = json.loads(json.dumps(instance.observation(player)))
        assert observation["game"] == game and observation["player"] == player
        assert observation["round"] == 2 and observation["rounds"] == 2
        assert observation["rules"] and observation["action_format"]
        [entry] = observation["history"]
        assert len(entry["actions"]) == instance.n_players
        assert entry["payoff"] == instance.payoffs[0][player]
    assert ("value" in instance.observation(0)) == (game == "auction")


@pytest.mark.parametrize("game", list(GAMES))
def test_mutating_an_observation_does_not_change_the_game(game):
    # Each player's history entries are built once (on its first observation that needs them)
    # and shared between that player's observations (copying them every move made an episode
    # quadratic in its rounds), so a strategy that mutates an entry changes only its own later
    # view, never the game's record or what the other players see (test_observation.py).
    instance = GAMES[game](2)
    instance.reset(1)
    instance.step([instance.default_action(p) for p in range(instance.n_players)])
    record = json.dumps([instance.actions, instance.payoffs, instance.details])
    others = json.dumps(instance.observation(1))
    length = len(instance.observation(0)["history"])
    observation = instance.observation(0)
    observation["history"][0]["actions"].clear()
    observation["history"].append("junk")
    assert json.dumps([instance.actions, instance.payoffs, instance.details]) == record
    assert json.dumps(instance.observation(1)) == others
    assert len(instance.observation(0)["history"]) == length


class Raises:
    label = "raises"

    def reset(self, game, player, seed):
        pass

    def act(self, observation):
        raise RuntimeError("model unavailable")


class FailsReset(Raises):
    def reset(self, game, player, seed):
        raise ConnectionError("no route to host")


OUT_OF_RANGE = {
    "prisoners_dilemma": "Q",
    "public_goods": 11,
    "auction": 101,
    "colonel_blotto": [50, 50, 50, 0, 0],
    "congestion": 7,
}


@pytest.mark.parametrize("game", list(GAMES))
@pytest.mark.parametrize(
    ("faulty", "reason"),
    [
        (lambda game: Raises(), "act failed: RuntimeError: model unavailable"),
        (lambda game: Scripted(object()), "invalid action"),
        (lambda game: Scripted(None), "invalid action"),
        (lambda game: Scripted({"nonsense": [1, 2]}), "invalid action"),
        (lambda game: Scripted(OUT_OF_RANGE[game]), "invalid action"),
    ],
)
def test_faults_play_the_default_and_are_counted(game, faulty, reason):
    opponent = next(iter(BASELINES[game]))
    record = episode(game, opponent, 3, agent=faulty(game))
    instance = GAMES[game](1)
    assert all(actions[0] == instance.default_action(0) for actions in record.actions)
    assert record.faults == [ROUNDS[game]] + [0] * (instance.n_players - 1)
    assert len(record.fault_reasons) == min(ROUNDS[game], 5)
    assert record.fault_reasons[0].startswith(f"player 0, round 1: {reason}")
    assert game_measures([record])["faults"] == ROUNDS[game]


def test_a_failed_reset_is_a_fault_and_the_episode_goes_on():
    record = episode("prisoners_dilemma", "always-defect", 0, agent=FailsReset())
    assert record.faults == [1 + ROUNDS["prisoners_dilemma"], 0]
    assert record.fault_reasons[0] == (
        "player 0, round 0: reset failed: ConnectionError: no route to host"
    )


def test_only_some_rounds_faulting():
    record = episode("prisoners_dilemma", "tit-for-tat", 0, agent=Scripted("D", "?", "D", 0, "C"))
    assert [a[0] for a in record.actions] == ["D", "C", "D", "C", "C"]
    assert record.faults == [2, 0]
    assert game_measures([record])["faults"] == 2


def test_fault_reasons_keep_only_the_first_few():
    record = play_episode(GAMES["prisoners_dilemma"](50), [Raises(), Raises()], 0)
    assert record.faults == [50, 50] and len(record.fault_reasons) == 5


def test_game_measures_refuses_empty_or_mixed_input():
    with pytest.raises(ValueError, match="at least one"):
        game_measures([])
    mixed = [episode("auction", "shade", 0), episode("congestion", "social-optimum", 0)]
    with pytest.raises(ValueError, match="one game"):
        game_measures(mixed)
    with pytest.raises(ValueError, match="player"):
        game_measures([episode("auction", "shade", 0)], player=2)


def test_step_checks_the_round_and_the_actions():
    game = GAMES["prisoners_dilemma"](1)
    game.reset(0)
    with pytest.raises(ValueError, match="2 actions"):
        game.step(["C"])
    game.step(["C", "D"])
    assert game.done
    with pytest.raises(RuntimeError, match="reset first"):
        game.step(["C", "C"])
    game.reset(0)
    assert not game.done and game.observation(0)["history"] == []
    with pytest.raises(ValueError, match="rounds"):
        GAMES["prisoners_dilemma"](0)
