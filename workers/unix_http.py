"""A small HTTP/1.1 client over a unix socket, for the agent image's socket
(workers/agent_image.py): the agent on the other side is untrusted, so every answer is bounded in
size (MAX_ANSWER in all, MAX_HEADERS headers of at most MAX_LINE bytes) and each exchange, the
request and its whole answer, in time."""

from __future__ import annotations

import io
import math
import socket
import time
from pathlib import Path
from typing import Any

MAX_LINE = 65536  # a status or header line
MAX_ANSWER = 16 << 20  # an answer is an action: anything near this is not one
MAX_HEADERS = 100  # headers in an answer


class NotHttp(ValueError):
    """An answer that is not HTTP/1.x."""


class _DeadlineReader(io.RawIOBase):
    """The socket's bytes, each receive given what is left of the exchange's deadline: a
    socket timeout alone is per receive, and an answer dripped a byte at a time would last
    as long as the agent liked."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.ends_at = math.inf

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.ends_at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline for the whole answer passed")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class UnixHttp:
    """A small HTTP/1.1 client over a unix socket: keep-alive, each request in one write (a
    frame and its headers wake the agent once), answers with Content-Length, chunked, or read
    to the close. http.client costs 0.1-0.4 ms more a request, httpx ~0.7 ms more again; a
    Mario step is ~6 ms (docs/agents.md, "Cost per step"). Each exchange, the request and its
    whole answer, ends within `timeout_s` (TimeoutError), however the answer is paced."""

    def __init__(self, socket_path: Path, timeout_s: float) -> None:
        self.socket_path, self.timeout_s = str(socket_path), timeout_s
        self._sock: socket.socket | None = None
        self._raw: _DeadlineReader | None = None
        self._reader: Any = None

    def close(self) -> None:
        if self._sock is not None:
            self._reader.close()
            self._sock.close()
        self._sock = self._reader = self._raw = None

    def exchange(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """One request and its whole answer. On any failure (TimeoutError, OSError, NotHttp)
        the connection is closed, so the next request opens a fresh one."""
        lines = [f"{method} {path} HTTP/1.1", "Host: agent", f"Content-Length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        ends_at = time.monotonic() + self.timeout_s
        try:
            if self._sock is None:
                self._connect()
            assert self._sock is not None and self._raw is not None
            self._raw.ends_at = ends_at
            # sendall's timeout is for the whole send (Python >= 3.5)
            self._sock.settimeout(max(ends_at - time.monotonic(), 0.001))
            self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            status, data, close = self._answer()
        except BaseException:  # a timeout, a reset, or the unit's deadline mid-answer
            self.close()
            raise
        if close:
            self.close()
        return status, data

    def _connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout_s)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self._raw = _DeadlineReader(sock)
        self._sock, self._reader = sock, io.BufferedReader(self._raw)

    def _answer(self) -> tuple[int, bytes, bool]:
        line = self._reader.readline(MAX_LINE)
        if not line:
            raise ConnectionResetError("the connection closed without an answer")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise NotHttp(f"not an HTTP status line: {line[:60]!r}")
        headers: dict[bytes, bytes] = {}
        while (line := self._reader.readline(MAX_LINE)) not in (b"\r\n", b"\n", b""):
            if len(headers) >= MAX_HEADERS:
                raise NotHttp(f"more than {MAX_HEADERS} headers")
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        close = parts[0] == b"HTTP/1.0" or headers.get(b"connection", b"").lower() == b"close"
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            data = self._chunked()
        elif b"content-length" in headers:
            data = self._exactly(int(headers[b"content-length"]))
        else:
            data, close = self._reader.read(MAX_ANSWER), True  # the answer ends at the close
        return int(parts[1]), data, close

    def _exactly(self, size: int) -> bytes:
        if not 0 <= size <= MAX_ANSWER:
            raise NotHttp(f"Content-Length {size} out of range")
        data = self._reader.read(size)
        if len(data) < size:
            raise ConnectionResetError("the connection closed mid-answer")
        return bytes(data)

    def _chunked(self) -> bytes:
        chunks, total = [], 0
        while size := int(self._reader.readline(MAX_LINE).split(b";")[0].strip() or b"0", 16):
            total += size
            if total > MAX_ANSWER:
                raise NotHttp(f"a chunked answer over {MAX_ANSWER:,} bytes")
            chunks.append(self._exactly(size))
            self._reader.readline(MAX_LINE)
        while self._reader.readline(MAX_LINE) not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(chunks)
