"""Playing one episode with fault tolerance, watching a match set for forfeit, and the per-game
measures of a set of episodes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, cast

from workers.games.base import (
    EpisodeRecord,
    Game,
    ObservationView,
    Strategy,
    ViewStrategy,
    accepts_view,
)
from workers.games.registry import GAMES

MAX_FAULT_REASONS = 5
MAX_REASON_CHARS = 200
# The forfeit message keeps this many of the agent's first distinct fault reasons, this long: they
# are what the user reads to fix the agent (a game's refusal ends with the refused action), and
# the whole message must stay short.
FORFEIT_REASONS = 3
FORFEIT_REASON_CHARS = 160


def derive_seed(seed: int, *parts: str | int) -> int:
    """A 63-bit seed from a seed and a path: stable across runs (unlike Python's hash())."""
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def strategy_label(strategy: Strategy) -> str:
    label = getattr(strategy, "label", None)
    return label if isinstance(label, str) else type(strategy).__name__


# Called with (player, round, why) for every fault as it happens (round 0: the reset); it may
# raise to stop the episode, as ForfeitWatch does.
FaultHook = Callable[[int, int, str], None]


class AgentForfeit(RuntimeError):
    """More than half of the agent's moves in a match set faulted: the match set is forfeit."""


class ForfeitWatch:
    """Counts one player's faulted moves over a match set of `moves` moves (rounds x episodes)
    and raises AgentForfeit as soon as more than half have faulted: the outcome is then certain,
    so playing on would only cost time (a dead endpoint, a broken agent). A failed reset is a
    fault but not a move, so it counts on neither side."""

    def __init__(self, moves: int, player: int = 0) -> None:
        self.moves = moves
        self.player = player
        self.faulted = 0
        self.reasons: list[str] = []
        self._seen: set[str] = set()

    def fault(self, episode: int, player: int, round_number: int, why: str) -> None:
        """A FaultHook once `episode` (0-based) is bound, e.g. with functools.partial."""
        if player != self.player or round_number == 0:
            return
        self.faulted += 1
        # Distinct reasons only: a dead endpoint fails every move the same way.
        if len(self.reasons) < FORFEIT_REASONS and why not in self._seen:
            self._seen.add(why)
            where = f"episode {episode + 1}, round {round_number}"
            self.reasons.append(f"{where}: {why}"[:FORFEIT_REASON_CHARS])
        if 2 * self.faulted > self.moves:
            raise AgentForfeit(
                f"{self.faulted} of {self.moves} moves faulted (forfeit: more than half); "
                f"first: {'; '.join(self.reasons)}"
            )


class _Faults:
    def __init__(self, n_players: int, on_fault: FaultHook | None) -> None:
        self.counts = [0] * n_players
        self.reasons: list[str] = []
        self.moves: list[list[int]] = [[] for _ in range(n_players)]
        self.on_fault = on_fault

    def add(self, player: int, round_number: int, why: str) -> None:
        self.counts[player] += 1
        if round_number > 0:  # round 0 is the reset: a fault, but no move
            self.moves[player].append(round_number - 1)
        if len(self.reasons) < MAX_FAULT_REASONS:
            self.reasons.append(f"player {player}, round {round_number}: {why}"[:MAX_REASON_CHARS])
        if self.on_fault is not None:
            self.on_fault(player, round_number, why)


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _reset(strategy: Strategy, game: Game, player: int, seed: int) -> str | None:
    """Why the strategy's reset failed, or None."""
    try:
        strategy.reset(game=game.name, player=player, seed=derive_seed(seed, "player", player))
    except Exception as exc:
        return f"reset failed: {_describe(exc)}"
    return None


def _move(
    strategy: Strategy, game: Game, player: int, view: ObservationView | None
) -> tuple[Any, str | None]:
    """The player's normalised action and None, or the game's default action and why the
    player's own move faulted. `view`: the player's Game.view if the strategy accepts one (it
    reads the game live, so one serves a whole episode); None: it gets a fresh dict."""
    try:
        if view is not None:
            action = cast(ViewStrategy, strategy).act(view)
        else:
            action = strategy.act(game.observation(player))
    except Exception as exc:
        return game.default_action(player), f"act failed: {_describe(exc)}"
    return _parsed(game, player, action)


def _parsed(game: Game, player: int, action: Any) -> tuple[Any, str | None]:
    try:
        return game.parse_action(player, action), None
    except Exception as exc:  # whatever the agent returned, it is the agent's fault
        return game.default_action(player), f"invalid action: {_describe(exc)}"


def overlaps(strategy: object) -> bool:
    """Whether the strategy asks in two halves (a sandboxed agent: `begin_act` sends the
    observation to its process, `finish_act` reads the answer)."""
    return callable(getattr(strategy, "begin_act", None))


def _round(
    game: Game, players: Sequence[tuple[Strategy, ObservationView | None]]
) -> list[tuple[Any, str | None]]:
    """Every player's (action, why it faulted) for one round. The moves of a round are
    simultaneous (nothing is played until all are chosen), so a sandboxed agent is asked first
    and the others' moves are made while its process thinks: the same moves, sooner."""
    begun = {p: _begin(s, game, p) for p, (s, _) in enumerate(players) if overlaps(s)}
    moves: list[tuple[Any, str | None]] = []
    for player, (strategy, view) in enumerate(players):
        if player not in begun:
            moves.append(_move(strategy, game, player, view))
        else:
            moves.append((None, None))  # read below, once the others have moved
    for player, failed in begun.items():
        moves[player] = _finish(players[player][0], game, player, failed)
    return moves


def _begin(strategy: Strategy, game: Game, player: int) -> str | None:
    """Why sending the player's observation failed, or None."""
    try:
        begin_in = getattr(strategy, "begin_act_in", None)
        if begin_in is not None:  # it reads what it sends from the game itself
            begin_in(game, player)
        else:
            strategy.begin_act(game.observation(player))  # type: ignore[attr-defined]
    except Exception as exc:
        return f"act failed: {_describe(exc)}"
    return None


def _finish(
    strategy: Strategy, game: Game, player: int, failed: str | None
) -> tuple[Any, str | None]:
    if failed is not None:
        return game.default_action(player), failed
    try:
        action = strategy.finish_act()  # type: ignore[attr-defined]
    except Exception as exc:
        return game.default_action(player), f"act failed: {_describe(exc)}"
    return _parsed(game, player, action)


def play_episode(
    game: Game,
    strategies: Sequence[Strategy],
    seed: int,
    labels: Sequence[str] | None = None,
    on_fault: FaultHook | None = None,
) -> EpisodeRecord:
    """Reset the game with `seed` and each strategy with a seed derived from (seed, player), then
    play every round. A strategy that raises (any Exception, not SystemExit or Ctrl-C) or returns
    an action the game rejects plays the game's default action instead, so the episode goes on
    for the others; the move is recorded as faulted (EpisodeRecord.faulted), and the measures
    give it no credit. `on_fault` hears of every fault and may raise to stop the episode."""
    if len(strategies) != game.n_players:
        raise ValueError(f"{game.name}: {game.n_players} strategies needed, got {len(strategies)}")
    game.reset(seed)
    faults = _Faults(game.n_players, on_fault)
    for player, strategy in enumerate(strategies):
        why = _reset(strategy, game, player, seed)
        if why is not None:
            faults.add(player, 0, why)
    players = [(s, game.view(p) if accepts_view(s) else None) for p, s in enumerate(strategies)]
    for round_number in range(1, game.rounds + 1):
        actions: list[Any] = []
        for player, (action, why) in enumerate(_round(game, players)):
            if why is not None:
                faults.add(player, round_number, why)
            actions.append(action)
        game.play_parsed(actions)  # normalised by _move
    return EpisodeRecord(
        game=game.name,
        seed=seed,
        players=list(labels) if labels is not None else [strategy_label(s) for s in strategies],
        actions=game.actions,
        payoffs=game.payoffs,
        details=game.details,
        faults=faults.counts,
        fault_reasons=faults.reasons,
        faulted=faults.moves,
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
