"""Running one unit so that nothing escapes: errors and timeouts become results."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from tasks.capture import captured_output
from tasks.provenance import host_name, utc_iso
from tasks.workloads.base import Unit, UnitResult, ValidatedBatch, Workload
from workers.fingerprint import engine_fingerprint


class UnitTimeout(Exception):
    pass


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


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise UnitTimeout in the running code after `seconds` (main thread on Unix only).

    Celery's own time limits act per task (a chunk of units); this one acts per unit.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise UnitTimeout(f"time limit of {seconds:g}s exceeded")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
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


def error_result(unit: Unit, reason: str, duration_s: float = 0.0, **fields: Any) -> UnitResult:
    return unit_result(unit, duration_s, status="error", reason=reason[:500], **fields)


class EngineMismatch(RuntimeError):
    pass


def _check_engine(unit: Unit) -> None:
    """Results of other Arena code never land under a batch's identity."""
    if unit.engine and unit.engine != engine_fingerprint():
        raise EngineMismatch(
            f"this worker runs other Arena code (engine {engine_fingerprint()}) than the "
            f"batch was submitted with ({unit.engine}); run one Arena version everywhere"
        )


@dataclass
class UnitRun:
    result: UnitResult
    log: str  # everything the unit printed (capped at tasks.capture.MAX_LOG_BYTES)


def execute_unit(workload: Workload, unit: Unit) -> UnitRun:
    started_at, started = utc_iso(), time.perf_counter()
    fields: dict[str, Any]
    with captured_output() as output:
        try:
            _check_engine(unit)
            with deadline(unit.time_limit_s):
                raw = workload.run_unit(unit)
            fields = {"status": "ok", "result": raw}
        except (Exception, SystemExit) as exc:  # agent code may raise anything, even SystemExit
            if isinstance(exc, SystemExit) and _Shutdown.requested:
                raise  # the worker is stopping: the unit is redelivered, not failed
            reason = str(exc) if isinstance(exc, UnitTimeout) else f"{type(exc).__name__}: {exc}"
            fields = {"status": "error", "reason": reason[:500]}
    result = unit_result(
        unit, time.perf_counter() - started, **fields, host=host_name(), started_at=started_at,
        finished_at=utc_iso(), log_tail=output.tail,
    )  # fmt: skip
    return UnitRun(result, output.text)


def execute_batch(batch: ValidatedBatch, logs: dict[str, str] | None = None) -> list[UnitResult]:
    """Every unit of a batch in this process, in unit order: the reference a cluster run of the
    same spec must reproduce. What units printed goes to `logs` (unit id -> text) if given."""
    from tasks.workloads import get_workload  # the registry imports every workload module

    workload = get_workload(batch.spec.workload)
    results = []
    for unit in workload.expand(batch):
        run = execute_unit(workload, unit)
        results.append(run.result)
        if logs is not None and run.log:
            logs[unit.id] = run.log
    return results
