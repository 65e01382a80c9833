"""A checkpoint's preprocessing read from its own observation space, at submission (docs/mario.md,
"Stable-Baselines3 checkpoints"): declared once, by the model that was trained.

SB3 writes each space into the zip's `data` member as JSON beside its pickle (`:type:`, `_shape`,
`dtype`), so the shape is read without unpickling anything (a checkpoint is code: it is loaded
only in the agent sandbox). A Mario checkpoint observes `(channels × frame_stack, resize, resize)`
uint8 (workers/mario/sb3.py, Preprocessing.shape): the fields a spec leaves out of `preprocess`
are taken from it, and a declared field it contradicts is refused here, in one line, rather than
failing every episode at evaluation. A file whose space cannot be read this way (not a zip, no
`data`, other JSON) is left to the worker, which refuses it as before.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.validation import InputError

MAX_DATA_BYTES = 64 << 20  # SB3's `data` JSON is kilobytes; a bigger one is not read here
MAX_SHOWN = 40  # characters of a space's class or dtype quoted back (a refusal stays one line)
MAX_DIMS = 8  # a longer shape is no image: said as its length, not quoted
FIELDS = ("grayscale", "resize", "frame_stack")
RESIZE, FRAME_STACK = (8, 256), (1, 16)  # tasks/workloads/mario_spec.py, Preprocess


@dataclass(frozen=True)
class ObservedSpace:
    """What the checkpoint's `data` says of its observation space."""

    kind: str  # the class's name: Box, Dict, Discrete, ...
    shape: tuple[int, ...] | None
    dtype: str | None

    def __str__(self) -> str:
        return " ".join(str(part) for part in (self.kind, self.shape, self.dtype) if part)


def observation_space(path: str | Path) -> ObservedSpace | None:
    """The observation space SB3 wrote into the checkpoint; None when it cannot be read."""
    try:
        with zipfile.ZipFile(Path(path).expanduser()) as archive:
            info = archive.getinfo("data")
            if info.file_size > MAX_DATA_BYTES:
                return None
            with archive.open(info) as member:
                data = json.loads(member.read(MAX_DATA_BYTES + 1))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError, RuntimeError):
        return None
    space = data.get("observation_space") if isinstance(data, dict) else None
    if not isinstance(space, dict) or not isinstance(space.get(":type:"), str):
        return None
    kind = space[":type:"].rsplit(".", 1)[-1].rstrip("'>")[:MAX_SHOWN]
    shape = space.get("_shape")
    dims = None
    if isinstance(shape, list) and all(type(d) is int and 0 <= d < 1 << 31 for d in shape):
        dims = tuple(shape) if len(shape) <= MAX_DIMS else None
        kind = kind if len(shape) <= MAX_DIMS else f"{kind} of {len(shape)} dimensions"
    dtype = space.get("dtype")
    return ObservedSpace(kind, dims, dtype[:MAX_SHOWN] if isinstance(dtype, str) else None)


def preprocessings(space: ObservedSpace) -> list[dict[str, Any]]:
    """Every preprocessing whose observations have this space's shape (two where the channels
    are a multiple of 3: grayscale frames stacked, or colour ones)."""
    shape = space.shape
    if space.kind != "Box" or space.dtype != "uint8" or shape is None or len(shape) != 3:
        return []
    channels, height, width = shape
    if height != width or not RESIZE[0] <= height <= RESIZE[1]:
        return []
    found = []
    for grayscale, per_frame in ((True, 1), (False, 3)):
        stack, rest = divmod(channels, per_frame)
        if rest == 0 and FRAME_STACK[0] <= stack <= FRAME_STACK[1]:
            found.append({"grayscale": grayscale, "resize": height, "frame_stack": stack})
    return found


def _said(preprocess: dict[str, Any]) -> str:
    return ", ".join(f"{k} {str(preprocess[k]).lower()}" for k in FIELDS if k in preprocess)


def checkpoint_preprocess(
    declared: dict[str, Any] | None, space: ObservedSpace, field: str, path: str
) -> dict[str, Any]:
    """The preprocessing to run the checkpoint with: the declared fields, each checked against
    the checkpoint's space, and the others from it; InputError (one line) when none fits."""
    given = {k: v for k, v in (declared or {}).items() if k in FIELDS}
    fits = preprocessings(space)
    if not fits:
        raise InputError(
            f"{field}.sb3: {path!r} observes {space}, not the (channels × frame_stack, resize, "
            "resize) uint8 frames a Mario preprocessing gives"
        )
    agreeing = [p for p in fits if all(p[k] == v for k, v in given.items())]
    if not agreeing:
        options = " or ".join(_said(p) for p in fits)
        raise InputError(
            f"{field}.preprocess: {_said(given)} does not give what {path!r} observes, "
            f"{space.shape} ({options}): declare what it was trained with, or leave it out"
        )
    if len(agreeing) > 1:
        options = " or ".join(_said(p) for p in agreeing)
        raise InputError(
            f"{field}.preprocess: {path!r} observes {space.shape}, which is {options}: "
            "declare grayscale"
        )
    return {**(declared or {}), **agreeing[0]}


def preprocess_from_checkpoints(data: dict[str, Any]) -> dict[str, Any]:
    """A spec's agents with each readable checkpoint's preprocessing filled in and checked
    (after tasks/checkpoint_policy.py admitted its path); other agents as they were."""
    agents = data.get("agents")
    if not isinstance(agents, list):
        return data
    filled = list(agents)
    for index, agent in enumerate(agents):
        if not isinstance(agent, dict) or not isinstance(agent.get("sb3"), str):
            continue
        declared = agent.get("preprocess")
        if declared is not None and not isinstance(declared, dict):
            continue  # the spec's own validation names it
        space = observation_space(agent["sb3"])
        if space is not None:
            pre = checkpoint_preprocess(declared, space, f"agents[{index}]", agent["sb3"])
            filled[index] = {**agent, "preprocess": pre}
    return {**data, "agents": filled}
