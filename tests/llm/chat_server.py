"""A scripted OpenAI-compatible chat-completions server for the `llm` agent's tests: a real
ThreadingHTTPServer on 127.0.0.1 (a free port), in a daemon thread, answering
`POST /v1/chat/completions` and `GET /v1/models`. Every answer closes its connection (HTTP/1.0),
so after stop() no pooled connection lives on: a new request is refused.

Behaviour rule: a request whose `model` names a behaviour (BEHAVIOURS) gets that behaviour; one
whose `model` is the server's `model` gets the constructor's `behaviour`; any other model 404
(model_not_found); a body without a string `model` and a `messages` list 400.
- tit-for-tat: answers `{"action": ...}` from the most recent message starting "Game:" (so a
  re-ask after the prompt is answered from it; none, or an unknown game: 400). Dilemma: "C",
  then the other player's move in the last history line; public_goods 10; auction half the
  `Value:` line (to cents); colonel_blotto [20, 20, 20, 20, 20]; congestion 1 (the bypass).
- garbage: GARBAGE (no JSON). illegal: `{"action": "maybe"}` (no game accepts it).
- rate-limited: 429, `Retry-After: retry_after`, an OpenAI error body (rate_limit_error), to the
  first `fail_first` rate-limited requests (None: all), then as tit-for-tat.
- slow: waits `delay_s` (stop() cuts it short), then as tit-for-tat.
- server-error: `error_status` (500 or 503), always.
Tokens: prompt = whitespace-separated words over all messages' content; completion = words of
the answer (at least 1). Each chat request is recorded (RequestRecord) just before its answer
is written: a client holding its answer finds the record in `requests`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import socketserver
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BEHAVIOURS = ("tit-for-tat", "garbage", "illegal", "rate-limited", "slow", "server-error")
GARBAGE = "I think I will cooperate, probably."
ILLEGAL_ACTION = "maybe"


@dataclass(frozen=True)
class RequestRecord:
    received: float  # time.monotonic() when handling began
    wall: float  # time.time() at the same moment
    model: str | None  # the request's model field
    behaviour: str | None  # the behaviour that answered (None: 400/404 before choosing one)
    status: int  # the HTTP status sent
    prompt_tokens: int
    completion_tokens: int  # 0 unless status is 200
    body: Any  # the request's JSON body (None if it was not JSON)


def content_text(message: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def count_words(text: str) -> int:
    return len(text.split())


def tit_for_tat(prompt: str) -> Any:
    """The scripted action for an Arena prompt (module docstring); None for an unknown game."""
    game = re.match(r"Game: (\S+)", prompt)
    name = game.group(1) if game else ""
    if name == "prisoners_dilemma":
        me = re.search(r"You are player (\d+) of", prompt)
        rounds = re.findall(r"^Round \d+: (.*)$", prompt, re.M)
        if me is None or not rounds:
            return "C"
        other = 1 - int(me.group(1))
        move = re.search(rf'player {other}(?: \(you\))? played "([^"]*)"', rounds[-1])
        return move.group(1) if move else "C"
    if name == "public_goods":
        return 10
    if name == "auction":
        value = re.search(r"^Value: (\S+)$", prompt, re.M)
        return round(float(value.group(1)) / 2, 2) if value else 0
    if name == "colonel_blotto":
        return [20, 20, 20, 20, 20]
    if name == "congestion":
        return 1
    return None


def max_in_window(times: list[float], window_s: float) -> int:
    """The most times within any window [t, t + window_s) (sliding)."""
    ordered, best, start = sorted(times), 0, 0
    for end, t in enumerate(ordered):
        while t - ordered[start] >= window_s:
            start += 1
        best = max(best, end - start + 1)
    return best


def completion(id: str, model: str, content: str, prompt_tokens: int) -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    tokens = max(1, count_words(content))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}
    return {
        "id": id, "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {**usage, "total_tokens": prompt_tokens + tokens},
    }  # fmt: skip


def error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
            pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            model = {"id": self.server.model, "object": "model", "created": 0, "owned_by": "arena"}
            self.send_json(200, {"object": "list", "data": [model]})
        else:
            self.send_json(404, error_body(f"no route {self.path}", "invalid_request_error"))

    def do_POST(self) -> None:
        if self.path.rstrip("/") == "/v1/chat/completions":
            self.server.handle_chat(self)
        else:
            self.send_json(404, error_body(f"no route {self.path}", "invalid_request_error"))


class ChatServer(ThreadingHTTPServer):
    """The scripted server (module docstring); `with ChatServer(model=...) as server:`."""

    block_on_close = True  # stop() waits for the answers in progress (slow ones are cut short)

    def __init__(
        self,
        model: str = "arena-test-model",
        behaviour: str = "tit-for-tat",
        *,
        retry_after: float = 1,
        fail_first: int | None = None,
        delay_s: float = 1.0,
        error_status: int = 500,
    ) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r} (behaviours: {BEHAVIOURS})")
        self.model, self.behaviour = model, behaviour
        self.retry_after, self.fail_first = retry_after, fail_first
        self.delay_s, self.error_status = delay_s, error_status
        self.requests: list[RequestRecord] = []
        self.in_flight = self.max_in_flight = 0
        self._rate_limited_seen = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        super().__init__(("127.0.0.1", 0), _Handler)
        self.start()

    def server_bind(self) -> None:  # no getfqdn lookup
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        """Serve (again, on the same port after stop()); a no-op while serving."""
        if self._thread is not None:
            return
        if self._closed:
            self.socket = socket.socket(self.address_family, self.socket_type)
            self.server_bind()
            self.server_activate()
            self._closed = False
        self._stopping.clear()
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket: later connections are refused."""
        if self._thread is None:
            return
        self._stopping.set()
        self.shutdown()
        self._thread.join()
        self._thread = None
        self.server_close()
        self._closed = True

    def __enter__(self) -> ChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def ok_requests(self) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self.requests if r.status == 200]

    def usage_totals(self) -> tuple[int, int]:
        """(prompt_tokens, completion_tokens) summed over the answered (200) requests."""
        ok = self.ok_requests()
        return sum(r.prompt_tokens for r in ok), sum(r.completion_tokens for r in ok)

    def max_per_window(self, window_s: float = 60.0) -> int:
        """The most chat requests (any status) received within any window_s seconds."""
        with self._lock:
            return max_in_window([r.received for r in self.requests], window_s)

    def handle_chat(self, handler: _Handler) -> None:
        received, wall = time.monotonic(), time.time()
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        body: Any = None
        behaviour, prompt_tokens, completion_tokens = None, 0, 0
        status, payload = 500, error_body("scripted server failed", "server_error")
        headers: dict[str, str] = {}
        try:
            raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
            with contextlib.suppress(ValueError):
                body = json.loads(raw)
            model = body.get("model") if isinstance(body, dict) else None
            messages = body.get("messages") if isinstance(body, dict) else None
            if not isinstance(model, str) or not isinstance(messages, list):
                text = "the body must be JSON with a string model and a messages list"
                status, payload = 400, error_body(text, "invalid_request_error")
                return
            prompt_tokens = sum(count_words(content_text(m)) for m in messages)
            behaviour = model if model in BEHAVIOURS else None
            if behaviour is None and model == self.model:
                behaviour = self.behaviour
            if behaviour is None:
                text = f"The model `{model}` does not exist"
                status = 404
                payload = error_body(text, "invalid_request_error", "model_not_found")
                return
            status, payload, headers = self._answer(behaviour, model, messages, prompt_tokens)
            if status == 200:
                completion_tokens = payload["usage"]["completion_tokens"]
        finally:
            model = body.get("model") if isinstance(body, dict) else None
            record = RequestRecord(
                received, wall, model, behaviour, status, prompt_tokens, completion_tokens, body
            )
            with self._lock:
                self.in_flight -= 1
                self.requests.append(record)
            handler.send_json(status, payload, headers)

    def _answer(
        self, behaviour: str, model: str, messages: list[Any], prompt_tokens: int
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if behaviour == "rate-limited":
            with self._lock:
                self._rate_limited_seen += 1
                limited = self.fail_first is None or self._rate_limited_seen <= self.fail_first
            if limited:
                message = "Rate limit reached for requests (scripted)"
                headers = {"Retry-After": f"{self.retry_after:g}"}
                return 429, error_body(message, "rate_limit_error", "rate_limit_exceeded"), headers
        if behaviour == "server-error":
            return self.error_status, error_body("scripted server error", "server_error"), {}
        if behaviour == "slow":
            self._stopping.wait(self.delay_s)
        if behaviour == "garbage":
            content = GARBAGE
        elif behaviour == "illegal":
            content = json.dumps({"action": ILLEGAL_ACTION})
        else:
            texts = (content_text(m) for m in reversed(messages))
            prompt = next((text for text in texts if text.startswith("Game:")), None)
            action = tit_for_tat(prompt) if prompt is not None else None
            if action is None:
                message = "no Arena prompt (a message starting 'Game: <known game>')"
                return 400, error_body(message, "invalid_request_error"), {}
            content = json.dumps({"action": action})
        return (
            200,
            completion(f"chatcmpl-arena-{next(self._ids)}", model, content, prompt_tokens),
            {},
        )
