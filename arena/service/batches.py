"""Batches as every front door handles them: read a spec, submit, look up, cancel, the logs of
their units, their report and a one-line account of what went wrong."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arena.service.cluster import log_folder
from arena.service.race_input import anchor_repo
from arena.service.reports import Report, in_process_report, report_from_store, write_logs
from tasks.execute import execute_batch
from tasks.liveness import waiting_on_lost_workers
from tasks.redis_health import redis_problem
from tasks.settings import ArenaSettings
from tasks.spec import NAME_PATTERN, load_spec_file
from tasks.store import BatchInfo, Store
from tasks.teams import Caller, NotAllowed, QuotaExceeded, Team
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import UnitResult, ValidatedBatch

if TYPE_CHECKING:
    from tasks.repo_policy import Asker
    from tasks.submit import Submission


def load_batch(path: str, asker: Asker = "operator") -> ValidatedBatch:
    """A spec file validated and identified (the CLI's user is the operator; a race's relative
    `repo:` is relative to the file's folder). Every problem with the file itself is one
    InputError line naming it (tasks/spec.py)."""
    return validate_batch(anchor_repo(load_spec_file(path), path), asker=asker)


def check_run_id(run_id: str | None) -> str | None:
    if run_id is not None and not re.match(NAME_PATTERN, run_id):
        raise InputError(
            f"--run-id: {run_id!r} is not a name (letters, digits, '.', '_', '-'; at most 64)"
        )
    return run_id


def submit_batch(
    db: Store,
    settings: ArenaSettings,
    batch: ValidatedBatch,
    fresh: bool,
    run_id: str | None,
    team: Team | None = None,
) -> Submission:
    """Queue a batch on the cluster (`arena submit`, POST /batches). With a `team` (the API's
    caller's), the batch is the team's, shares the pool by the team's weight and is held to
    its quotas: QuotaExceeded, with nothing stored, when it would pass one."""
    from tasks.submit import submit  # Celery (0.3 s) only when a command submits

    timeout_s = settings.visibility_timeout_s
    if team is None:
        submission = submit(db, batch, fresh, visibility_timeout_s=timeout_s, run_id=run_id)
        db.count_team_units(None, "submitted", submission.enqueued)
        return submission
    quotas = team.max_units_in_flight is not None or team.max_units_per_day is not None
    reserved = units_to_run(db, batch, fresh) if quotas else 0
    refusal = db.reserve_team_units(team, batch.batch_id, reserved)
    if refusal is not None:
        db.count_team_units(team.name, "refused", refusal.adding)
        raise QuotaExceeded(refusal.message(), refusal.retry_after_s)
    try:
        submission = submit(
            db,
            batch,
            fresh,
            visibility_timeout_s=timeout_s,
            run_id=run_id,
            team=team.name,
            team_weight=team.weight,
        )
    except BaseException:
        db.release_team_units(team.name, batch.batch_id, reserved)
        raise
    db.settle_team_units(team.name, batch.batch_id, reserved, submission.enqueued)
    db.count_team_units(team.name, "submitted", submission.enqueued)
    return submission


def units_to_run(db: Store, batch: ValidatedBatch, fresh: bool) -> int:
    """The units a submission would enqueue (tasks/submit.py): none of a batch that runs, every
    one with `fresh`, else those without a stored result. What a quota counts."""
    info = db.batch(batch.batch_id)
    if info is not None and info.status == "running" and not fresh:
        return 0
    workload = get_workload(batch.spec.workload)
    if fresh or info is None:  # counted, not made: 100,000 units take seconds to expand
        count = workload.unit_count(batch.agents, batch.items, batch.params, batch.spec.protocol)
        return count.total
    units = workload.expand(batch)
    stored = db.stored_unit_ids(batch.batch_id)
    return sum(unit.id not in stored for unit in units)


def cancel_batch(db: Store, batch_ref: str, caller: Caller | None = None) -> tuple[str, str]:
    """Cancel a batch: its id and the outcome ("cancelled", or the state it had ended in). A
    `caller` (the API's) may cancel only what its role and team allow (NotAllowed); the CLI's
    operator any batch."""
    from tasks.submit import cancel  # Celery (0.3 s) only when a command cancels

    batch_id = db.resolve(batch_ref)
    if caller is not None:
        check_owner(caller, batch_id, db.batch_team(batch_id), "cancel")
    return batch_id, cancel(db, batch_id)


def check_owner(caller: Caller, batch_id: str, owner: str | None, doing: str) -> None:
    """NotAllowed unless the caller may act on a batch of team `owner` (Caller.may_touch)."""
    if caller.may_touch(owner):
        return
    whose = f"team {owner!r}'s" if owner else "the operator's (no team)"
    raise NotAllowed(
        f"batch {batch_id} is {whose}; a token of {caller.describe()} may {doing} only its own "
        "team's batches"
    )


def find_batch(db: Store, batch_ref: str) -> BatchInfo:
    """A batch by id, unique prefix or run id; InputError naming it otherwise."""
    info = db.batch(db.resolve(batch_ref))
    if info is None:
        raise InputError(f"batch: no batch {batch_ref!r}")
    return info


def recent_batches(db: Store, limit: int) -> list[BatchInfo]:
    """The latest batches, newest first."""
    return [i for i in (db.batch(b) for b in db.batch_ids(limit)) if i is not None]


@dataclass(frozen=True)
class UnitLog:
    unit_id: str
    status: str
    text: str


def unit_logs(db: Store, batch_ref: str, agent: str | None) -> tuple[str, list[UnitLog]]:
    """What each unit of a batch printed, in unit-id order, optionally one agent's units."""
    info = find_batch(db, batch_ref)
    agents = set(info.identity.agents)
    if agent is not None and agent not in agents:
        raise InputError(f"agent: no agent {agent!r} in batch {info.id} ({sorted(agents)})")
    results, logs = db.unit_results(info.id), db.logs(info.id)
    shown = [
        UnitLog(unit_id, results[unit_id].status, logs[unit_id])
        for unit_id in sorted(u for u in logs if u in results)
        if agent is None or results[unit_id].agent == agent
    ]
    return info.id, shown


def run_in_process(
    batch: ValidatedBatch, run_id: str | None, settings: ArenaSettings, replay_cache: bool = False
) -> Report:
    """Run a batch's units in this process, one after another (no Redis, no leaderboard), and
    its report, with the units' logs written to the data folder."""
    created, logs = time.time(), dict[str, str]()
    results = execute_batch(batch, logs, replay_cache, memory_limits=True)
    folder = log_folder(settings, batch.batch_id)
    log_dir = write_logs(folder, logs, results) if logs else None
    return in_process_report(batch, results, created, run_id, log_dir)


def stored_report(settings: ArenaSettings, db: Store, batch_id: str) -> Report:
    """`arena report` and GET /batches/{id}: the batch's report, with its log folder if any."""
    log_dir = log_folder(settings, batch_id)
    return report_from_store(db, batch_id, log_dir if log_dir.is_dir() else None)


def running_notes(db: Store, info: BatchInfo, settings: ArenaSettings) -> list[str]:
    """What holds a running batch up: lost workers, Redis refusing writes or failing to save
    them to disk (tasks/redis_health.py)."""
    if info.status != "running":
        return []
    notes = [waiting_on_lost_workers(db, info.id, settings.lost_worker_s), redis_problem(db)]
    return [note for note in notes if note]


def error_summary(
    batch_id: str, status: str, reason: str | None, total: int, results: list[UnitResult]
) -> str | None:
    """One line for a batch that did not end clean: how many units failed and the first reasons
    (None when it is done with no errors)."""
    failed = [r for r in results if r.status == "error"]
    if status == "done" and not failed:
        return None
    reasons = list(dict.fromkeys(r.reason or "error" for r in failed))[:3]
    line = f"batch {batch_id} {status}" + (f" ({reason})" if reason else "")
    if failed:
        line += f": {len(failed)} of {total} units failed; first: " + " | ".join(
            r[:300] for r in reasons
        )
    return line


def report_errors(report: Report) -> str | None:
    return error_summary(
        report.batch_id, report.status, report.reason, report.counts.total, report.units
    )


def finished_errors(db: Store, info: BatchInfo) -> str | None:
    """The error line of a stored batch that ended (None while it runs, or when it is clean)."""
    results = list(db.unit_results(info.id).values()) if info.errors else []
    return error_summary(info.id, info.status, info.reason, info.total, results)
