"""The Alympics games as pure engines: five games, their baselines, the built-in agent, playing
an episode with fault tolerance, and the per-game measures the rubric reads (SEED-NOTES).
A faulted move earns nothing (measures), and a match set with more than half of the agent's
moves faulted is forfeit (ForfeitWatch).

Modules: base (the Game interface, its observations and views, EpisodeRecord), episode
(play_episode, ForfeitWatch, game_measures), registry (GAMES, BASELINES, BUILTIN,
opponent_lineup), one module per game.
"""

from workers.games.base import EpisodeRecord, Game, InvalidAction, Strategy
from workers.games.episode import (
    AgentForfeit,
    ForfeitWatch,
    derive_seed,
    game_measures,
    play_episode,
)
from workers.games.registry import BASELINES, BUILTIN, GAMES, opponent_lineup

__all__ = [
    "BASELINES",
    "BUILTIN",
    "GAMES",
    "AgentForfeit",
    "EpisodeRecord",
    "ForfeitWatch",
    "Game",
    "InvalidAction",
    "Strategy",
    "derive_seed",
    "game_measures",
    "opponent_lineup",
    "play_episode",
]
