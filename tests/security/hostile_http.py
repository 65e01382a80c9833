"""A hostile HTTP endpoint on the loopback, written at the socket level so it can break HTTP's
pacing rules: the path picks what it does to whoever asks.

    /ok             {"action": 0}, with Content-Length, keep-alive
    /drip-head      a status line, then one byte of a header every `drip_s`, never ending
    /drip-body      headers, then one byte of a 1,000-byte body every `drip_s`
    /flood          {"action": 0, "pad": "xxx…"} of `flood_bytes` (600 MiB by default), no
                    Content-Length, streamed 64 KiB at a time (never held in memory), to the close
    /declared       Content-Length: 2 MiB, then that many bytes
    /gzip           a small gzip-compressed {"action": 0} with Content-Encoding: gzip

`sent` counts the bytes of body each answer sent before the client hung up.
"""

from __future__ import annotations

import gzip
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

OK = b'{"action": 0}'
PIECE = 64 << 10


class _Handler(socketserver.StreamRequestHandler):
    server: HostileServer

    def handle(self) -> None:
        while not self.server.stopping.is_set():
            path = self._request_path()
            if path is None:
                return
            try:
                if not self._answer(path):
                    return
            except OSError:  # the client hung up: what the tests want
                return

    def _request_path(self) -> str | None:
        line = self.rfile.readline(65536)
        if not line:
            return None
        length = 0
        while (header := self.rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
            name, _, value = header.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        self.rfile.read(length)
        self.server.requests += 1
        target = line.split()[1].decode()
        self.server.targets.append(target)
        return urlsplit(target).path if target.startswith("http") else target  # via a proxy

    def _answer(self, path: str) -> bool:
        """Answer one request; False when the connection ends with it."""
        send = self.wfile.write
        if path.startswith("/ok"):
            send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(OK), OK))
            return True
        if path.startswith("/drip-head"):
            send(b"HTTP/1.1 200 OK\r\n")
            self._drip(b"X-Slow: " + b"a" * 1_000_000)
        elif path.startswith("/drip-body"):
            send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            self._drip(b"x" * 1000)
        elif path.startswith("/flood"):
            self._flood()
        elif path.startswith("/declared"):
            size = 2 << 20
            send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
            self._stream(size)
        elif path.startswith("/gzip"):
            body = gzip.compress(OK)
            head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
            send(head % len(body) + body)
            return True
        return False

    def _drip(self, data: bytes) -> None:
        for byte in data:
            if self.server.stopping.wait(self.server.drip_s):
                return
            self.wfile.write(bytes([byte]))
            self.server.sent += 1

    def _flood(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        self.wfile.write(b'{"action": 0, "pad": "')
        self._stream(self.server.flood_bytes)
        self.wfile.write(b'"}')

    def _stream(self, size: int) -> None:
        piece = b"x" * PIECE
        while size > 0 and not self.server.stopping.is_set():
            chunk = piece[: min(size, PIECE)]
            self.wfile.write(chunk)
            self.server.sent += len(chunk)
            size -= len(chunk)


class HostileServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, drip_s: float, flood_bytes: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.drip_s, self.flood_bytes = drip_s, flood_bytes
        self.stopping = threading.Event()
        self.requests = 0
        self.targets: list[str] = []  # as asked: a path, or a whole URL when it is a proxy
        self.sent = 0

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@contextmanager
def hostile_server(drip_s: float = 1.0, flood_bytes: int = 600 << 20) -> Iterator[HostileServer]:
    server = HostileServer(drip_s, flood_bytes)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


__all__ = ["HostileServer", "hostile_server"]
