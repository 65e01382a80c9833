"""The game interface shared by the five Alympics games, and the record of one played episode.

A game is a simultaneous-move repeated game: every round each player sees its observation (a
JSON-able dict an LLM agent can play from), all players act at once, and `step` pays each one.
Observations number rounds from 1; `history` lists the rounds already played, oldest first, each
with every player's (normalised) action and the observing player's own payoff.

Two forms of the same observation (same keys in the same order, same values):
- `Game.observation(player)`: a fresh dict, what every agent gets (Python, HTTP, agent images):
  it may be kept, serialised or mutated without touching the game or the other players. Each
  player's history entries are built once, on its first observation that needs them, and shared
  between that player's later observations (so a move costs O(1) entries, not O(rounds)).
- `Game.view(player)`: a read-only Mapping that builds what is read, when it is read (a history
  entry only when indexed), for strategies that declare `accepts_view` (the built-in ones): they
  read a few fields of each observation during `act` and keep nothing. It reads the game live.
"""

from __future__ import annotations

import math
import random
import statistics
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeGuard, cast, overload

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


class ViewStrategy(Protocol):
    """A strategy that only reads its observation during `act` and keeps nothing of it, and so
    is handed `Game.view(player)` instead of a fresh dict (see accepts_view)."""

    def reset(self, game: str, player: int, seed: int) -> None: ...
    def act(self, observation: Mapping[str, Any]) -> Any: ...


def accepts_view(strategy: object) -> TypeGuard[ViewStrategy]:
    """Whether the strategy declares `accepts_view = True` (the built-in strategies do; any
    other agent gets a fresh dict)."""
    return getattr(strategy, "accepts_view", False) is True


class Game(ABC):
    name: ClassVar[str]
    n_players: ClassVar[int]
    rules: ClassVar[str]  # shown to agents in every observation
    action_format: ClassVar[str]
    # raw = mean per-round payoff - raw_offset (public goods: the endowment, per SEED-NOTES).
    raw_offset: ClassVar[float] = 0.0
    # Normalised actions are immutable scalars (str, int, float): a history entry copies a
    # round's actions with list(), not fresh_copy.
    scalar_actions: ClassVar[bool] = False

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
        # Each player's history entries for its observations, built on the first observation
        # that needs them (a player that only gets views never builds any).
        self._history: list[list[dict[str, Any]]] = [[] for _ in range(self.n_players)]

    @property
    def played(self) -> int:
        return len(self.payoffs)

    @property
    def done(self) -> bool:
        return self.played >= self.rounds

    def observation(self, player: int) -> dict[str, Any]:
        """The player's observation as a fresh dict (module docstring)."""
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
            # A new list of the player's own entries, each built once: a strategy that mutates
            # them changes only its own later observations, not the game or other players'.
            "history": list(self._own_history(player)),
        }

    def view(self, player: int) -> ObservationView:
        """The player's observation as a read-only, lazily read Mapping (module docstring)."""
        self._check_player(player)
        return ObservationView(self, player)

    def history_of(self, player: int) -> list[dict[str, Any]]:
        """The player's history entries so far, each built once: the game's own list, to read,
        never to change (the sandbox's wire sends the new ones, workers/agent_wire.py)."""
        return self._own_history(player)

    def _own_history(self, player: int) -> list[dict[str, Any]]:
        history = self._history[player]
        for round_index in range(len(history), self.played):
            history.append(self.history_entry(player, round_index))
        return history

    def private_info(self, player: int) -> dict[str, Any]:
        """What only `player` knows about the current round."""
        return {}

    def history_entry(self, player: int, round_index: int) -> dict[str, Any]:
        """A new entry: a strategy that mutates it must not change the game."""
        actions = self.actions[round_index]
        return {
            "actions": list(actions) if self.scalar_actions else [fresh_copy(a) for a in actions],
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
        return self.play_parsed([self.parse_action(p, a) for p, a in enumerate(actions)])

    def play_parsed(self, parsed: list[Any]) -> list[float]:
        """`step` for actions already normalised by parse_action (play_episode's), one per
        player, in a game not done: parsing them again would give the same actions."""
        payoffs, details = self.resolve(parsed)
        self.actions.append(parsed)
        self.payoffs.append(payoffs)
        self.details.append(details)
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
    """Book-keeping for the built-in strategies: identity and a private RNG per episode. They
    read their observation only through the Mapping interface, during `act`, and keep nothing
    of it, so play_episode hands them a Game.view (a plain dict works the same)."""

    label: ClassVar[str]
    accepts_view: ClassVar[bool] = True

    def reset(self, game: str, player: int, seed: int) -> None:
        self.game = game
        self.player = player
        self._seed = seed
        self._rng: random.Random | None = None

    @property
    def rng(self) -> random.Random:
        """The episode's RNG, seeded on first use (seeding costs more than a PD round, and
        most strategies draw nothing)."""
        if self._rng is None:
            self._rng = random.Random(self._seed)
        return self._rng


class ObservationView(Mapping[str, Any]):
    """Game.observation(player)'s keys, in its order, and values, each built when it is read,
    from the game as it is now: for a strategy that reads its observation during `act`
    (accepts_view). Nothing can be set through it, and every history entry read is a new dict,
    so a strategy cannot change the game or what another player sees through it. "history" is
    a HistoryView (a read-only Sequence, not a list); to_dict() gives the observation itself."""

    __slots__ = ("_game", "_history", "_player")

    def __init__(self, game: Game, player: int) -> None:
        self._game = game
        self._player = player
        self._history = HistoryView(game, player)

    def __getitem__(self, key: str) -> Any:
        game = self._game
        if key == "history":
            return self._history
        if key == "player":
            return self._player
        if key == "round":
            return game.played + 1
        if key == "game":
            return game.name
        if key == "n_players":
            return game.n_players
        if key == "rounds":
            return game.rounds
        if key == "rules":
            return game.rules
        if key == "action_format":
            return game.action_format
        return game.private_info(self._player)[key]

    def __iter__(self) -> Iterator[str]:
        private = self._game.private_info(self._player)
        yield from ("game", "player", "n_players", "round", "rounds", "rules", "action_format")
        yield from private
        yield "history"

    def __len__(self) -> int:
        return 8 + len(self._game.private_info(self._player))

    def to_dict(self) -> dict[str, Any]:
        """The observation as Game.observation gives it: a fresh dict."""
        return {key: list(value) if key == "history" else value for key, value in self.items()}


class HistoryView(Sequence[dict[str, Any]]):
    """A player's history, read-only and live: entry i is built (a new dict) when it is read."""

    __slots__ = ("_game", "_player")

    def __init__(self, game: Game, player: int) -> None:
        self._game = game
        self._player = player

    def __len__(self) -> int:
        return len(self._game.payoffs)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        game, played = self._game, len(self._game.payoffs)
        if isinstance(index, slice):
            return [game.history_entry(self._player, i) for i in range(*index.indices(played))]
        if index < 0:
            index += played
        if not 0 <= index < played:
            raise IndexError("history index out of range")
        return game.history_entry(self._player, index)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for index in range(len(self._game.payoffs)):
            yield self._game.history_entry(self._player, index)


def fresh_copy(value: Any) -> Any:
    """A copy of a JSON-shaped value (dicts, lists, scalars); copy.deepcopy is ~10x slower."""
    # Scalars are kept without a call: most values are a dict or list of them.
    if isinstance(value, dict):
        return {
            key: fresh_copy(item) if isinstance(item, dict | list) else item
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [fresh_copy(item) if isinstance(item, dict | list) else item for item in value]
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
