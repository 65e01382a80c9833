"""A Stable-Baselines3 checkpoint as a file, and the models this process loaded from such files.

Nothing here unpickles or imports torch: the file's bytes and their sha256 (hashed again only when
the file's stat changes), the algorithm that saved it (read from its JSON "data" member), and
CACHE, the last CACHED_MODELS models `workers.mario.sb3.load_checkpoint_agent` loaded, keyed by
(content digest, device, preprocessing). docs/mario.md, "Where checkpoints are loaded".
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workers.fingerprint import read_artifact

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

ALGORITHMS = ("PPO", "A2C", "DQN")


@dataclass(frozen=True)
class LoadedModel:
    """A checkpoint loaded and checked against one preprocessing, on one device."""

    model: BaseAlgorithm
    n_actions: int
    algorithm: str


CacheKey = tuple[str, str, Hashable]  # (sha256 of the file, device, preprocessing)


class CheckpointCache:
    """The last `size` checkpoints this process loaded, least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.hits = self.misses = 0
        self._models: OrderedDict[CacheKey, LoadedModel] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: CacheKey) -> LoadedModel | None:
        with self._lock:
            found = self._models.get(key)
            if found is None:
                self.misses += 1
                return None
            self.hits += 1
            self._models.move_to_end(key)
            return found

    def put(self, key: CacheKey, loaded: LoadedModel) -> None:
        with self._lock:
            self._models[key] = loaded
            self._models.move_to_end(key)
            while len(self._models) > self.size:
                self._models.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._models.clear()
            self.hits = self.misses = 0

    def keys(self) -> list[CacheKey]:
        with self._lock:
            return list(self._models)


# Units are queued agent by agent (agents x levels x episodes): a worker process mostly runs one
# checkpoint's episodes in a row, and the last few cover the boundaries between agents and a
# board of a run's checkpoints (the rubric's has 3). Each held model costs its weights and
# optimizer state (NatureCNN at 84x84x4: a 6.9 MB file) in the process, on the GPU for cuda; a
# sandboxed checkpoint's process only ever holds one (its warm pool's key holds the digest).
CACHED_MODELS = 4
CACHE = CheckpointCache(CACHED_MODELS)


def content_digest(file: Path) -> str:
    """The sha256 of the file's bytes, hashed again whenever its stat changes: a rewrite changes
    its ctime, which utime cannot set back (it sets only the access and modify times)."""
    stat = file.stat()
    resolved = file.resolve()
    return _digest(
        resolved, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns
    )


@lru_cache(maxsize=64)
def _digest(path: Path, dev: int, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    return hashlib.sha256(read_file(path)).hexdigest()


def read_file(file: Path) -> bytes:
    """The whole file, a regular one of at most MAX_ARTIFACT_BYTES (a device or a FIFO is
    refused, never read); ValueError naming it when it cannot be read."""
    try:
        return read_artifact(file)
    except OSError as error:
        raise ValueError(f"sb3: cannot read {str(file)!r}: {error.strerror or error}") from None


def _read_data(checkpoint: bytes, path: str) -> dict[str, Any]:
    """The checkpoint's "data" member as plain JSON (nothing unpickled yet)."""
    try:
        with zipfile.ZipFile(io.BytesIO(checkpoint)) as archive:
            raw = archive.read("data")
        data = json.loads(raw)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
        raise ValueError(
            f"sb3: {path!r} is not a Stable-Baselines3 checkpoint (a .zip written by "
            f"model.save, with a 'data' member): {error}"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"sb3: {path!r}: its 'data' member is not a JSON object")
    return data


def checkpoint_algorithm(checkpoint: bytes, path: str) -> str:
    """Which algorithm saved the checkpoint: SB3 stores no class name, but each algorithm's
    hyperparameters and policy module tell them apart. ValueError when none did."""
    data = _read_data(checkpoint, path)
    policy = data.get("policy_class")
    module = policy.get("__module__", "") if isinstance(policy, dict) else ""
    if module.startswith("sb3_contrib"):
        # Their policies need what plain load/predict lack (recurrent states, action masks).
        raise ValueError(f"sb3: {path!r} was saved by sb3-contrib ({module}): not supported")
    if module.startswith("stable_baselines3.dqn") or "target_update_interval" in data:
        return "DQN"
    if "clip_range" in data or "n_epochs" in data:
        return "PPO"
    if "vf_coef" in data and "n_steps" in data:
        return "A2C"
    raise ValueError(
        f"sb3: {path!r} was not saved by one of {', '.join(ALGORITHMS)} (policy module "
        f"{module or 'unknown'!r}); a discrete-action algorithm of stable_baselines3 is needed"
    )


__all__ = [
    "ALGORITHMS",
    "CACHE",
    "CACHED_MODELS",
    "CheckpointCache",
    "LoadedModel",
    "checkpoint_algorithm",
    "content_digest",
    "read_file",
]
