"""Mario episodes played again from their stored action logs (`arena mario replay`, the page's
`/ui/replays/...`), checked against the stored result, as frames, a GIF or an MP4.

The page's replays run on the API's machine, seconds of CPU that any reader can ask for: each
episode is played once and its GIF kept (a bounded LRU), and one plays at a time (the emulator
is not thread-safe); a request beyond that is refused (`Busy`) instead of queueing emulators."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.store import Store
from tasks.validation import InputError, RunFailed
from tasks.workloads import stored_units
from tasks.workloads.base import Unit, UnitResult

KEPT_BYTES = 64 << 20  # GIFs kept: a Mario level's best episode is a few MB at most
# Replays playing at once in one API process: one, since the emulator (nes-py) is not safe to
# run from two threads at once (two replays together misplay: "failed to execute opcode").
AT_ONCE = 1
RETRY_AFTER_S = 10
# Fields a replay must reproduce exactly (wall time is the machine's, not the episode's).
COMPARED = (
    "completed",
    "world",
    "stage",
    "max_x",
    "steps",
    "frames",
    "coins",
    "time_remaining",
    "lives_lost",
    "levels_completed",
    "furthest_level",
)


def pick_episode(
    db: Store, batch_id: str, agent: str, level: str | None, episode: int | None
) -> tuple[Unit, UnitResult]:
    """The agent's best stored episode (or the given one) in a finished Mario batch."""
    info = db.batch(batch_id)
    if info is None:
        raise InputError(f"batch: no batch {batch_id!r}")
    if info.workload != "mario":
        raise InputError(f"batch: {batch_id} is a {info.workload} batch, not mario")
    _, expanded = stored_units(info.spec, info.identity)
    units = [u for u in expanded if u.agent == agent]
    if not units:
        raise InputError(f"agent: no agent {agent!r} in batch {batch_id}")
    if level is not None:
        units = [u for u in units if u.item == level]
        if not units:
            raise InputError(f"--level: agent {agent!r} played no {level!r} in batch {batch_id}")
    if episode is not None:
        units = [u for u in units if u.episode == episode]
        if not units:
            raise InputError(f"--episode: no episode {episode} (episodes count from 0)")
    stored = db.unit_results(batch_id)
    played = [(u, stored[u.id]) for u in units if u.id in stored and stored[u.id].status == "ok"]
    if not played:
        raise InputError(f"agent: {agent!r} has no played episode to replay in batch {batch_id}")
    return max(played, key=lambda pair: (pair[1].result["arena_score"], -pair[0].episode))


def replay(
    unit: Unit, stored: UnitResult, every: int
) -> tuple[dict[str, Any], list[str], list[Any]]:
    """Play the stored episode again from its action log: what it gave, the fields that differ
    from the stored result (none, for a faithful replay), and every `every`-th frame (0: none)."""
    # The emulator (nes-py, gym) loads only when an episode is replayed: the `mario` extra.
    from workers.mario.protocol import MarioProtocol
    from workers.mario.runner import replay_episode

    frames: list[Any] = []
    count = [0]

    def keep(frame: Any) -> None:
        if every and count[0] % every == 0:
            frames.append(frame.copy())
        count[0] += 1

    protocol = MarioProtocol.model_validate(unit.payload["params"])
    try:
        played = replay_episode(unit.item, stored.result["actions"], protocol, unit.env_seed, keep)
    except (KeyError, TypeError, ValueError) as exc:  # a stored log that cannot be played
        raise RunFailed(f"the stored action log cannot be played again: {exc}") from None
    replayed = played.model_dump(mode="json")
    differs = [k for k in COMPARED if replayed.get(k) != stored.result.get(k)]
    return replayed, differs, frames


def check_video_path(path: Path) -> None:
    if path.suffix.lower() not in (".gif", ".mp4"):
        raise InputError(f"--out: {path} must end in .gif or .mp4")
    if not path.parent.is_dir():
        raise InputError(f"--out: folder {path.parent} does not exist")


def write_video(path: Path, frames: list[Any], fps: float) -> None:
    import imageio.v3 as iio  # with the `mario` extra only

    try:
        if path.suffix.lower() == ".gif":
            iio.imwrite(path, frames, duration=1000 / fps, loop=0)
        else:
            iio.imwrite(path, frames, fps=fps, codec="libx264")
    except (ImportError, OSError, ValueError) as exc:  # e.g. no ffmpeg for MP4
        raise RunFailed(f"cannot write {path}: {exc} (a .gif needs no ffmpeg)") from None


@dataclass(frozen=True)
class Replayed:
    """What playing an episode again gave: its GIF, or the fields that differ from the stored
    result (the replay does not reproduce it: kept too, it would differ again)."""

    gif: bytes
    differs: tuple[str, ...] = ()


class Busy(Exception):
    """As many replays are playing as may: try again after `retry_after_s`."""

    retry_after_s = RETRY_AFTER_S


def play_gif(db: Store, batch_id: str, agent: str, level: str | None, every: int) -> Replayed:
    """The agent's best episode as a GIF (every `every`-th frame)."""
    import imageio.v3 as iio  # with the `mario` extra only

    unit, stored = pick_episode(db, batch_id, agent, level, None)
    _, differs, frames = replay(unit, stored, every)
    if differs:
        return Replayed(b"", tuple(differs))
    gif: bytes = iio.imwrite(
        "<bytes>", frames, extension=".gif", duration=1000 * every / 60, loop=0
    )
    return Replayed(gif)


class Replays:
    """The GIFs of one API process: kept (an LRU of `kept_bytes`), at most `at_once` playing.
    `count` is told each request's outcome: played (the emulator ran), cached or busy."""

    def __init__(
        self,
        kept_bytes: int = KEPT_BYTES,
        at_once: int = AT_ONCE,
        count: Callable[[str], None] = lambda outcome: None,
    ) -> None:
        self.kept_bytes, self.count = kept_bytes, count
        self._kept: OrderedDict[str, Replayed] = OrderedDict()
        self._size = 0
        self._guard = threading.Lock()
        self.playing = threading.BoundedSemaphore(at_once)

    def best_episode(
        self, db: Store, batch_ref: str, agent: str, level: str | None, every: int = 4
    ) -> bytes:
        """The agent's best episode of a Mario batch as a GIF, played now or kept from an
        earlier request; RunFailed when it does not reproduce the stored result."""
        batch_id = db.resolve(batch_ref)
        info = db.batch(batch_id)
        if info is None:
            raise InputError(f"batch: no batch {batch_ref!r}")
        # The best episode changes only when a result lands or the batch is run again.
        episode = f"{batch_id}:{info.created_at!r}:{info.completed}:{agent}:{level}:{every}"
        replayed = self.get(episode, lambda: play_gif(db, batch_id, agent, level, every))
        if replayed.differs:
            raise RunFailed(
                f"the replay differs from the stored result in {list(replayed.differs)}"
            )
        return replayed.gif

    def get(self, episode: str, play: Callable[[], Replayed]) -> Replayed:
        """The episode's replay: kept, or played now (`play`) if fewer than `at_once` are."""
        with self._guard:
            kept = self._kept.get(episode)
            if kept is not None:
                self._kept.move_to_end(episode)
                self.count("cached")
                return kept
        if not self.playing.acquire(blocking=False):
            self.count("busy")
            raise Busy("replay: the API is playing as many replays as it may; try again shortly")
        try:
            replayed = play()
        finally:
            self.playing.release()
        self.count("played")
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
