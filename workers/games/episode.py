"""Playing one episode with fault tolerance, and the per-game measures of a set of episodes."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from workers.games.base import EpisodeRecord, Game, Strategy
from workers.games.registry import GAMES

MAX_FAULT_REASONS = 5
MAX_REASON_CHARS = 200


def derive_seed(seed: int, *parts: str | int) -> int:
    """A 63-bit seed from a seed and a path: stable across runs (unlike Python's hash())."""
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def strategy_label(strategy: Strategy) -> str:
    label = getattr(strategy, "label", None)
    return label if isinstance(label, str) else type(strategy).__name__


class _Faults:
    def __init__(self, n_players: int) -> None:
        self.counts = [0] * n_players
        self.reasons: list[str] = []

    def add(self, player: int, round_number: int, why: str) -> None:
        self.counts[player] += 1
        if len(self.reasons) < MAX_FAULT_REASONS:
            self.reasons.append(f"player {player}, round {round_number}: {why}"[:MAX_REASON_CHARS])


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def play_episode(
    game: Game,
    strategies: Sequence[Strategy],
    seed: int,
    labels: Sequence[str] | None = None,
) -> EpisodeRecord:
    """Reset the game with `seed` and each strategy with a seed derived from (seed, player), then
    play every round. A strategy that raises (any Exception, not SystemExit or Ctrl-C) or returns
    an action the game rejects plays the game's default action instead, and the fault is counted:
    an agent's fault never stops the episode."""
    if len(strategies) != game.n_players:
        raise ValueError(f"{game.name}: {game.n_players} strategies needed, got {len(strategies)}")
    game.reset(seed)
    faults = _Faults(game.n_players)
    for player, strategy in enumerate(strategies):
        try:
            strategy.reset(game.name, player, derive_seed(seed, "player", player))
        except Exception as exc:
            faults.add(player, 0, f"reset failed: {_describe(exc)}")
    while not game.done:
        actions: list[Any] = []
        for player, strategy in enumerate(strategies):
            round_number = game.played + 1
            try:
                action = strategy.act(game.observation(player))
            except Exception as exc:
                faults.add(player, round_number, f"act failed: {_describe(exc)}")
                actions.append(game.default_action(player))
                continue
            try:
                actions.append(game.parse_action(player, action))
            except Exception as exc:  # whatever the agent returned, it is the agent's fault
                faults.add(player, round_number, f"invalid action: {_describe(exc)}")
                actions.append(game.default_action(player))
        game.step(actions)
    return EpisodeRecord(
        game=game.name,
        seed=seed,
        players=list(labels) if labels is not None else [strategy_label(s) for s in strategies],
        actions=game.actions,
        payoffs=game.payoffs,
        details=game.details,
        faults=faults.counts,
        fault_reasons=faults.reasons,
    )


def game_measures(records: Sequence[EpisodeRecord], player: int = 0) -> dict[str, float]:
    """The measures of `player` (the agent under test) over one game's episodes against one
    opponent set: "raw" (the rubric's raw payoff, so scoring.alympics.normalise(game, raw) is
    the strategic score), "strategic" (that normalised score), "faults", and the game's own
    0-100 "cooperation" and "fairness" where the rubric reads them."""
    if not records:
        raise ValueError("game_measures needs at least one episode")
    names = {record.game for record in records}
    if len(names) != 1:
        raise ValueError(f"game_measures takes one game's episodes, got {sorted(names)}")
    game = GAMES[names.pop()]
    if not 0 <= player < game.n_players:
        raise ValueError(f"{game.name}: player must be 0..{game.n_players - 1}, not {player}")
    if not any(record.payoffs for record in records):
        raise ValueError(f"{game.name}: no rounds played in these episodes")
    return game.measures(records, player)
