"""What travels between the worker and a sandboxed agent's process (workers/agent_child.py in
the jail, workers/sandbox/agent_process.py in the worker), both halves of it in one place.

Each message is a 4-byte little-endian length and a body:

- worker -> agent: a pickle of `(op, argument)`. The worker is trusted, so the agent's side may
  unpickle what it sends. `op` is `make` (a dict: the entry point, or the checkpoint and its
  preprocessing), `reset` (the keywords) or `act`: `(kind, payload, array)`, the observation
  whole (kind 0) or what changed since the last (kind 1, Observations), and where its NumPy
  array lies in the shared memory, if it has one (a Mario frame: `(key, shape, dtype, strides,
  offset)`).
- agent -> worker: never pickle (the worker trusts nothing of the agent's): `i` or `s` and the
  text of an int or str action (the common answers), or `j` and JSON: `{"ok": value}`,
  `{"raised": [type, message]}`, `{"memory": message}` (a MemoryError), `{"exit": [code, why]}`
  just before the process exits (SystemExit), `{"ready": pid}` or `{"broken": why}` at start.

A request is answered before the next is sent. Each side asks for the other's next message
without sleeping for a moment before it waits for it (recv_spinning): a game's next move comes
within tens of microseconds, less than what the two wake-ups of a sleep cost on a virtual
machine; a Mario frame comes after milliseconds of emulation, next to which the spin is small.

Standard library only: the agent's side imports this before anything else.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import select
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

HEADER = struct.Struct("<I")
MAX_REQUEST = 256 << 20  # what the worker sends (an observation); it never comes near this
MAX_ANSWER = 1 << 20  # what the worker accepts back: an action, or a reason
SPIN_S = 100e-6  # the agent's side, right after an answer (Pacer)
LEAD_S = 300e-6  # the agent's side is awake this long before a request due at a steady pace
PACE_LIMIT_S = 0.1
# The worker, waiting for an answer: its CPU would only idle meanwhile, and a slow answer
# (a model's forward pass, ~1-2 ms) then costs no second wake-up.
ANSWER_SPIN_S = 2e-3
SCALARS = frozenset({str, int, float, bool, type(None)})
# Where an array lies in the shared memory: its layout as it was in the worker (a Mario screen is
# a strided view of the emulator's buffer), copied as the bytes it spans, not element by element.
Layout = tuple[tuple[int, ...], str, tuple[int, ...], int]  # shape, dtype.str, strides, offset
ArrayRef = tuple[str, tuple[int, ...], str, tuple[int, ...], int]  # the observation key, Layout


def encode_request(op: str, argument: Any) -> bytes:
    payload = pickle.dumps((op, argument), protocol=5)
    return HEADER.pack(len(payload)) + payload


def receive_request(sock: socket.socket, buffer: bytearray, pacer: Pacer) -> Any:
    """The next request (None when the worker closed the socket)."""
    while len(buffer) < HEADER.size or len(buffer) < HEADER.size + _length(buffer):
        chunk = pacer.receive(sock)
        if not chunk:
            return None
        buffer += chunk
    end = HEADER.size + _length(buffer)
    request = pickle.loads(memoryview(buffer)[HEADER.size : end])
    del buffer[:end]
    return request


class Pacer:
    """How the agent's side waits for the next request. Right after an answer, it asks without
    sleeping for `spin_s` (a game's next move). When requests come at a steady pace slower
    than that (a Mario step: milliseconds of emulation), it sleeps until LEAD_S before the next
    is due, woken at once if it comes earlier, then asks without sleeping: awake when the frame
    comes, where waking a process on an idle virtual CPU costs the worker's step 0.3-1 ms. (A
    block of Alympics episodes keeps two requests in flight, so the next is there already:
    spinning longer for it only took CPU from the worker, 16-19 against 14-16 us a move.)"""

    def __init__(self, spin_s: float) -> None:
        self.spin_s = spin_s
        self.gap = 0.0  # the usual time from an answer to the next request
        self.answered = 0.0

    def sent(self) -> None:
        self.answered = time.perf_counter()

    def receive(self, sock: socket.socket) -> bytes:
        if self.gap > 2 * LEAD_S and self.answered:
            asleep = self.answered + self.gap - LEAD_S - time.perf_counter()
            if asleep > 0:
                select.select([sock], [], [], asleep)
            chunk = recv_spinning(sock, 2 * LEAD_S)
        else:
            chunk = recv_spinning(sock, self.spin_s)
        if self.answered:
            gap = time.perf_counter() - self.answered
            if gap < PACE_LIMIT_S:  # a pause between units is not a pace
                self.gap = gap if not self.gap else 0.75 * self.gap + 0.25 * gap
            self.answered = 0.0
        return chunk


def recv_spinning(sock: socket.socket, spin_s: float) -> bytes:
    """The next bytes on the socket, asked for without sleeping for up to `spin_s` (yielding the
    CPU to anything runnable beside: two spinners on one CPU must not starve each other), then
    waited for."""
    end = time.perf_counter() + spin_s
    while True:
        try:
            return sock.recv(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            if time.perf_counter() >= end:
                return sock.recv(1 << 20)
            os.sched_yield()


def _length(buffer: bytearray) -> int:
    length: int = HEADER.unpack_from(buffer)[0]
    if length > MAX_REQUEST:
        raise ValueError(f"a request of {length:,} bytes")
    return length


def encode_answer(answer: dict[str, Any]) -> bytes:
    """An answer's frame: an int or str action as `i` or `s` and its text (a few microseconds a
    move less than JSON), anything else as `j` and JSON."""
    data = b""
    if len(answer) == 1 and "ok" in answer:
        value, kind = answer["ok"], type(answer["ok"])
        with contextlib.suppress(ValueError):  # too long an int, a lone surrogate: JSON
            if kind is int:
                data = b"i" + str(value).encode()
            elif kind is str:
                data = b"s" + value.encode()
    if not data:
        try:
            data = b"j" + json.dumps(answer, default=_plain).encode()
        except (TypeError, ValueError, RecursionError) as exc:
            data = b"j" + json.dumps({"raised": ["TypeError", f"not JSON: {exc}"]}).encode()
    if len(data) > MAX_ANSWER:
        too_long = {"raised": ["ValueError", f"an answer of {len(data):,} bytes"]}
        data = b"j" + json.dumps(too_long).encode()
    return HEADER.pack(len(data)) + data


def _plain(value: Any) -> Any:
    """NumPy scalars and arrays an agent returns, as JSON values (as workers.agent_server)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def decode_answer(tag: int, raw: bytes) -> dict[str, Any] | None:
    """encode_answer undone (None: not an answer): an int, a str or a JSON object, never
    anything that could run code in the worker."""
    try:
        if tag == ord("i"):
            return {"ok": int(raw)}
        if tag == ord("s"):
            return {"ok": raw.decode()}
        if tag == ord("j"):
            answer = json.loads(raw)
            return answer if isinstance(answer, dict) else None
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        pass
    return None


_MISSING = object()


class Observations:
    """The worker's half: what the agent's side has of the last observation (History), so that
    a dict observation with the same keys travels as the values that changed. An unchanged
    scalar stays behind; anything else travels again, so the agent never shares a mutable value
    with its earlier observations, as in the worker. Of a `history` list that goes on from the
    entries sent before, only the new entries travel: a game builds each entry once, and a
    player's later observations share them (workers/games/base.py), so a move of a 100-round
    game costs one entry, not a hundred. The one NumPy array of a dict (a Mario frame) goes
    through `share` (the shared memory) instead, when it fits."""

    def __init__(self, share: Callable[[Any], Layout | None]) -> None:
        self.share = share
        self.keys: tuple[Any, ...] | None = None
        self.scalars: dict[Any, Any] = {}
        self.entries: list[Any] = []
        self.array_key: Any = _MISSING
        # encode_game's: the game and player whose observation went last, its private keys.
        self.game: Any = None
        self.player: int | None = None
        self.private_keys: tuple[Any, ...] = ()

    def encode_game(self, game: Any, player: int) -> tuple[int, Any, ArrayRef | None]:
        """`encode(game.observation(player))` for an Alympics game (workers/games/base.py)
        whose observation for `player` went last: of what a round changes, only the round, the
        player's private information and the history entries since are read, instead of the
        whole observation built and compared key by key (4 us of the worker's 8 a move). The
        first observation, another game or player, or private keys that changed: `encode`."""
        private = game.private_info(player)
        same = game is self.game and player == self.player and self.keys is not None
        history = game.history_of(player) if same else []
        # Another game or player, private keys that changed, or a reset game (another episode).
        if not (same and tuple(private) == self.private_keys and self._goes_on(history)):
            self.game, self.player, self.private_keys = game, player, tuple(private)
            return self.encode(game.observation(player))
        new = history[len(self.entries) :]
        self.entries.extend(new)
        scalars, changed = self.scalars, {}
        for key, value in (("round", game.played + 1), *private.items()):
            old = scalars.get(key, _MISSING)
            if type(value) in SCALARS:
                if type(old) is type(value) and old == value:
                    continue
                scalars[key] = value
            elif key in scalars:
                del scalars[key]
            changed[key] = value
        return 1, (changed, new), None

    def encode(self, observation: Any) -> tuple[int, Any, ArrayRef | None]:
        if type(observation) is not dict:
            self.keys = None
            return 0, observation, None
        keys = tuple(observation)
        found = observation.get("history")
        history: list[Any] | None = found if type(found) is list else None
        if keys == self.keys and (history is None or self._goes_on(history)):
            return self._changes(observation, history)
        return self._whole(observation, keys, history)

    def _goes_on(self, history: list[Any]) -> bool:
        """Whether `history` is the entries sent before and maybe more: the game appends, so
        the last entry sent being in its place says so."""
        sent = self.entries
        return len(history) >= len(sent) and (not sent or history[len(sent) - 1] is sent[-1])

    def _whole(
        self, observation: dict[Any, Any], keys: tuple[Any, ...], history: list[Any] | None
    ) -> tuple[int, Any, ArrayRef | None]:
        array, self.array_key = None, _MISSING
        ndarray = _ndarray()
        found = [k for k, v in observation.items() if ndarray and isinstance(v, ndarray)]
        if len(found) == 1 and (where := self.share(observation[found[0]])) is not None:
            array, self.array_key = (found[0], *where), found[0]
            observation = {k: v for k, v in observation.items() if k != found[0]}
        self.keys = keys
        self.scalars = {k: v for k, v in observation.items() if type(v) in SCALARS}
        self.entries = list(history) if history is not None else []
        return 0, observation, array

    def _changes(
        self, observation: dict[Any, Any], history: list[Any] | None
    ) -> tuple[int, Any, ArrayRef | None]:
        scalars, changed, array = self.scalars, {}, None
        for key, value in observation.items():
            old = scalars.get(key, _MISSING)
            if old is value:  # the very scalar sent before (a game's rules): unchanged
                continue
            kind = type(value)
            if kind in SCALARS:
                if type(old) is kind and old == value:
                    continue
                scalars[key] = value
            elif key == self.array_key and (where := self._share(value)) is not None:
                array = (key, *where)
                continue
            elif history is not None and key == "history":
                continue
            elif key in scalars:
                del scalars[key]
            changed[key] = value
        new = None
        if history is not None:
            new = history[len(self.entries) :]
            self.entries.extend(new)
        return 1, (changed, new), array

    def _share(self, value: Any) -> Layout | None:
        ndarray = _ndarray()
        return self.share(value) if ndarray and isinstance(value, ndarray) else None


def _ndarray() -> Any:
    numpy = sys.modules.get("numpy")  # no array can exist where NumPy was never imported
    return None if numpy is None else numpy.ndarray


class History:
    """The agent's half of Observations: the scalars of the last observation and the entries of
    its history, from which the next observation is made whole again (a fresh dict and a fresh
    history list of the shared entries, as the game gives in the worker)."""

    def __init__(self) -> None:
        self.last: dict[Any, Any] = {}
        self.entries: list[Any] = []

    def observation(self, kind: int, payload: Any) -> Any:
        if kind == 0:
            if type(payload) is dict:
                self.last = dict(payload)
                history = payload.get("history")
                self.entries = list(history) if type(history) is list else []
            return payload
        changed, new_entries = payload
        observation = dict(self.last)
        observation.update(changed)
        if new_entries is not None:
            self.entries.extend(new_entries)
            observation["history"] = list(self.entries)
        self.last = dict(observation)
        return observation
