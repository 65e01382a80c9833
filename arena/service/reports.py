"""One report file per batch (JSON, as lm-evaluation-harness writes its results file): the
config, versions and provenance, per-agent results and every unit's result. Its JSON Schema is
generated from these models and published as docs/report.schema.json (docs/reports.md)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from arena.service.boards import ranks_of
from tasks.provenance import Provenance, finished_provenance, provenance_of, utc_iso
from tasks.redact import redact_text, redact_value
from tasks.store import BatchStatus, Store, by_board
from tasks.validation import InputError
from tasks.workloads import get_workload, stored_units
from tasks.workloads.base import LeaderboardEntry, UnitResult, ValidatedBatch
from workers.fingerprint import AgentFingerprint

REPORT_VERSION: Literal[1] = 1


class AgentResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rank: int
    score: float  # the workload's primary score (the leaderboard's value)
    stats: dict[str, Any]
    fingerprint: AgentFingerprint | None
    units: int
    errors: int


class Counts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    total: int
    completed: int
    errors: int


class Report(BaseModel):
    """The whole record of one batch."""

    model_config = ConfigDict(extra="forbid")

    report_version: Literal[1] = REPORT_VERSION
    batch_id: str
    run_id: str | None
    team: str | None = None  # whose token submitted it (None: the operator, an admin's token)
    workload: str
    leaderboards: list[str]  # the boards it writes (an in-process run: would write)
    status: BatchStatus
    reason: str | None
    created_at: str  # ISO 8601, UTC
    finished_at: str | None
    config: dict[str, Any]  # the normalised spec: every default filled in
    versions: Provenance  # Arena's version and commit, engine, agent fingerprints, hosts
    counts: Counts
    summary: dict[str, Any] | None
    results: dict[str, dict[str, AgentResult]]  # board -> agent -> result, in rank order
    units: list[UnitResult]  # per unit, in unit order
    log_dir: str | None  # where each unit's whole output was written


def report_schema() -> dict[str, Any]:
    return Report.model_json_schema(mode="serialization")


def agent_results(
    workload_name: str,
    entries: list[LeaderboardEntry],
    boards: dict[str, str],
    provenance: Provenance,
    units: list[UnitResult],
) -> dict[str, dict[str, AgentResult]]:
    """Per board, per agent in rank order (units and errors: the agent's in the whole batch)."""
    workload = get_workload(workload_name)
    results: dict[str, dict[str, AgentResult]] = {}
    for board, board_entries in by_board(entries, boards).items():
        ranked = results.setdefault(board, {})
        ordered = workload.rank(board_entries)
        for rank, e in zip(ranks_of(ordered, workload), ordered, strict=True):
            own = [u for u in units if u.agent == e.agent]
            ranked[e.agent] = AgentResult(
                rank=rank,
                score=e.score,
                stats=e.stats,
                fingerprint=provenance.agents.get(e.agent),
                units=len(own),
                errors=sum(u.status == "error" for u in own),
            )
    return results


def report_from_store(db: Store, batch_id: str, log_dir: Path | None = None) -> Report:
    info = db.batch(batch_id)
    if info is None:
        raise InputError(f"batch: no batch {batch_id!r}")
    stored = db.unit_results(batch_id)
    _, expanded = stored_units(info.spec, info.identity)
    units = [stored[u.id] for u in expanded if u.id in stored]
    return Report(
        batch_id=info.id,
        run_id=info.run_id,
        team=info.team,
        workload=info.workload,
        leaderboards=list(info.boards),
        status=info.status,
        reason=info.reason,
        created_at=utc_iso(info.created_at),
        finished_at=utc_iso(info.finished_at) if info.finished_at else None,
        config=info.spec,
        versions=info.provenance,
        counts=Counts(total=info.total, completed=info.completed, errors=info.errors),
        summary=info.summary,
        results=agent_results(info.workload, info.entries, info.boards, info.provenance, units),
        units=units,
        log_dir=str(log_dir) if log_dir else None,
    )


def in_process_report(
    batch: ValidatedBatch,
    results: list[UnitResult],
    created_at: float,
    run_id: str | None = None,
    log_dir: Path | None = None,
) -> Report:
    """The report of a batch run in this process (no Redis, no leaderboard)."""
    workload = get_workload(batch.spec.workload)
    reduction = workload.reduce(batch, results)
    boards = workload.boards(batch)
    provenance, _ = finished_provenance(provenance_of(batch, run_id), created_at, results)
    errors = sum(r.status == "error" for r in results)
    return Report(
        batch_id=batch.batch_id,
        run_id=run_id,
        workload=workload.name,
        leaderboards=list(boards),
        status="done",
        reason=None,
        created_at=utc_iso(created_at),
        finished_at=provenance.finished_at,
        config=batch.normalised(),
        versions=provenance,
        counts=Counts(total=len(results), completed=len(results), errors=errors),
        summary=reduction.summary,
        results=agent_results(workload.name, reduction.entries, boards, provenance, results),
        units=results,
        log_dir=str(log_dir) if log_dir else None,
    )


def check_output_path(path: Path) -> Path:
    """Refuse an unwritable --output-path before anything runs; returns the path.

    PATH ending in .json is the report file; anything else is a folder (made if its parent
    exists) that receives arena-<batch>.json."""
    if path.suffix == ".json":
        return check_output_file(path, "--output-path")
    if not path.exists():
        try:
            path.mkdir()
        except OSError as exc:
            raise InputError(f"--output-path: cannot create {path} ({exc.strerror})") from None
    if not path.is_dir():
        raise InputError(f"--output-path: {path} is not a folder")
    _check_writable(path, "--output-path")
    return path


def check_output_file(path: Path, option: str) -> Path:
    """A file we will write at the end: its folder exists and takes files, it is no folder."""
    if path.is_dir():
        raise InputError(f"{option}: {path} is a folder")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"{option}: folder {folder} does not exist")
    _check_writable(folder, option)
    return path


def _check_writable(folder: Path, option: str) -> None:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(f"{option}: cannot write in {folder} ({exc.strerror})") from None


def write_report(report: Report, path: Path) -> Path:
    """Atomically (a reader never sees half a report), redacted as every read is (the report
    leaves Arena: tasks/redact.py); returns the file written."""
    target = path if path.suffix == ".json" else path / f"arena-{report.batch_id}.json"
    temporary = target.with_name(f".{target.name}.tmp")
    raw = redact_value(report.model_dump(mode="json"))  # before escaping respells a secret
    temporary.write_text(redact_text(json.dumps(raw, indent=2)) + "\n")
    os.replace(temporary, target)
    return target


def write_logs(folder: Path, logs: dict[str, str], units: list[UnitResult]) -> Path | None:
    """The per-batch log folder (as SWE-bench keeps a log per instance):
    <folder>/<agent>/<item>-<episode>.log for every unit that printed anything."""
    by_id = {u.unit_id: u for u in units}
    written = False
    for unit_id, text in logs.items():
        unit = by_id.get(unit_id)
        if unit is None:
            continue
        target = folder / safe_name(unit.agent) / f"{safe_name(unit.item)}-{unit.episode}.log"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        written = True
    return folder if written else None


def safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._@-" else "_" for c in text) or "_"


if __name__ == "__main__":  # python -m arena.service.reports > docs/report.schema.json
    print(json.dumps(report_schema(), indent=2))
