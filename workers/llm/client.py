"""One chat-completions request over httpx, retried by tenacity, every attempt held to the
endpoint's shared limits (docs/alympics.md, "Why httpx and not the openai client").

Why not the official `openai` client: its retries happen inside it, where Arena's limiter can
reach them only through the client's transport layer, and that layer changed between majors
(httpx, then httpx2). Each attempt must pass the cluster's Gate, retries included, or a worker
would send more than the limit the moment an endpoint says 429. The wire format is small and
documented (POST {base_url}/chat/completions; choices[0].message.content; usage), and every
OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama) speaks it.

Retried: 408, 409, 429, 5xx, refused connections and timeouts, `retries` times, waiting what
Retry-After says (seconds or a date, up to 60 s; longer: given up at once) or else an exponential
backoff with jitter (0.5 s doubling to 8 s).

Each attempt ends within the spec's `timeout_s` from the moment it passes the Gate: the whole
answer, not each read (workers/bounded_http.py), and at most MAX_RESPONSE_BYTES of it, read while
it streams. Retries do not share one deadline: a request takes at most (retries + 1) x timeout_s
plus the waits between attempts and in the Gate.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from workers.bounded_http import AnswerTooLarge, bounded_client, fetch
from workers.llm.config import LlmConfig
from workers.llm.services import Gate

MAX_RESPONSE_BYTES = 1 << 20
MAX_RETRY_AFTER_S = 60.0
CHARS_PER_TOKEN = 4  # the estimate of a request's prompt tokens that tokens/min are held to
RETRIED_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class ChatError(RuntimeError):
    """The endpoint gave no usable answer (after retries); `attempts`: the requests sent."""

    def __init__(self, why: str, attempts: int = 1) -> None:
        super().__init__(why)
        self.attempts = attempts


class _Retryable(ChatError):
    def __init__(self, why: str, retry_after_s: float | None = None) -> None:
        super().__init__(why)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Completion:
    content: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # the answered attempt's round trip
    attempts: int  # HTTP requests it took (retries included)


def retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


_backoff = wait_random_exponential(multiplier=0.5, max=8)


def _wait(state: RetryCallState) -> float:
    failure = state.outcome.exception() if state.outcome else None
    if isinstance(failure, _Retryable) and failure.retry_after_s is not None:
        return failure.retry_after_s
    return float(_backoff(state))


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, _Retryable) and (exc.retry_after_s or 0) <= MAX_RETRY_AFTER_S


class ChatClient:
    def __init__(self, config: LlmConfig, gate: Gate, api_key: str | None) -> None:
        self.config, self.gate = config, gate
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = bounded_client(config.timeout_s, headers)
        self.url = f"{config.base_url}/chat/completions"

    def parameters(self) -> dict[str, Any]:
        """What is sent besides the model and messages (part of the replay cache's key)."""
        sent: dict[str, Any] = {
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        if self.config.seed is not None:
            sent["seed"] = self.config.seed
        if self.config.json_mode:
            sent["response_format"] = {"type": "json_object"}
        return sent

    def complete(self, messages: list[dict[str, str]], retries: int | None = None) -> Completion:
        """The answer, or ChatError. `retries`: this request's (default the spec's; a probe of
        an endpoint that counts as down sends one)."""
        body = {"model": self.config.model, "messages": messages, **self.parameters()}
        attempts = 0
        retrying = Retrying(
            stop=stop_after_attempt((self.config.retries if retries is None else retries) + 1),
            wait=_wait,
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    attempts += 1
                    answer, latency_s = self._attempt(body)
        except ChatError as exc:
            tries = f" after {attempts} attempt(s)" if isinstance(exc, _Retryable) else ""
            raise ChatError(f"{exc}{tries}", attempts) from None
        return _completion(answer, latency_s, attempts)

    def _attempt(self, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        tokens = len(str(body["messages"])) // CHARS_PER_TOKEN + self.config.max_tokens
        with self.gate.slot(tokens):
            started = time.perf_counter()
            try:
                response = fetch(
                    self.http,
                    "POST",
                    self.url,
                    json=body,
                    max_bytes=MAX_RESPONSE_BYTES,
                    deadline_s=self.config.timeout_s,
                )
            except httpx.TimeoutException:
                raise _Retryable(
                    f"no answer within {self.config.timeout_s:g}s (the deadline for the whole "
                    "answer)"
                ) from None
            except httpx.TransportError as exc:
                raise _Retryable(f"connection failed: {type(exc).__name__}: {exc}") from None
            except AnswerTooLarge as exc:
                raise ChatError(str(exc)) from None
            latency_s = time.perf_counter() - started
        status, content = response.status, response.body
        if status in RETRIED_STATUSES:
            raise _Retryable(f"HTTP {status}", retry_after(response.headers))
        if not response.is_success:
            raise ChatError(f"HTTP {status}: {content[:200].decode(errors='replace')}")
        try:
            answer = json.loads(content)
        except ValueError:
            raise ChatError("the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise ChatError("the answer is not a JSON object")
        return answer, latency_s

    def close(self) -> None:
        self.http.close()


def _completion(answer: dict[str, Any], latency_s: float, attempts: int) -> Completion:
    try:
        content = answer["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ChatError("the answer has no choices[0].message", attempts) from None
    usage = answer.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    return Completion(
        content=str(content),
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        latency_s=latency_s,
        attempts=attempts,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
