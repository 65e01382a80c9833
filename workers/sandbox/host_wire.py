"""What travels between an inference host (workers/sandbox/inference_host.py) and the worker
processes it serves (workers/sandbox/shared_agent.py), and the host's side of it: its clients,
and the requests that wait, in the order they came, for the one child that answers them.

A message is a header (the JSON part's length, the raw part's length), a JSON object and raw
bytes (a batch of observations). A client sends one request and reads until its answer; while
the request waits behind others' the host sends it {"waiting": n} every KEEPALIVE_S (n: the
requests ahead of it), which the client takes as a sign of life, never as the answer.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workers.agent_wire import MAX_ANSWER
from workers.sandbox.agent_process import SHM_BYTES

HEADER = struct.Struct("!II")  # the JSON part's length, the raw batch's length
PRINTED_MAX = 1 << 16  # of what the child prints while answering one request
# A message's JSON part, up to what a host may send: the child's answer (MAX_ANSWER bytes, which
# json.dumps writes in at most 6 characters a byte, "\u0001") and what it printed (the same). An
# answer a worker takes from its own child is never, on the host, one that "stopped answering".
MAX_META = 6 * (MAX_ANSWER + 1 + PRINTED_MAX) + (1 << 16)
# While a request waits for the child, its client hears {"waiting": n} this often; n is how many
# requests are ahead of it. Only while the request being answered is within its own timeout
# plus STUCK_GRACE_S (the child's end and the answer's sending): a stuck host falls silent.
KEEPALIVE_S = 1.0
STUCK_GRACE_S = 15.0


def send(sock: socket.socket, meta: dict[str, Any], payload: bytes = b"") -> None:
    data = json.dumps(meta).encode()
    sock.sendall(HEADER.pack(len(data), len(payload)) + data + payload)


def receive(sock: socket.socket) -> tuple[dict[str, Any], bytes]:
    """One message; ConnectionError for a closed socket or one that is not a message."""
    meta_len, payload_len = HEADER.unpack(_exactly(sock, HEADER.size))
    if meta_len > MAX_META or payload_len > SHM_BYTES:
        raise ConnectionError(f"a message of {meta_len:,} + {payload_len:,} bytes")
    meta = json.loads(_exactly(sock, meta_len))
    if not isinstance(meta, dict):
        raise ConnectionError("a message that is not an object")
    return meta, _exactly(sock, payload_len)


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("the other side closed the connection")
        got += n
    return bytes(data)


@dataclass
class Client:
    """A connected worker process. The main loop and the answering thread both write to it,
    one whole message at a time."""

    sock: socket.socket
    lock: threading.Lock = field(default_factory=threading.Lock)
    gone: bool = False

    def tell(self, meta: dict[str, Any]) -> None:
        """Send, unless it left (its answer then goes nowhere)."""
        with self.lock:
            if not self.gone:
                with contextlib.suppress(OSError):
                    send(self.sock, meta)

    def hang_up(self) -> None:
        """It spoke nonsense: the main loop sees it leave, and closes it."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self.lock:
            self.gone = True
            self.sock.close()


@dataclass
class Queued:
    client: Client
    meta: dict[str, Any]
    payload: bytes
    heard: float  # when its client last heard from the host


class Answering:
    """The requests waiting for the child, in the order they came, and the thread that asks
    the child each in turn (the child answers one at a time; the main loop keeps reading)."""

    def __init__(self, answer: Callable[[dict[str, Any], bytes], dict[str, Any]]) -> None:
        self.answer = answer
        self.waiting: deque[Queued] = deque()
        self.changed = threading.Condition()
        self.busy_until: float | None = None  # the running request's timeout + STUCK_GRACE_S
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="answering", daemon=True)
        self.thread.start()

    def put(self, request: Queued) -> None:
        with self.changed:
            self.waiting.append(request)
            self.changed.notify()

    def keep_alive(self, now: float) -> None:
        """Tell each client that has waited KEEPALIVE_S since it last heard that the host lives
        and works, unless it does not: the request it answers ran past its own bounds, or the
        thread is gone. Then it says nothing, and its clients find it broken."""
        with self.changed:
            stuck = self.busy_until is not None and now > self.busy_until
            if stuck or not self.thread.is_alive():
                return
            ahead = int(self.busy_until is not None)
            due = [
                (ahead + i, r) for i, r in enumerate(self.waiting) if now - r.heard >= KEEPALIVE_S
            ]
            for _, request in due:
                request.heard = now
        for place, request in due:
            request.client.tell({"waiting": place})

    def stop(self) -> None:
        with self.changed:
            self.stopping = True
            self.changed.notify()
        self.thread.join(1.0)  # a request whose client left may still run: the child's end ends it

    def _run(self) -> None:
        while True:
            with self.changed:
                while not self.waiting and not self.stopping:
                    self.changed.wait()
                if self.stopping:
                    return
                request = self.waiting.popleft()
                self.busy_until = time.monotonic() + request_timeout(request.meta) + STUCK_GRACE_S
            try:
                if not request.client.gone:  # a client that left asks nothing more
                    request.client.tell(self.answer(request.meta, request.payload))
            except Exception as failed:  # nonsense (or a fault of the host's own): hang up
                print(f"a request failed: {type(failed).__name__}: {failed}"[:500], flush=True)
                request.client.hang_up()
            finally:
                with self.changed:
                    self.busy_until = None


def request_timeout(meta: dict[str, Any]) -> float:
    """The per-step timeout a request asks the child under (nonsense: ValueError, TypeError)."""
    return float(meta.get("timeout_s", 10.0))


__all__ = [
    "HEADER",
    "KEEPALIVE_S",
    "MAX_META",
    "PRINTED_MAX",
    "Answering",
    "Client",
    "Queued",
    "receive",
    "request_timeout",
    "send",
]
