"""Replays of the page (`/ui/replays/...`, docs/api.md): an emulator episode played again on the
API's machine is seconds of CPU that any reader can ask for, so each episode is played once and
its GIF kept (a bounded LRU), and at most a few play at once; a request beyond that is answered
503 with Retry-After instead of queueing more emulators."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import HTTPException
from prometheus_client import Counter

KEPT_BYTES = 64 << 20  # GIFs kept: a Mario level's best episode is a few MB at most
AT_ONCE = 2  # replays playing at once in one API process
RETRY_AFTER_S = 10

REPLAYS = Counter(
    "arena_api_replays",
    "Replays the page was asked for, by outcome: played (the emulator ran), cached, busy "
    "(refused: too many playing).",
    ["outcome"],
)


@dataclass(frozen=True)
class Replayed:
    """What playing an episode again gave: its GIF, or the fields that differ from the stored
    result (the replay does not reproduce it: kept too, it would differ again)."""

    gif: bytes
    differs: tuple[str, ...] = ()


class Replays:
    def __init__(self, kept_bytes: int = KEPT_BYTES, at_once: int = AT_ONCE) -> None:
        self.kept_bytes = kept_bytes
        self._kept: OrderedDict[str, Replayed] = OrderedDict()
        self._size = 0
        self._guard = threading.Lock()
        self.playing = threading.BoundedSemaphore(at_once)

    def get(self, episode: str, play: Callable[[], Replayed]) -> Replayed:
        """The episode's replay: kept, or played now (`play`) if fewer than `at_once` are."""
        with self._guard:
            kept = self._kept.get(episode)
            if kept is not None:
                self._kept.move_to_end(episode)
                REPLAYS.labels("cached").inc()
                return kept
        if not self.playing.acquire(blocking=False):
            REPLAYS.labels("busy").inc()
            raise HTTPException(
                503, "replay: the API is playing as many replays as it may; try again shortly",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )  # fmt: skip
        try:
            replayed = play()
        finally:
            self.playing.release()
        REPLAYS.labels("played").inc()
        self._keep(episode, replayed)
        return replayed

    def _keep(self, episode: str, replayed: Replayed) -> None:
        if len(replayed.gif) > self.kept_bytes:
            return
        with self._guard:
            if episode in self._kept:
                return
            self._kept[episode] = replayed
            self._size += len(replayed.gif)
            while self._size > self.kept_bytes:
                _, dropped = self._kept.popitem(last=False)
                self._size -= len(dropped.gif)
