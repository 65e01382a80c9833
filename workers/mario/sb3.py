"""A Mario agent from a Stable-Baselines3 checkpoint (`.zip`), with its observation preprocessing.

The spec declares the preprocessing the model was trained with (`grayscale`, `resize`,
`frame_stack`); the agent applies it to every frame and asks the model for an action with
`model.predict(obs, deterministic=True)`. Preprocessing, deterministic and NumPy-only:

1. grayscale: luminance with the BT.601 weights in 14-bit fixed point, rounded, as OpenCV's
   `cvtColor(RGB2GRAY)` computes it: `(4899 R + 9617 G + 1868 B + 8192) >> 14`;
2. resize to `resize`×`resize` by exact area averaging (each output pixel is the mean of the
   input area it covers, as OpenCV's INTER_AREA when shrinking), rounded half up;
3. frame stack: the last `frame_stack` frames, oldest first, channel-first, as SB3's
   VecFrameStack (+ VecTransposeImage) gives a CnnPolicy: `(frame_stack, resize, resize)` uint8
   in grayscale, `(3 * frame_stack, resize, resize)` (frame-major, RGB within) in colour. At
   reset the first frame fills the stack.

A model trained on other preprocessing sees other pixels: train with `MarioObservation` (a
gymnasium ObservationWrapper doing exactly this). The model's own observation space is the
source of truth: a checkpoint whose space is not the declared preprocessing's is refused.

Loading a checkpoint unpickles parts of it (SB3's format): a checkpoint is code, like an entry
point, and is loaded only in the agent sandbox, never in the worker (unless the operator trusts
every agent: docs/agents.md, "Where agents run"). docs/mario.md, "Stable-Baselines3
checkpoints".

A process loads a checkpoint once: `load_checkpoint_agent` keeps the last models it loaded
(workers/mario/checkpoints.py), keyed by the file's content (sha256), the device and the
preprocessing, and gives each call a new CheckpointAgent (its own frame stack) over the cached
model. docs/mario.md, "Where checkpoints are loaded".
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from workers.mario.checkpoints import (
    CACHE,
    LoadedModel,
    checkpoint_algorithm,
    content_digest,
    read_file,
)
from workers.mario.compat import import_gym_quietly
from workers.mario.determinism import make_deterministic, runtime_provenance

try:
    import gymnasium
except ImportError as error:  # pragma: no cover - the sb3 extra brings gymnasium
    raise ImportError(
        "Stable-Baselines3 checkpoints need the sb3 extra: pip install 'arena-eval[sb3]'"
    ) from error

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

log = logging.getLogger(__name__)

Image = np.ndarray[Any, np.dtype[np.uint8]]
Index = np.ndarray[Any, np.dtype[np.int64]]
# OpenCV's RGB2GRAY coefficients: BT.601's 0.299, 0.587, 0.114 scaled by 2**14.
_R2Y, _G2Y, _B2Y, _GRAY_SHIFT = 4899, 9617, 1868, 14
BATCH_KEY = "observations"  # an act request carrying a lockstep group's stacked observations
SEED_KEY = "seed"  # ... and the seed its pass draws from (batched.agent_policy)


def luminance(frame: Image) -> Image:
    """An (H, W, 3) RGB frame as its (H, W) luminance."""
    rgb = np.asarray(frame)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"frame: expected (H, W, 3) uint8 RGB, got {rgb.shape} {rgb.dtype}")
    # dtype= keeps int32 under NumPy 1's value-based casting too (int16 would overflow).
    luma = np.multiply(rgb[..., 0], _R2Y, dtype=np.int32)
    luma += np.multiply(rgb[..., 1], _G2Y, dtype=np.int32)
    luma += np.multiply(rgb[..., 2], _B2Y, dtype=np.int32)
    luma += 1 << (_GRAY_SHIFT - 1)
    luma >>= _GRAY_SHIFT
    return luma.astype(np.uint8)


@lru_cache(maxsize=16)
def _area_band(size_in: int, size_out: int) -> tuple[Index, Index]:
    """The area weights from size_in to size_out pixels, as a band: output pixel i is
    sum_t weights[t, i] * input[index[t, i]]. Output pixel i covers [i*in, (i+1)*in) and input
    pixel j covers [j*out, (j+1)*out), both in units of 1/out input pixels: the weights are
    their integer overlaps, and each output pixel's sum to size_in."""
    i = np.arange(size_out)[:, None]
    j = np.arange(size_in)[None, :]
    overlap = np.minimum((i + 1) * size_in, (j + 1) * size_out) - np.maximum(
        i * size_in, j * size_out
    )
    overlap = np.clip(overlap, 0, None)
    first = (overlap > 0).argmax(axis=1)
    width = int((overlap > 0).sum(axis=1).max())
    index = np.minimum(first[None, :] + np.arange(width)[:, None], size_in - 1)
    weights = np.where(
        first[None, :] + np.arange(width)[:, None] < size_in,
        overlap[np.arange(size_out)[None, :], index],
        0,
    )
    return index.astype(np.intp), weights.astype(np.int64)


def resize_area(image: Image, size: int) -> Image:
    """An (H, W) or (C, H, W) uint8 image as (size, size) or (C, size, size), area-averaged.

    In integers throughout (no BLAS, whose threads and summation order vary): the same bytes
    on every machine, and the exact mean of the covered area, rounded half up."""
    height, width = image.shape[-2:]
    # int32 holds the sums of a frame up to 8 megapixels; int64 beyond.
    dtype = np.int32 if 255 * height * width < 2**31 else np.int64
    index, weights = _area_band(height, size)
    rows = sum(
        image[..., index[t], :] * weights[t, :, None].astype(dtype) for t in range(len(index))
    )
    index, weights = _area_band(width, size)
    total = sum(rows[..., index[t]] * weights[t].astype(dtype) for t in range(len(index)))
    scale = height * width
    resized: Image = ((total + scale // 2) // scale).astype(np.uint8)
    return resized


@dataclass(frozen=True)
class Preprocessing:
    """The observation preprocessing a checkpoint was trained with."""

    grayscale: bool = True
    resize: int = 84
    frame_stack: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.resize <= 4096:
            raise ValueError(f"resize: {self.resize} is not a positive size")
        if self.frame_stack < 1:
            raise ValueError(f"frame_stack: {self.frame_stack} is not at least 1")

    @property
    def channels(self) -> int:
        return 1 if self.grayscale else 3

    @property
    def shape(self) -> tuple[int, int, int]:
        """The stacked observation, channel-first (what SB3's CnnPolicy sees)."""
        return (self.channels * self.frame_stack, self.resize, self.resize)

    def space(self) -> gymnasium.spaces.Box:
        return gymnasium.spaces.Box(0, 255, self.shape, np.uint8)

    def frame(self, frame: Image) -> Image:
        """One RGB frame as (channels, resize, resize)."""
        if self.grayscale:
            return resize_area(luminance(frame), self.resize)[None]
        rgb = np.asarray(frame)
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f"frame: expected (H, W, 3) uint8 RGB, got {rgb.shape} {rgb.dtype}")
        return resize_area(np.moveaxis(rgb, 2, 0), self.resize)


class FrameStack:
    """The last `frame_stack` preprocessed frames, oldest first; the first after `clear` fills
    the stack (the episode's first frame repeated)."""

    def __init__(self, preprocessing: Preprocessing) -> None:
        self.preprocessing = preprocessing
        self.stack: Image = np.zeros(preprocessing.shape, dtype=np.uint8)
        self.empty = True

    def clear(self) -> None:
        self.empty = True

    def push(self, frame: Image) -> Image:
        """Add an RGB frame; the stacked observation (this object's buffer: copy to keep it)."""
        new = self.preprocessing.frame(frame)
        channels = self.preprocessing.channels
        if self.empty:
            self.stack[:] = np.tile(new, (self.preprocessing.frame_stack, 1, 1))
            self.empty = False
        else:
            self.stack[:-channels] = self.stack[channels:]
            self.stack[-channels:] = new
        return self.stack


class MarioObservation(gymnasium.ObservationWrapper[Image, Any, Image]):
    """Train with this: a gymnasium env's RGB frames in, the preprocessing the Mario runner
    applies out (grayscale, area resize, frame stack, channel-first uint8).

    `PPO("CnnPolicy", MarioObservation(env, resize=84, frame_stack=4))` then saves a checkpoint
    whose observation space is the one `preprocess: {grayscale: true, resize: 84,
    frame_stack: 4}` declares; no VecFrameStack is needed (it would stack again)."""

    def __init__(
        self,
        env: gymnasium.Env[Image, Any],
        *,
        grayscale: bool = True,
        resize: int = 84,
        frame_stack: int = 4,
    ) -> None:
        super().__init__(env)
        self.preprocessing = Preprocessing(grayscale, resize, frame_stack)
        # Box's stubs type its samples loosely; its dtype is uint8.
        self.observation_space = cast("gymnasium.spaces.Space[Image]", self.preprocessing.space())
        self._stack = FrameStack(self.preprocessing)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Image, dict[str, Any]]:
        self._stack.clear()
        return super().reset(seed=seed, options=options)

    def observation(self, observation: Image) -> Image:
        return self._stack.push(observation).copy()  # learners keep observations


class CheckpointAgent:
    """The agent contract over a loaded SB3 model (docs/agents.md)."""

    def __init__(
        self, model: BaseAlgorithm, preprocessing: Preprocessing, n_actions: int, path: str
    ) -> None:
        self.model = model
        self.preprocessing = preprocessing
        self.n_actions = n_actions
        self.path = path
        self.stack = FrameStack(preprocessing)
        self.runtime: dict[str, Any] = {}  # where it runs (determinism.runtime_provenance)

    def reset(self, *, seed: int, **context: Any) -> None:
        actions = context.get("actions")
        if actions is not None and len(actions) != self.n_actions:
            raise ValueError(
                f"sb3: {self.path} has {self.n_actions} actions, the action set "
                f"{context.get('action_set', '')!r} has {len(actions)}: train on the protocol's "
                "action_set (params.action_set)"
            )
        # predict(deterministic=True) draws nothing, but a custom policy might: SB3's own
        # seeding (Python's, NumPy's and torch's global generators, and the action space).
        self.model.set_random_seed(seed % 2**32)  # Arena's seeds are 63-bit; torch/NumPy take 32
        self.stack.clear()

    def act(self, observation: Any) -> Any:
        """An action; for {BATCH_KEY: (n, *shape) uint8} n actions (workers/mario/batched.py)."""
        if isinstance(observation, dict) and BATCH_KEY in observation:
            if SEED_KEY in observation:  # a pass's own seed: see reset
                self.model.set_random_seed(int(observation[SEED_KEY]) % 2**32)
            return self.act_batch(observation[BATCH_KEY])
        frame = observation["frame"] if isinstance(observation, dict) else observation
        action, _ = self.model.predict(self.stack.push(frame), deterministic=True)
        return int(np.asarray(action).reshape(-1)[0])

    def act_batch(self, observations: Any) -> list[int]:
        batch = np.array(observations)  # a copy: torch warns of the read-only shared memory
        shape = (*self.preprocessing.shape,)
        if batch.ndim != 4 or batch.shape[1:] != shape or batch.dtype != np.uint8 or not batch.size:
            raise ValueError(
                f"sb3: a batch of observations must be (n, {', '.join(map(str, shape))}) uint8 "
                f"with n >= 1, got {batch.shape} {batch.dtype}"
            )
        actions, _ = self.model.predict(batch, deterministic=True)
        return [int(a) for a in np.asarray(actions).reshape(-1)]


def load_checkpoint_agent(
    path: str,
    *,
    grayscale: bool,
    resize: int,
    frame_stack: int,
    device: str,
    cache: bool = True,
) -> CheckpointAgent:
    """Load a PPO, A2C or DQN checkpoint as an agent applying the declared preprocessing.

    A checkpoint this process already loaded with the same content, device and preprocessing
    is not loaded again (CACHE; `cache=False` loads afresh and keeps nothing): the agent is a new
    CheckpointAgent over the same model, whose `reset` clears its frames and seeds as always.

    Raises FileNotFoundError for a missing file, ValueError for a file that is not an SB3
    checkpoint of a known algorithm, or whose spaces do not fit the preprocessing (a Box of
    uint8 of its shape) and a discrete action set; "cuda" without a GPU runs on the CPU."""
    preprocessing = Preprocessing(grayscale, resize, frame_stack)
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"sb3: no checkpoint file {path!r}")
    import_gym_quietly()  # SB3 imports gym when it is installed (the mario extra brings it)
    try:  # here: the sb3 extra (torch: seconds to import), only where a checkpoint loads
        import stable_baselines3
        import torch
    except ImportError as error:
        raise ImportError(
            "sb3: Stable-Baselines3 checkpoints need the sb3 extra: pip install 'arena-eval[sb3]'"
        ) from error
    # Every call, cached or not: other code of this process may have changed them since.
    make_deterministic(torch)  # before anything touches CUDA (cuBLAS reads its workspace once)
    device = _device(device, torch.cuda.is_available())
    if device == "cpu" and not any(os.environ.get(v) for v in _THREAD_VARIABLES):
        # The cluster runs a worker process per core, and batch-one inference of a small CNN
        # gains little from more threads while losing much when the other cores are busy
        # (NatureCNN, 2 shared cores: 1.2-2.3 ms a step on one thread, 17-80 ms on two).
        # OMP_NUM_THREADS or MKL_NUM_THREADS, when set, are left to torch.
        torch.set_num_threads(1)
    loaded = CACHE.get((content_digest(file), device, preprocessing)) if cache else None
    if loaded is None:
        raw = read_file(file)  # read once: the digest is of the bytes loaded, not of the path
        key = (hashlib.sha256(raw).hexdigest(), device, preprocessing)
        loaded = _load(raw, path, preprocessing, device, stable_baselines3)
        make_deterministic(torch)  # again: unpickling the checkpoint ran its code
        if cache:
            CACHE.put(key, loaded)
        log.info("sb3: %s loaded as %s on %s", path, loaded.algorithm, loaded.model.device)
    else:
        log.info("sb3: %s already loaded in this process, on %s", path, loaded.model.device)
    agent = CheckpointAgent(loaded.model, preprocessing, loaded.n_actions, path)
    agent.runtime = runtime_provenance(torch, loaded.model.device)
    return agent


def _load(
    raw: bytes, path: str, preprocessing: Preprocessing, device: str, sb3: Any
) -> LoadedModel:
    """The checkpoint's bytes as a model on `device`, once its spaces fit the preprocessing."""
    algorithm = checkpoint_algorithm(raw, path)
    algorithm_class: type[BaseAlgorithm] = getattr(sb3, algorithm)
    try:
        # Training-only callables (pickled lambdas) break across Python versions; unused here.
        model = algorithm_class.load(io.BytesIO(raw), device=device, custom_objects=_INFERENCE_ONLY)
    except MemoryError:
        raise  # the memory limit, not a malformed file (docs/agents.md, "Where agents run")
    except Exception as error:
        raise ValueError(f"sb3: cannot load {path!r} as {algorithm}: {error}") from error
    n_actions = _check_spaces(model, preprocessing, path)
    return LoadedModel(model, n_actions, algorithm)


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_INFERENCE_ONLY: dict[str, Any] = {
    "learning_rate": 0.0,
    "lr_schedule": lambda _: 0.0,
    "clip_range": lambda _: 0.0,
    "exploration_schedule": lambda _: 0.0,
}


def _device(device: str, cuda: bool) -> str:
    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        if cuda:
            return device
        log.warning("sb3: device %r requested but no CUDA GPU is available: running on cpu", device)
        return "cpu"
    raise ValueError(f"device: {device!r} is not 'cpu' or 'cuda'")


def _check_spaces(model: BaseAlgorithm, preprocessing: Preprocessing, path: str) -> int:
    """The number of actions, once both spaces fit the preprocessing and the runner."""
    space = model.observation_space
    expected = preprocessing.shape
    declared = (
        f"grayscale={preprocessing.grayscale}, resize={preprocessing.resize}, "
        f"frame_stack={preprocessing.frame_stack}"
    )
    box = isinstance(space, gymnasium.spaces.Box)
    if not box or space.shape != expected or space.dtype != np.uint8:
        got = f"{space.shape} {space.dtype}" if box else type(space).__name__
        raise ValueError(
            f"sb3: {path!r} expects observations of shape {got}, the declared preprocessing "
            f"({declared}) gives {expected} uint8: declare the preprocessing it was trained with"
        )
    actions = model.action_space
    if not isinstance(actions, gymnasium.spaces.Discrete) or int(actions.start) != 0:
        raise ValueError(
            f"sb3: {path!r} has action space {actions}; an index into the action set "
            "(Discrete(n) from 0) is needed"
        )
    return int(actions.n)


__all__ = [
    "BATCH_KEY",
    "SEED_KEY",
    "CheckpointAgent",
    "FrameStack",
    "MarioObservation",
    "Preprocessing",
    "load_checkpoint_agent",
    "luminance",
    "resize_area",
]
