"""Several episodes of one match set played together, round by round (lockstep), for an agent
whose every call is a round trip to another process (a sandboxed entry point): one request
carries the calls of every episode of a phase (their resets, then each round's moves), and the
answers stream back in order, each within the agent's step timeout of the one before
(workers/sandbox/agent_slots.py). A move of a 100-round game was a round trip of its own
(~25 us, more than the whole move costs in the worker); now a round trip serves up to
LOCKSTEP_EPISODES moves.

The agent plays each episode of a block with an instance of its own (the factory called once
per slot, as the baselines get a fresh strategy per episode), reset before each episode. An
agent's calls come in the same order whether it runs in the worker or sandboxed (episode by
episode within a phase, phase by phase), so the two give the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from workers.games.base import EpisodeRecord, Game, ObservationView, Strategy, accepts_view
from workers.games.episode import (
    FaultHook,
    _begin,
    _Faults,
    _finish,
    _move,
    _reset,
    derive_seed,
    overlaps,
    strategy_label,
)

# A player of an episode: its index, its strategy, the view it reads (or None: it gets a fresh
# dict) and whether it is asked in halves (a sandboxed agent).
Player = tuple[int, Strategy, ObservationView | None, bool]

# Episodes played together: a round trip serves this many moves. Each is an instance of the
# agent (its memory counts against the agent's limit), so the block stays small.
LOCKSTEP_EPISODES = 20


class Slots(Protocol):
    """An agent's instances for a block of episodes, and how to send what they were asked."""

    strategies: Sequence[Strategy]

    def flush(self) -> None:
        """Send the calls the slots' `begin_*` queued (nothing to do for instances in the
        worker's own process)."""


def play_lockstep(
    games: Sequence[Game],
    lineups: Sequence[Sequence[Strategy]],
    seeds: Sequence[int],
    hooks: Sequence[FaultHook | None],
    flush: Callable[[], None],
) -> list[EpisodeRecord]:
    """Play episode e of `games` with `lineups[e]` from `seeds[e]`, all of them round by round
    together, with play_episode's rules (faults, default actions, hooks). A strategy that asks
    in halves (`begin_reset`/`finish_reset`, `begin_act`/`finish_act`) queues its calls, which
    `flush` sends at once; the others are called in turn meanwhile."""
    faults = [_Faults(g.n_players, hook) for g, hook in zip(games, hooks, strict=True)]
    _reset_all(games, lineups, seeds, faults, flush)
    players = [
        [
            (p, s, game.view(p) if accepts_view(s) else None, overlaps(s))
            for p, s in enumerate(lineup)
        ]
        for game, lineup in zip(games, lineups, strict=True)
    ]
    # Two halves in flight: the agent's process answers one half's moves while the worker
    # reads the other's answers, plays them and asks its next round (the same calls, in the
    # same order: half by half within a round, round by round).
    half = (len(games) + 1) // 2
    halves = [h for h in (range(half), range(half, len(games))) if h]
    asked = [_ask(games, players, h, flush) for h in halves]
    for round_number in range(1, games[0].rounds + 1):
        for index, episodes in enumerate(halves):
            moves = _moves(games, players, episodes, asked[index])
            for e, moved in zip(episodes, moves, strict=True):
                for player, (_, why) in enumerate(moved):
                    if why is not None:
                        faults[e].add(player, round_number, why)
                games[e].play_parsed([action for action, _ in moved])
            if round_number < games[0].rounds:
                asked[index] = _ask(games, players, episodes, flush)
    return [
        EpisodeRecord(
            game=game.name,
            seed=seed,
            players=[strategy_label(s) for s in lineup],
            actions=game.actions,
            payoffs=game.payoffs,
            details=game.details,
            faults=fault.counts,
            fault_reasons=fault.reasons,
            faulted=fault.moves,
        )
        for game, lineup, seed, fault in zip(games, lineups, seeds, faults, strict=True)
    ]


def _reset_all(
    games: Sequence[Game],
    lineups: Sequence[Sequence[Strategy]],
    seeds: Sequence[int],
    faults: Sequence[_Faults],
    flush: Callable[[], None],
) -> None:
    """Every game reset with its seed, every strategy with a seed derived from (seed, player);
    the failures recorded episode by episode, player by player."""
    failed: dict[tuple[int, int], str | None] = {}
    begun: list[tuple[int, int]] = []
    for e, (game, lineup, seed) in enumerate(zip(games, lineups, seeds, strict=True)):
        game.reset(seed)
        for player, strategy in enumerate(lineup):
            if callable(getattr(strategy, "begin_reset", None)):
                keywords = {"game": game.name, "player": player}
                strategy.begin_reset(**keywords, seed=derive_seed(seed, "player", player))  # type: ignore[attr-defined]
                begun.append((e, player))
            else:
                failed[e, player] = _reset(strategy, game, player, seed)
    flush()
    for e, player in begun:
        try:
            lineups[e][player].finish_reset()  # type: ignore[attr-defined]
            failed[e, player] = None
        except Exception as exc:
            failed[e, player] = f"reset failed: {type(exc).__name__}: {exc}"
    for (e, player), why in sorted(failed.items()):
        if why is not None:
            faults[e].add(player, 0, why)


def _ask(
    games: Sequence[Game],
    players: Sequence[Sequence[Player]],
    episodes: range,
    flush: Callable[[], None],
) -> dict[tuple[int, int], str | None]:
    """The round's moves of the players asked in halves, in `episodes`, queued and sent at
    once: for each, why sending its observation failed, or None."""
    begun = {
        (e, player): _begin(strategy, games[e], player)
        for e in episodes
        for player, strategy, _, halves in players[e]
        if halves
    }
    flush()
    return begun


def _moves(
    games: Sequence[Game],
    players: Sequence[Sequence[Player]],
    episodes: range,
    begun: dict[tuple[int, int], str | None],
) -> list[list[tuple[Any, str | None]]]:
    """The round's moves in `episodes`: the others' made now, then the answers of those asked
    (`begun`) read in the order asked."""
    moves = [
        [
            (None, None) if halves else _move(strategy, games[e], player, view)
            for player, strategy, view, halves in players[e]
        ]
        for e in episodes
    ]
    for (e, player), failed in begun.items():
        strategy = players[e][player][1]
        moves[e - episodes.start][player] = _finish(strategy, games[e], player, failed)
    return moves
