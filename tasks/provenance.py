"""Provenance: what produced a result, carried by every batch, leaderboard row and report."""

from __future__ import annotations

import importlib.metadata
import platform
import socket
import subprocess
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from workers.fingerprint import AgentFingerprint

if TYPE_CHECKING:
    from tasks.workloads.base import UnitResult, ValidatedBatch

DISTRIBUTION = "arena-eval"


def arena_version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


@cache
def arena_commit() -> str | None:
    """The git commit Arena runs from (`+dirty` with uncommitted changes); None outside a
    checkout (an installed wheel)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def version_line() -> str:
    commit = arena_commit()
    return f"arena {arena_version()}" + (f" (commit {commit})" if commit else "")


def utc_iso(timestamp: float | None = None) -> str:
    """ISO 8601 in UTC, to the millisecond: 2026-11-26T10:00:45.123Z."""
    moment = datetime.now(UTC) if timestamp is None else datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@cache
def host_name() -> str:
    return socket.gethostname()


class Provenance(BaseModel):
    """Fixed at submission; the reducer adds when the batch finished and where it ran."""

    model_config = ConfigDict(extra="forbid")

    arena_version: str
    arena_commit: str | None
    engine: str  # fingerprint of the code that runs and scores units
    python: str
    submitted_at: str
    submitted_from: str  # host name of the submitter
    run_id: str | None = None  # the user's label (--run-id)
    protocol: dict[str, Any]  # the normalised spec without the agents: what the board holds
    protocol_fingerprint: str
    agents: dict[str, AgentFingerprint]
    finished_at: str | None = None
    hosts: list[str] = []  # workers that ran units of this batch


def submission_provenance(
    protocol: dict[str, Any],
    protocol_fingerprint: str,
    engine: str,
    agents: dict[str, AgentFingerprint],
    run_id: str | None,
) -> Provenance:
    return Provenance(
        arena_version=arena_version(),
        arena_commit=arena_commit(),
        engine=engine,
        python=platform.python_version(),
        submitted_at=utc_iso(),
        submitted_from=host_name(),
        run_id=run_id,
        protocol=protocol,
        protocol_fingerprint=protocol_fingerprint,
        agents=agents,
    )


def provenance_of(batch: ValidatedBatch, run_id: str | None = None) -> Provenance:
    protocol = {k: v for k, v in batch.normalised().items() if k != "agents"}
    identity = batch.identity
    return submission_provenance(
        protocol, identity.protocol_fingerprint, identity.engine, identity.agents, run_id
    )


def finished_provenance(
    submitted: Provenance, created_at: float, results: list[UnitResult]
) -> tuple[Provenance, dict[str, dict[str, Any]]]:
    """The batch's provenance completed (finish time, worker hosts), and each leaderboard
    row's: the protocol, versions, the agent's fingerprint and where its units ran."""
    finished = submitted.model_copy(
        update={"finished_at": utc_iso(), "hosts": sorted({r.host for r in results if r.host})}
    )
    per_agent = {}
    for agent, fingerprint in submitted.agents.items():
        hosts = sorted({r.host for r in results if r.agent == agent and r.host})
        per_agent[agent] = {
            "run_id": submitted.run_id,
            "protocol_fingerprint": submitted.protocol_fingerprint,
            "protocol": submitted.protocol,
            "arena_version": submitted.arena_version,
            "arena_commit": submitted.arena_commit,
            "engine": submitted.engine,
            "fingerprint": fingerprint.model_dump(),
            "started_at": utc_iso(created_at),
            "finished_at": finished.finished_at,
            "hosts": hosts,
        }
    return finished, per_agent
