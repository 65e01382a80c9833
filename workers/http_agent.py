"""An agent behind an HTTP endpoint, so agents in any language (LLM agents included) can play.

Protocol: for every move Arena POSTs JSON `{"game", "player", "seed", "observation"}` to the
endpoint and expects `{"action": ...}` back within the per-move timeout: the whole answer,
not each read (workers/bounded_http.py), of at most MAX_ANSWER_BYTES, read while it streams.
Anything else — a timeout, a refused connection, a non-2xx status, a bigger answer, a body that
is not JSON or has no "action" — raises HttpAgentError; the match runner then plays the game's
default action and counts a fault.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from workers.bounded_http import Answer, AnswerTooLarge, bounded_client, fetch

MAX_ANSWER_BYTES = 1 << 20  # an answer is an action; 1 MiB is far past any legal one


class HttpAgentError(RuntimeError):
    pass


class CircuitBreaker:
    """After `trip_after` transport failures in a row (timeouts, refused connections) an
    endpoint counts as down: further calls fault at once without a request, except one probe
    every `probe_every` calls, so a dead endpoint costs seconds and a recovered one is heard
    again. Shared by HTTP agents and agent images (workers/agent_image.py)."""

    def __init__(self, trip_after: int = 3, probe_every: int = 10) -> None:
        self.trip_after, self.probe_every = trip_after, probe_every
        self.failures = 0  # transport failures in a row
        self._skipped = 0  # calls not made since the endpoint was found down

    def check(self) -> None:
        """Raise HttpAgentError instead of a request while the endpoint counts as down."""
        if self.failures >= self.trip_after:
            self._skipped += 1
            if self._skipped % self.probe_every:
                raise HttpAgentError(
                    f"endpoint down ({self.failures} failed requests in a row): not asked"
                )

    def failed(self) -> None:
        self.failures += 1

    def succeeded(self) -> None:
        self.failures = self._skipped = 0


class HttpAgent:
    """One HTTP agent for one unit, behind a CircuitBreaker."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 10.0,
        headers: dict[str, str] | None = None,
        trip_after: int = 3,
        probe_every: int = 10,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._client = bounded_client(timeout_s, headers)
        self._context: dict[str, Any] = {}
        self.breaker = CircuitBreaker(trip_after, probe_every)

    def reset(self, game: str, player: int, seed: int) -> None:
        self._context = {"game": game, "player": player, "seed": seed}

    def act(self, observation: dict[str, Any]) -> Any:
        self.breaker.check()
        try:
            answer = fetch(
                self._client,
                "POST",
                self.url,
                json={**self._context, "observation": observation},
                max_bytes=MAX_ANSWER_BYTES,
                deadline_s=self.timeout_s,
            )
        except httpx.TimeoutException:
            self.breaker.failed()
            raise HttpAgentError(
                f"no answer within {self.timeout_s:g}s (the deadline for the whole answer)"
            ) from None
        except AnswerTooLarge as exc:
            self.breaker.succeeded()  # it answered: the endpoint is up, its answer is not one
            raise HttpAgentError(str(exc)) from None
        except httpx.HTTPError as exc:
            self.breaker.failed()
            raise HttpAgentError(f"request failed: {type(exc).__name__}: {exc}") from None
        self.breaker.succeeded()
        return self._action(answer)

    @staticmethod
    def _action(answer: Answer) -> Any:
        if not answer.is_success:
            raise HttpAgentError(f"HTTP {answer.status}")
        try:
            body = json.loads(answer.body)
        except ValueError:
            raise HttpAgentError("answer is not JSON") from None
        if not isinstance(body, dict) or "action" not in body:
            raise HttpAgentError('answer has no "action"')
        return body["action"]

    def close(self) -> None:
        self._client.close()
