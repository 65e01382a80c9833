"""Running one unit so that nothing escapes: errors and timeouts become results."""

from __future__ import annotations

import gc
import os
import resource
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from types import FrameType
from typing import Any

from tasks.capture import captured_output
from tasks.provenance import host_name, utc_iso
from tasks.settings import current_settings
from tasks.workloads import get_workload
from tasks.workloads.base import (
    ErrorKind,
    InfrastructureError,
    Unit,
    UnitResult,
    ValidatedBatch,
    Workload,
)
from tasks.workloads.llm_agents import for_replay
from workers.agents import AgentChanged
from workers.fingerprint import engine_fingerprint
from workers.sandbox.base import SandboxUnavailable

EXIT_ABANDONED = 70  # a worker process ended because its agent ignored the deadline


class UnitTimeout(BaseException):
    """A BaseException: agent code that catches Exception (a game loop counting faults, an agent's
    own `except Exception`) cannot swallow the unit's deadline."""


class _Shutdown:
    """Set when this worker process is told to stop: a SystemExit then is not the agent's."""

    requested = False


def watch_for_shutdown() -> None:
    """Chain a flag onto the process's SIGTERM handler (called in each worker process)."""
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: FrameType | None) -> None:
        _Shutdown.requested = True
        if callable(previous):
            previous(signum, frame)
        else:
            raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)


# A worker process ended after a unit ran out of memory in it (tasks/units.py): its result was
# stored first, the pool replaces the process, the chunk's next delivery runs the units left.
EXIT_OUT_OF_MEMORY = 71


@contextmanager
def unit_memory(megabytes: int) -> Iterator[None]:
    """Cap this process's address space (RLIMIT_AS) while one unit runs: a unit that eats
    memory gets a MemoryError, the agent's error, instead of the kernel's OOM killer taking the
    worker and the units it holds. Only the soft limit: the hard one stays where it was, so a
    process the unit starts (an agent's jail, a race's commands, the inference host) can set
    its own limit, and the limit is lifted again between units (Celery's own code, the next
    unit under its own workload's limit). 0: no limit."""
    if megabytes <= 0:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = megabytes << 20
    limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def unit_memory_mb(workload: Workload, unit: Unit) -> int:
    """The memory limit a unit runs under: ARENA_UNIT_MEMORY_MB if set, else its workload's."""
    chosen = current_settings().unit_memory_mb
    return workload.memory_limit_mb(unit) if chosen is None else chosen


# Re-fires (one a second) an agent may swallow before its process is given up, when the caller
# can record the unit's result first (a worker: the chunk's other units then run elsewhere).
ABANDON_AFTER_FIRES = 5


@contextmanager
def deadline(seconds: float, abandon: Callable[[], None] | None = None) -> Iterator[None]:
    """Raise UnitTimeout in the running code after `seconds`, and again every second after that
    (main thread on Unix only). Code that swallows them all: with `abandon`, that is called
    (to store the unit's error result) and the process ends — the worker replaces it.

    Celery's own time limits act per task (a chunk of units); this one acts per unit.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return
    fires = 0

    def expire(signum: int, frame: FrameType | None) -> None:
        nonlocal fires
        fires += 1
        if abandon is not None and fires > ABANDON_AFTER_FIRES:
            signal.setitimer(signal.ITIMER_REAL, 0)
            abandon()
            os._exit(EXIT_ABANDONED)
        raise UnitTimeout(f"time limit of {seconds:g}s exceeded")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def unit_result(unit: Unit, duration_s: float = 0.0, **fields: Any) -> UnitResult:
    return UnitResult(
        unit_id=unit.id,
        agent=unit.agent,
        item=unit.item,
        episode=unit.episode,
        duration_s=duration_s,
        **fields,
    )


def error_result(
    unit: Unit, reason: str, duration_s: float = 0.0, kind: ErrorKind = "agent", **fields: Any
) -> UnitResult:
    reason = " ".join(reason.split()) or "error (no reason was given)"  # never empty
    return unit_result(
        unit, duration_s, status="error", reason=reason[:500], error_kind=kind, **fields
    )


class EngineMismatch(InfrastructureError):
    pass


def _check_engine(unit: Unit) -> None:
    """Results of other Arena code never land under a batch's identity."""
    if unit.engine and unit.engine != engine_fingerprint():
        raise EngineMismatch(
            f"this worker runs other Arena code (engine {engine_fingerprint()}) than the "
            f"batch was submitted with ({unit.engine}); run one Arena version everywhere"
        )


@cache
def _freeze_what_was_loaded() -> None:
    """Once a process, before its first unit: the objects it holds by then (modules, the Celery
    app, ~60,000 of them) leave the garbage collector's sight for good (gc.freeze). A unit that
    keeps many new objects alive (an Alympics block: 20 games growing together) triggers a full
    collection, which walked all of those: 2.5-3 ms a Prisoner's Dilemma unit, a third of its
    time; after the freeze, 0.1 ms. They are module-level objects, never garbage anyway."""
    gc.collect()
    gc.freeze()


@dataclass
class UnitRun:
    result: UnitResult
    log: str  # everything the unit printed (capped at tasks.capture.MAX_LOG_BYTES)
    # It ended in a MemoryError in this process: a worker does not run another unit in it
    # (the heap may be left fragmented or a library half-initialised; tasks/units.py).
    out_of_memory: bool = False


def execute_unit(
    workload: Workload, unit: Unit, record: Callable[[UnitRun], None] | None = None
) -> UnitRun:
    """Run one unit; whatever it does, a result comes back. `record` (a worker's way to store a
    result) lets a unit that ignores its deadline be abandoned with its error recorded."""
    started_at, started = utc_iso(), time.perf_counter()
    fields: dict[str, Any]
    out_of_memory = False
    _freeze_what_was_loaded()
    with captured_output() as output:

        def abandon() -> None:
            reason = (
                f"time limit of {unit.time_limit_s:g}s exceeded; the agent ignored it, so its "
                "worker process was ended"
            )
            if record is not None:
                record(UnitRun(error_result(unit, reason, time.perf_counter() - started), ""))

        try:
            _check_engine(unit)
            with deadline(unit.time_limit_s, abandon if record else None):
                raw = workload.run_unit(unit)
            fields = {"status": "ok", "result": raw}
        except (Exception, SystemExit, UnitTimeout) as exc:  # agent code may raise anything
            if isinstance(exc, SystemExit) and _Shutdown.requested:
                raise  # the worker is stopping: the unit is redelivered, not failed
            fields = {"status": "error", "reason": describe(exc)[:500], "error_kind": kind_of(exc)}
            out_of_memory = isinstance(exc, MemoryError)
            # What a unit measured before it failed and must still report (an llm agent's
            # paid requests): set by the workload on the exception.
            partial = getattr(exc, "partial_result", None)
            if isinstance(partial, dict):
                fields["result"] = partial
    result = unit_result(
        unit,
        time.perf_counter() - started,
        **fields,
        host=host_name(),
        started_at=started_at,
        finished_at=utc_iso(),
        log_tail=output.tail,
    )
    return UnitRun(result, output.text, out_of_memory)


def describe(exc: BaseException) -> str:
    """A unit's error reason, never empty: the exception's type, its message when it has one,
    and for a MemoryError the limit that raised it (a bare MemoryError() says nothing)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, UnitTimeout):
        return text or "time limit exceeded"
    name = type(exc).__name__
    if isinstance(exc, MemoryError):
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        where = (
            f"the unit's memory limit of {limit >> 20:,} MB of address space "
            "(ARENA_UNIT_MEMORY_MB, or the workload's default)"
            if limit != resource.RLIM_INFINITY
            else "no memory limit was set: the machine's memory ran out"
        )
        return f"{name}: {text + '; ' if text else ''}out of memory ({where})"
    return f"{name}: {text}" if text else name


def kind_of(exc: BaseException) -> ErrorKind:
    """Infrastructure: what is not the agent's doing (a lost worker, other code on the worker,
    files changed since submission, no sandbox or engine here). Everything else is the agent's:
    a sandboxed agent's process that dies, is killed, runs out of memory or stops answering
    (workers.sandbox.agent_process.AgentFault) is watched by a worker that lives on."""
    infrastructure = InfrastructureError | AgentChanged | SandboxUnavailable
    return "infrastructure" if isinstance(exc, infrastructure) else "agent"


def execute_batch(
    batch: ValidatedBatch,
    logs: dict[str, str] | None = None,
    replay_cache: bool = False,
    memory_limits: bool = False,
) -> list[UnitResult]:
    """Every unit of a batch in this process, in unit order: the reference a cluster run of the
    same spec must reproduce. What units printed goes to `logs` (unit id -> text) if given;
    `replay_cache`: llm agents answer from the replay cache (tasks/workloads/llm_agents.py);
    `memory_limits`: each unit under the memory limit a worker sets (the CLI's reference run;
    the limit is on the whole process's address space, so a process that holds much already,
    a test run's, leaves it off)."""
    workload = get_workload(batch.spec.workload)
    units = workload.expand(batch)
    results = []
    for unit in for_replay(units) if replay_cache else units:
        # This process goes on after a unit that hit the limit: it has no pool to replace it.
        with unit_memory(unit_memory_mb(workload, unit) if memory_limits else 0):
            run = execute_unit(workload, unit)
        results.append(run.result)
        if logs is not None and run.log:
            logs[unit.id] = run.log
    return results
