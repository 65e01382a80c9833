"""What an LLM agent shares with the rest of the cluster, as interfaces: the endpoint's limits
(Gate), the replay cache (ReplayCache) and the batch's spend (Spend). tasks/llm_services.py
has them in Redis, shared by every worker; the in-process run uses the ones here."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from limits import RateLimitItemPerSecond
from limits.storage import MemoryStorage, Storage
from limits.strategies import MovingWindowRateLimiter

from workers.llm.config import LlmLimits

LIMITER_NAMESPACE = "arena-llm"


class LimitUnreachable(RuntimeError):
    """One request needs more tokens than the endpoint's tokens per minute allow."""


class Gate(Protocol):
    def slot(self, tokens: int) -> AbstractContextManager[None]:
        """Wait until one more request of about `tokens` tokens may go to the endpoint under its
        requests/min, tokens/min and concurrency limits; the slot is held while it is in
        flight. LimitUnreachable when `tokens` alone is over the tokens/min limit."""
        ...


class ReplayCache(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...
    def put(self, key: str, entry: dict[str, Any]) -> None: ...


class Spend(Protocol):
    def add(self, usd: float) -> float:
        """Add a request's cost; the batch's total after it."""
        ...

    def spent(self) -> float: ...


class WindowGate:
    """Requests and tokens per minute in a moving window (the `limits` library, any storage),
    concurrency by `concurrent_slot` (a subclass's; here a process-wide semaphore)."""

    def __init__(self, storage: Storage, endpoint: str, limits: LlmLimits) -> None:
        self.limiter = MovingWindowRateLimiter(storage)
        self.endpoint, self.limits = endpoint, limits
        self.requests = _per_minute(limits.requests_per_minute)
        self.tokens = _per_minute(limits.tokens_per_minute)

    @contextmanager
    def slot(self, tokens: int) -> Iterator[None]:
        if self.limits.tokens_per_minute is not None and tokens > self.limits.tokens_per_minute:
            raise LimitUnreachable(
                f"a request of about {tokens:,} tokens is over the endpoint's "
                f"{self.limits.tokens_per_minute:,} tokens per minute"
            )
        with self.concurrent_slot() as renew:
            self._wait(self.requests, 1)
            self._wait(self.tokens, tokens)
            renew()  # the slot's lease counts from when the request goes out
            yield

    def _wait(self, item: Any, cost: int) -> None:
        while item is not None and not self.limiter.hit(item, self.endpoint, cost=cost):
            stats = self.limiter.get_window_stats(item, self.endpoint)
            time.sleep(min(max(stats.reset_time - time.time(), 0.05), 1.0))

    def concurrent_slot(self) -> AbstractContextManager[Callable[[], None]]:
        """Held while a request waits for the windows and is in flight; what it yields renews
        the slot's lease, if it has one (here none: a process-wide semaphore)."""
        return _semaphore(self.endpoint, self.limits.concurrent)


_semaphores: dict[tuple[str, int], threading.BoundedSemaphore] = {}


def _no_lease() -> None:
    pass


@contextmanager
def _semaphore(endpoint: str, concurrent: int | None) -> Iterator[Callable[[], None]]:
    if concurrent is None:
        yield _no_lease
        return
    semaphore = _semaphores.setdefault(
        (endpoint, concurrent), threading.BoundedSemaphore(concurrent)
    )
    with semaphore:
        yield _no_lease


# A limit per minute is kept over a window this long: the endpoint counts a request when it
# arrives, and requests travel for different times, so a window of exactly 60 s let a
# provider see R + 1 in its minute (measured: the 61st arrived 0.8-1.7 ms inside it).
WINDOW_S = 61


def _per_minute(amount: int | None) -> Any:
    return RateLimitItemPerSecond(amount, WINDOW_S) if amount is not None else None


_memory = MemoryStorage()


def memory_gate(endpoint: str, limits: LlmLimits, lease_s: float | None = None) -> WindowGate:
    """This process's gate (the in-process run: one process is the whole cluster). `lease_s`
    (a GateFactory's third argument) is unused: a process's semaphore needs no lease."""
    return WindowGate(_memory, endpoint, limits)


class FolderCache:
    """The replay cache as one JSON file per entry under a folder (the in-process run's, in the
    data folder)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            entry: dict[str, Any] = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(entry, sort_keys=True))
        temporary.replace(path)


class LocalSpend:
    def __init__(self) -> None:
        self.total = 0.0

    def add(self, usd: float) -> float:
        self.total += usd
        return self.total

    def spent(self) -> float:
        return self.total


# (endpoint, limits, lease_s) -> the endpoint's gate; lease_s: how long a concurrency slot
# outlives a worker killed while holding it (the request's timeout and a margin).
GateFactory = Callable[[str, LlmLimits, float], Gate]


@dataclass(frozen=True)
class LlmServices:
    """What an llm agent is given: the cluster's (tasks/llm_services.py, cluster_services) or
    this process's (local_services)."""

    gate: GateFactory
    cache: ReplayCache
    spend: Spend


def local_services(data_dir: Path) -> LlmServices:
    """The in-process run's: a memory gate, the replay cache under data_dir/llm-cache and the
    spend counted in this process."""
    return LlmServices(
        gate=memory_gate, cache=FolderCache(data_dir / "llm-cache"), spend=LocalSpend()
    )
