"""Observations: the fresh dict every agent gets, the read-only view the built-in strategies
get, that both say the same, and that nothing an agent does to either reaches the game or the
other players. Plus a digest that pins what the games play, bit for bit."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import pytest

from tests.workers.games.helpers import Scripted
from workers.games import BASELINES, BUILTIN, GAMES, opponent_lineup, play_episode
from workers.games.base import EpisodeRecord, Game, HistoryView, ObservationView

MATCH_SETS = [(game, opponent) for game in GAMES for opponent in BASELINES[game]]
ROUNDS = {
    "prisoners_dilemma": 6,
    "public_goods": 5,
    "auction": 4,
    "colonel_blotto": 3,
    "congestion": 4,
}


class PassThrough:
    """A built-in strategy behind a wrapper that does not declare accepts_view, as a user's
    agent would: it is handed fresh dicts."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.label = inner.label
        self.seen: list[Any] = []

    def reset(self, game: str, player: int, seed: int) -> None:
        self.inner.reset(game, player, seed)

    def act(self, observation: dict[str, Any]) -> Any:
        self.seen.append(type(observation))
        return self.inner.act(observation)


class Checking(PassThrough):
    """Declares accepts_view; checks every view it is handed against the fresh dict."""

    accepts_view = True

    def __init__(self, inner: Any, game: Game) -> None:
        super().__init__(inner)
        self.game = game

    def reset(self, game: str, player: int, seed: int) -> None:
        super().reset(game, player, seed)
        self.player = player

    def act(self, observation: Any) -> Any:
        assert isinstance(observation, ObservationView)
        check_same(observation, self.game.observation(self.player))
        return super().act(observation)


def check_same(view: Mapping[str, Any], fresh: dict[str, Any]) -> None:
    assert list(view) == list(fresh) and len(view) == len(fresh)
    as_dict = view.to_dict() if isinstance(view, ObservationView) else dict(view)
    assert json.dumps(as_dict) == json.dumps(fresh)  # same keys, same order, same values
    assert repr(as_dict) == repr(fresh)  # same types too (lists stay lists)
    history = view["history"]
    assert isinstance(history, HistoryView) and len(history) == len(fresh["history"])
    assert list(history) == fresh["history"] and history[:] == fresh["history"]
    if fresh["history"]:
        assert history[-1] == fresh["history"][-1] and history[0] == fresh["history"][0]
        assert history[1:-1] == fresh["history"][1:-1]
    for key in fresh:
        assert key in view
    assert "nothing" not in view and view.get("nothing") is None


@pytest.mark.parametrize(("game", "opponent"), MATCH_SETS)
def test_views_say_what_the_fresh_dicts_say(game, opponent):
    instance = GAMES[game](ROUNDS[game])
    players = [Checking(s, instance) for s in [BUILTIN[game](), *opponent_lineup(game, opponent)]]
    play_episode(instance, players, 3)
    assert all(p.seen == [ObservationView] * ROUNDS[game] for p in players)


@pytest.mark.parametrize(("game", "opponent"), MATCH_SETS)
@pytest.mark.parametrize("seed", [0, 7])
def test_builtins_play_the_same_on_views_and_dicts(game, opponent, seed):
    def players(wrap: bool) -> list[Any]:
        strategies = [BUILTIN[game](), *opponent_lineup(game, opponent)]
        return [PassThrough(s) for s in strategies] if wrap else strategies

    wrapped = players(wrap=True)
    on_dicts = play_episode(GAMES[game](ROUNDS[game]), wrapped, seed)
    on_views = play_episode(GAMES[game](ROUNDS[game]), players(wrap=False), seed)
    assert on_views == on_dicts
    assert all(p.seen == [dict] * ROUNDS[game] for p in wrapped)


def test_only_strategies_that_accept_views_get_them():
    builtin, agent = BUILTIN["prisoners_dilemma"](), PassThrough(BUILTIN["prisoners_dilemma"]())
    received: list[Any] = []
    original = builtin.act
    builtin.act = lambda observation: received.append(observation) or original(observation)
    play_episode(GAMES["prisoners_dilemma"](2), [builtin, agent], 0)
    assert [type(o) for o in received] == [ObservationView] * 2
    assert agent.seen == [dict, dict]


@pytest.mark.parametrize("game", list(GAMES))
def test_a_view_cannot_change_the_game(game):
    instance = GAMES[game](3)
    instance.reset(1)
    for _ in range(2):
        instance.step([instance.default_action(p) for p in range(instance.n_players)])
    record = json.dumps([instance.actions, instance.payoffs, instance.details])
    fresh = [json.dumps(instance.observation(p)) for p in range(instance.n_players)]
    view = instance.view(0)
    with pytest.raises(TypeError):
        view["round"] = 99  # type: ignore[index]
    with pytest.raises(AttributeError):
        view["history"].append("junk")
    entry = view["history"][-1]
    entry["actions"].clear()
    entry["payoff"] = 1e9
    for item in view["history"]:
        item.clear()
    assert json.dumps([instance.actions, instance.payoffs, instance.details]) == record
    assert [json.dumps(instance.observation(p)) for p in range(instance.n_players)] == fresh
    assert json.dumps(view.to_dict()) == fresh[0]
    with pytest.raises(IndexError):
        view["history"][2]
    with pytest.raises(IndexError):
        view["history"][-3]


class Vandal(Scripted):
    """Plays its script, then wrecks every part of the observation it was handed."""

    def act(self, observation: dict[str, Any]) -> Any:
        action = super().act(observation)
        for entry in observation["history"]:
            for value in entry.values():
                if isinstance(value, list):
                    for item in value:
                        if isinstance(item, dict | list):
                            item.clear()
                    value.append("junk")
            entry["payoff"] = -1e9
        observation["history"].append({"actions": "junk"})
        observation["round"] = -1
        observation.clear()
        return action


class Spy:
    """A built-in that records every observation it is handed, as JSON, and plays on a copy."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.label, self.seen = inner, inner.label, []

    def reset(self, game: str, player: int, seed: int) -> None:
        self.inner.reset(game, player, seed)

    def act(self, observation: dict[str, Any]) -> Any:
        self.seen.append(json.dumps(observation))
        return self.inner.act(copy.deepcopy(observation))


@pytest.mark.parametrize(("game", "opponent"), MATCH_SETS)
def test_an_agent_wrecking_its_observations_changes_nothing_else(game, opponent):
    # The agent plays the builtin's moves from a first, clean episode, then the same moves
    # while wrecking every observation: the game and every other player see exactly the same.
    rounds = ROUNDS[game]
    clean = play_episode(
        GAMES[game](rounds), [BUILTIN[game](), *opponent_lineup(game, opponent)], 5
    )
    moves = [actions[0] for actions in clean.actions]

    def run(agent: Scripted) -> tuple[EpisodeRecord, list[list[str]]]:
        others = [Spy(s) for s in opponent_lineup(game, opponent)]
        record = play_episode(GAMES[game](rounds), [agent, *others], 5)
        return record, [spy.seen for spy in others]

    calm, calm_seen = run(Scripted(*moves))
    wrecked, wrecked_seen = run(Vandal(*moves))
    assert wrecked.actions == calm.actions == clean.actions
    assert wrecked.payoffs == calm.payoffs and wrecked.details == calm.details
    assert wrecked.faults == calm.faults == [0] * GAMES[game].n_players
    assert wrecked_seen == calm_seen


def test_fresh_dict_history_entries_are_built_once_per_player():
    game = GAMES["public_goods"](3)
    game.reset(0)
    game.step([10, 5, 0, {"contribution": 10, "punish": True}])
    first = game.observation(0)["history"][0]
    assert game.observation(0)["history"][0] is first  # shared between its own observations
    assert game.observation(1)["history"][0] is not first  # never with another player's
    assert game.observation(1)["history"][0]["actions"] == first["actions"]
    assert first["actions"][3] is not game.actions[0][3]  # a copy of the game's action


# What the games play, pinned: the digest of episodes of every match set, taken before the
# observation rework (workers/games/base.py) and unchanged by it. A change to a game's rules,
# payoffs, strategies or seeding changes it; then check docs/alympics.md and update it here.
PLAYED_DIGEST = "1bd6fd5360367d24692e2e7d5ad2eeb0c9972bd6f9c09885da29c3e4c859bb85"


def played_digest() -> str:
    digest = hashlib.sha256()
    for game, opponent in MATCH_SETS:
        rounds = 30 if game in ("prisoners_dilemma", "public_goods") else 3
        for seed in range(3):
            players = [BUILTIN[game](), *opponent_lineup(game, opponent)]
            record = play_episode(GAMES[game](rounds), players, seed)
            digest.update(json.dumps(record.model_dump(), sort_keys=True).encode())
    return digest.hexdigest()


def test_the_games_play_as_pinned():
    assert played_digest() == PLAYED_DIGEST
