"""Drawn pictures kept by what they show: the key hashes the picture's kind, format and numbers
(and the drawing code's version), so a board whose numbers did not move since the last request
(no batch published to it) is answered from here, and its ETag lets a browser that has it keep
it (304). The numbers are read on every request, which costs Redis reads, not a drawing."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Literal

from pydantic import BaseModel

Format = Literal["svg", "png"]
# Bump when a drawing changes, so nobody is served an older picture of the same numbers.
DRAWING_VERSION = "1"
KEPT_BYTES = 32 * 2**20  # per API process; an SVG of a 50-agent board is about 130 KB


@cache
def matplotlib_version() -> str:
    try:
        return version("matplotlib")
    except PackageNotFoundError:  # pragma: no cover - a dependency of arena-eval
        return "absent"


def picture_key(kind: str, fmt: Format, numbers: BaseModel) -> str:
    """The key and ETag of a picture: the same numbers drawn by the same code, the same bytes
    (SVG and PNG are deterministic: charts/draw.py)."""
    text = f"{DRAWING_VERSION}|{matplotlib_version()}|{kind}|{fmt}|{numbers.model_dump_json()}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Kept:
    """The latest pictures up to `max_bytes` in all, least recently used first out."""

    def __init__(self, max_bytes: int = KEPT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._pictures: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            body = self._pictures.get(key)
            if body is not None:
                self._pictures.move_to_end(key)
            return body

    def put(self, key: str, body: bytes) -> None:
        if len(body) > self.max_bytes:
            return
        with self._lock:
            old = self._pictures.pop(key, None)
            self._bytes -= len(old) if old is not None else 0
            self._pictures[key] = body
            self._bytes += len(body)
            while self._bytes > self.max_bytes:
                _, dropped = self._pictures.popitem(last=False)
                self._bytes -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._pictures.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._pictures)


KEPT = Kept()
