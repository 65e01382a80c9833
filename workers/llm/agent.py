"""The `llm` agent: each move's prompt rendered from the observation, the model asked through
ChatClient (or, replaying, the cache), the answer read strictly and re-asked when unusable.

Every prompt and reply goes to the unit's log (what the unit prints): a move's prompt in full at
an episode's first move, then as the lines that changed since the previous move's (a unified
diff), which keeps a 2,000-move match set readable and under the log's cap. Accounting per unit
is `usage` (LlmUsage); per move it is in the log.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from workers.games.base import Game
from workers.games.registry import GAMES
from workers.http_agent import CircuitBreaker, HttpAgentError
from workers.llm.answers import REASK, UnparseableAnswer, extract_action
from workers.llm.client import ChatClient, ChatError
from workers.llm.config import LlmConfig
from workers.llm.prompt import render
from workers.llm.services import LimitUnreachable, ReplayCache

MAX_LOGGED_REPLY = 2_000


class NoLegalAction(RuntimeError):
    """No legal action in the answers to a move (after re-asking): the move is a fault. Its
    message is the game's or the parser's refusal first: a forfeit keeps 120 characters of it."""


class ReplayMiss(BaseException):
    """Replaying, a request the cache does not hold: the batch is not the one cached. A
    BaseException, so no game loop counts it as the agent's fault: it ends the unit
    (tasks/workloads/alympics.py makes it an infrastructure error)."""


class SpendingStopped(BaseException):
    """The batch's cost budget is spent: no further request is sent. A BaseException, so no
    game loop counts it as the agent's fault: it ends the unit (tasks/workloads/alympics.py
    makes it an infrastructure error, never a score)."""


@dataclass
class LlmUsage:
    moves: int = 0
    requests: int = 0  # answers read (a re-ask is one more)
    attempts: int = 0  # HTTP requests sent (retries included)
    reasks: int = 0
    failed_moves: int = 0  # moves that ended with no legal action or no answer
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0  # summed over answered requests

    def as_dict(self) -> dict[str, Any]:
        fields = asdict(self)
        fields["cost_usd"] = round(self.cost_usd, 9)
        fields["latency_s"] = round(self.latency_s, 4)
        fields["total_tokens"] = self.prompt_tokens + self.completion_tokens
        return fields


class LlmAgent:
    label = "llm"

    def __init__(
        self,
        config: LlmConfig,
        client: ChatClient | None,
        cache: ReplayCache,
        unit_key: str,
        spent: Callable[[float], str | None] = lambda usd: None,
        secret: str | None = None,
        out: TextIO | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        """`client` None: replay from `cache` only, never calling the endpoint. `spent` hears
        each request's cost and answers why no further one may be sent (a spent budget), or
        None. `breaker`: shared by the agents of one endpoint in a process, so a dead endpoint
        is learnt once, not once per match set."""
        self.config, self.client, self.cache = config, client, cache
        self.unit_key, self.spent, self.secret = unit_key, spent, secret
        self.out = out  # None: sys.stdout when printing (the unit's captured log)
        self.usage = LlmUsage()
        self.breaker = breaker or CircuitBreaker()
        self._asked: Counter[str] = Counter()  # how often each request was asked in this unit
        self._episode, self._move = 0, 0
        self._previous: list[str] | None = None
        self._game: Game | None = None
        self._stop: str | None = None  # why no further request may be sent
        self._identity = config.identity()  # part of every request's cache key

    def reset(self, game: str, player: int, seed: int) -> None:
        self._episode += 1
        self._move, self._previous, self._game = 0, None, None

    def act(self, observation: dict[str, Any]) -> Any:
        try:
            return self._act(observation)
        except (NoLegalAction, ChatError, HttpAgentError):
            self.usage.failed_moves += 1
            raise

    def _act(self, observation: dict[str, Any]) -> Any:
        self._move += 1
        self.usage.moves += 1
        prompt = render(self.config.template or "", observation)
        self._log_prompt(prompt)
        messages = [{"role": "user", "content": prompt}]
        game = self._game_of(observation)
        why, content = "", ""
        for asked in range(self.config.reasks + 1):
            if asked:
                self.usage.reasks += 1
                ask_again = REASK.format(why=why, action_format=observation["action_format"])
                messages += [
                    {"role": "assistant", "content": content},
                    {"role": "user", "content": ask_again},
                ]
                self._print(f"[llm] re-ask {asked}: {ask_again}")
            content = self._ask(messages)
            try:
                action = extract_action(content)
            except UnparseableAnswer as exc:
                why = str(exc)
                continue
            try:
                game.parse_action(observation["player"], action)
            except (ValueError, TypeError) as exc:  # the refused action first: it is read most
                why = f"{json.dumps(action)[:40]} refused: {exc}"
                continue
            return action
        raise NoLegalAction(f"{why} ({self.config.reasks + 1} answers)")

    def _game_of(self, observation: dict[str, Any]) -> Game:
        if self._game is None:  # only parse_action is used: whether an answer is legal
            self._game = GAMES[observation["game"]](observation["rounds"])
        return self._game

    def _ask(self, messages: list[dict[str, str]]) -> str:
        request = {"llm": self._identity, "messages": messages}
        digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
        occurrence = self._asked[digest]
        self._asked[digest] += 1
        key = hashlib.sha256(f"{digest}:{self.unit_key}:{occurrence}".encode()).hexdigest()
        entry = self._replayed(key) if self.client is None else self._asked_live(key, messages)
        self.usage.attempts += entry.get("attempts", 0)
        if "error" in entry:
            self._print(f"[llm] no answer: {entry['error']}")
            raise ChatError(entry["error"], entry.get("attempts", 0))
        cost = self.config.prices.cost(entry["prompt_tokens"], entry["completion_tokens"])
        usage = self.usage
        usage.requests += 1
        usage.prompt_tokens += entry["prompt_tokens"]
        usage.completion_tokens += entry["completion_tokens"]
        usage.cost_usd += cost
        usage.latency_s += entry["latency_s"]
        if self.client is not None:
            self._stop = self.spent(cost)
        tries = f", {entry['attempts']} attempts" if entry["attempts"] > 1 else ""
        self._print(
            f"[llm] reply ({entry['prompt_tokens']}+{entry['completion_tokens']} tokens, "
            f"${cost:.6f}, {entry['latency_s']:.3f} s{tries}): "
            f"{entry['content'][:MAX_LOGGED_REPLY]!r}"
        )
        content: str = entry["content"]
        return content

    def _replayed(self, key: str) -> dict[str, Any]:
        entry = self.cache.get(key)
        if entry is None:
            raise ReplayMiss(
                "not in the replay cache: this request was not asked when the batch ran "
                "(another spec, prompt or model, or the cache was cleared)"
            )
        return entry

    def _asked_live(self, key: str, messages: list[dict[str, str]]) -> dict[str, Any]:
        """The answer, or the failure, as it will be replayed (so a replay fails alike)."""
        assert self.client is not None
        if self._stop is not None:
            raise SpendingStopped(self._stop)
        entry: dict[str, Any]
        probe = self.breaker.failures >= self.breaker.trip_after  # down: one attempt
        try:
            self.breaker.check()
            completion = self.client.complete(messages, retries=0 if probe else None)
        except (ChatError, HttpAgentError, LimitUnreachable) as exc:
            if not isinstance(exc, HttpAgentError):
                self.breaker.failed()
            attempts = exc.attempts if isinstance(exc, ChatError) else 0
            entry = {"error": self._redact(str(exc)), "attempts": attempts}
        else:
            self.breaker.succeeded()
            entry = {
                "content": self._redact(completion.content),
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "latency_s": round(completion.latency_s, 4),
                "attempts": completion.attempts,
            }
        self.cache.put(key, entry)
        return entry

    def _redact(self, text: str) -> str:
        """An endpoint that echoes the key back never gets it into a result, log or cache."""
        return text.replace(self.secret, "[redacted]") if self.secret else text

    def _log_prompt(self, prompt: str) -> None:
        lines = prompt.splitlines()
        where = f"[llm] episode {self._episode}, move {self._move}"
        if self._previous is None:
            self._print(f"{where}: prompt\n{prompt}")
        else:
            diff = difflib.unified_diff(self._previous, lines, n=0, lineterm="")
            changed = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
            self._print(f"{where}: prompt = move {self._move - 1}'s with\n" + "\n".join(changed))
        self._previous = lines

    def _print(self, text: str) -> None:
        print(text, file=self.out or sys.stdout)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
