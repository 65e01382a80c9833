"""The game interface shared by the five Alympics games, and the record of one played episode.

A game is a simultaneous-move repeated game: every round each player sees its observation (a
JSON-able dict an LLM agent can play from), all players act at once, and `step` pays each one.
Observations number rounds from 1; `history` lists the rounds already played, oldest first, each
with every player's (normalised) action and the observing player's own payoff.
"""

from __future__ import annotations

import math
import random
import statistics
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, cast

from pydantic import BaseModel, ConfigDict

from scoring.alympics import BOUNDS, GameName, normalise


class InvalidAction(ValueError):
    """An action the game cannot accept; the message says what a valid one looks like."""


class EpisodeRecord(BaseModel):
    """One episode as played: per round, every player's action and payoff.

    `actions` and `payoffs` are what was played, faulted moves included (the game's default
    action stood in); the measures read `faulted` to give those moves no credit.
    """

    model_config = ConfigDict(frozen=True)

    game: str
    seed: int
    players: list[str]  # strategy labels, in player order
    actions: list[list[Any]]  # [round][player], normalised by the game's parse_action
    payoffs: list[list[float]]  # [round][player]
    details: list[dict[str, Any]]  # [round]: what else the round decided (values, winner, loads)
    faults: list[int]  # per player: faulted moves plus failed resets
    fault_reasons: list[str]  # the first few, "player P, round R: why"
    # Per player, the indices (into actions and payoffs) of the rounds whose move faulted:
    # compact, as a healthy agent has none. A failed reset is a fault but not a move.
    faulted: list[list[int]]


class Strategy(Protocol):
    def reset(self, game: str, player: int, seed: int) -> None: ...
    def act(self, observation: dict[str, Any]) -> Any: ...


class Game(ABC):
    name: ClassVar[str]
    n_players: ClassVar[int]
    rules: ClassVar[str]  # shown to agents in every observation
    action_format: ClassVar[str]
    # raw = mean per-round payoff - raw_offset (public goods: the endowment, per SEED-NOTES).
    raw_offset: ClassVar[float] = 0.0

    def __init__(self, rounds: int) -> None:
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"rounds must be a positive integer, not {rounds!r}")
        self.rounds = rounds
        self.reset(0)

    def reset(self, seed: int) -> None:
        """Start a new episode; everything random in it is drawn from `seed` alone."""
        self.seed = seed
        self.actions: list[list[Any]] = []
        self.payoffs: list[list[float]] = []
        self.details: list[dict[str, Any]] = []
        # Each player's view of the rounds played, built once per round (not once per move).
        self._history: list[list[dict[str, Any]]] = [[] for _ in range(self.n_players)]

    @property
    def played(self) -> int:
        return len(self.payoffs)

    @property
    def done(self) -> bool:
        return self.played >= self.rounds

    def observation(self, player: int) -> dict[str, Any]:
        self._check_player(player)
        return {
            "game": self.name,
            "player": player,
            "n_players": self.n_players,
            "round": self.played + 1,
            "rounds": self.rounds,
            "rules": self.rules,
            "action_format": self.action_format,
            **self.private_info(player),
            # A new list of the player's own entries, built once per round: a strategy that
            # mutates them changes only its own later view, not the game or other players'.
            "history": list(self._history[player]),
        }

    def private_info(self, player: int) -> dict[str, Any]:
        """What only `player` knows about the current round."""
        return {}

    def history_entry(self, player: int, round_index: int) -> dict[str, Any]:
        # Copies: a strategy that mutates its observation must not change the game.
        return {
            "actions": [fresh_copy(action) for action in self.actions[round_index]],
            "payoff": self.payoffs[round_index][player],
        }

    @abstractmethod
    def default_action(self, player: int) -> Any:
        """Played for a player whose strategy faulted this round, so the episode goes on for the
        others; the faulting player earns no credit for it (see measures)."""

    @abstractmethod
    def parse_action(self, player: int, action: Any) -> Any:
        """The normalised action, or InvalidAction. Accepts its own normalised output."""

    @abstractmethod
    def resolve(self, actions: list[Any]) -> tuple[list[float], dict[str, Any]]:
        """Payoffs of one round of normalised actions, and the round's other outcomes."""

    def step(self, actions: Sequence[Any]) -> list[float]:
        if self.done:
            raise RuntimeError(f"{self.name}: all {self.rounds} rounds played; reset first")
        if len(actions) != self.n_players:
            raise ValueError(f"{self.name}: {self.n_players} actions needed, got {len(actions)}")
        parsed = [self.parse_action(p, a) for p, a in enumerate(actions)]
        payoffs, details = self.resolve(parsed)
        self.actions.append(parsed)
        self.payoffs.append(payoffs)
        self.details.append(details)
        for player, history in enumerate(self._history):
            history.append(self.history_entry(player, self.played - 1))
        return list(payoffs)

    @classmethod
    def fault_payoff(cls) -> float:
        """The most a faulted move is credited: the payoff at the rubric's lower bound, so it
        normalises to 0 at best (a fault never scores better than a move the agent made)."""
        return BOUNDS[cast(GameName, cls.name)][0] + cls.raw_offset

    @classmethod
    def credited_payoffs(cls, record: EpisodeRecord, player: int) -> list[float]:
        """`player`'s payoff per round, a faulted round capped at fault_payoff()."""
        cap, faulted = cls.fault_payoff(), set(record.faulted[player])
        return [
            min(payoffs[player], cap) if index in faulted else payoffs[player]
            for index, payoffs in enumerate(record.payoffs)
        ]

    @classmethod
    def measures(cls, records: Sequence[EpisodeRecord], player: int) -> dict[str, float]:
        """raw, strategic and faults; games add their cooperation and fairness measures, in
        which a faulted move counts as neither cooperative nor fair (see faulted_flags)."""
        own = [payoff for record in records for payoff in cls.credited_payoffs(record, player)]
        raw = statistics.fmean(own) - cls.raw_offset
        return {
            "raw": raw,
            "strategic": float(normalise(cast(GameName, cls.name), raw)),
            "faults": float(sum(record.faults[player] for record in records)),
        }

    def _check_player(self, player: int) -> None:
        if not 0 <= player < self.n_players:
            raise ValueError(f"{self.name}: player must be 0..{self.n_players - 1}, not {player}")


def faulted_flags(record: EpisodeRecord, player: int) -> list[bool]:
    """Per round of `record`, whether `player`'s move faulted."""
    faulted = set(record.faulted[player])
    return [index in faulted for index in range(len(record.actions))]


class SeededStrategy:
    """Book-keeping for the built-in strategies: identity and a private RNG per episode."""

    label: ClassVar[str]

    def reset(self, game: str, player: int, seed: int) -> None:
        self.game = game
        self.player = player
        self.rng = random.Random(seed)


def fresh_copy(value: Any) -> Any:
    """A copy of a JSON-shaped value (dicts, lists, scalars); copy.deepcopy is ~10x slower, and
    observations copy the whole history every round."""
    if isinstance(value, dict):
        return {key: fresh_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [fresh_copy(item) for item in value]
    return value


def parse_number(value: Any, low: float, high: float, what: str) -> float:
    """A finite number in [low, high]; numeric strings are accepted (LLM agents send them)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise InvalidAction(f"{what} must be a number, not {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidAction(f"{what} must be a number, not {_short(value)}")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise InvalidAction(f"{what} must be between {low:g} and {high:g}, not {value!r}")
    return number


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
