"""Small hand-written strategies for the game tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workers.games import Game, Strategy, play_episode
from workers.games.base import EpisodeRecord


class Scripted:
    """Plays `moves[round - 1]`, or its only move in every round."""

    label = "scripted"

    def __init__(self, *moves: Any) -> None:
        self.moves = moves

    def reset(self, game: str, player: int, seed: int) -> None:
        self.player = player

    def act(self, observation: dict[str, Any]) -> Any:
        index = observation["round"] - 1
        return self.moves[0] if len(self.moves) == 1 else self.moves[index]


def play(game: Game, strategies: Sequence[Strategy], seed: int = 0) -> EpisodeRecord:
    return play_episode(game, strategies, seed)


def payoffs_of(game: Game, actions: Sequence[Any], seed: int = 0) -> list[float]:
    game.reset(seed)
    return game.step(actions)
