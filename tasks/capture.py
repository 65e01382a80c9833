"""Capturing what a unit prints (stdout and stderr, Python's and the C level's) into its log."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import IO

# The whole log kept per unit (head and tail beyond this), and the tail kept with the result.
MAX_LOG_BYTES = 1 << 20
TAIL_CHARS = 2000


class Captured:
    def __init__(self) -> None:
        self.text = ""

    @property
    def tail(self) -> str:
        return self.text[-TAIL_CHARS:]


def _read_capped(sink: IO[bytes]) -> str:
    size = sink.seek(0, os.SEEK_END)
    sink.seek(0)
    if size <= MAX_LOG_BYTES:
        data = sink.read()
    else:
        half = MAX_LOG_BYTES // 2
        head = sink.read(half)
        sink.seek(size - half)
        cut = f"\n[... {size - 2 * half:,} bytes cut ...]\n".encode()
        data = head + cut + sink.read(half)
    return data.decode("utf-8", errors="replace")


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


@contextlib.contextmanager
def captured_output() -> Iterator[Captured]:
    """Everything written to stdout/stderr inside the block, by Python code or by native code
    and child processes writing to file descriptors 1 and 2, goes to the unit's log."""
    captured = Captured()
    with tempfile.TemporaryFile() as sink:
        _flush_std()
        try:
            saved = [os.dup(1), os.dup(2)]
        except OSError:  # no descriptors 1/2 to borrow: capture Python's streams only
            saved = []
        text = io.TextIOWrapper(
            os.fdopen(os.dup(sink.fileno()), "wb"),
            encoding="utf-8",
            errors="replace",
            write_through=True,
        )
        try:
            for fd in (1, 2) if saved else ():
                os.dup2(sink.fileno(), fd)
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
                yield captured
        finally:
            text.flush()
            _flush_std()
            for fd, copy in zip((1, 2), saved, strict=False):
                os.dup2(copy, fd)
                os.close(copy)
            text.close()
            captured.text = _read_capped(sink)
