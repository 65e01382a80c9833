"""What a batch is: its normalised spec, every agent's fingerprint and Arena's engine.

Two submissions are the same batch (a resume) only when all three match; anything changed is a
new batch (docs/reproducibility.md). A leaderboard's protocol is the normalised spec without the
agents and the board's name, so the same protocol written two ways shares one board.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from tasks.spec import RUN_OPTIONS
from workers.fingerprint import AgentFingerprint


class BatchIdentity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_id: str
    protocol_fingerprint: str
    engine: str  # workers.fingerprint.engine_fingerprint() of the submitter
    agents: dict[str, AgentFingerprint]


def _digest(body: Any) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _by_name(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Order does not change the work: agents and items are hashed sorted by name."""
    return sorted(entries, key=lambda e: json.dumps(e, sort_keys=True))


def protocol_fingerprint(normalised: dict[str, Any]) -> str:
    body = {k: v for k, v in normalised.items() if k not in ("agents", "leaderboard", "occasion")}
    for option in RUN_OPTIONS:  # run options (tasks/spec.py)
        body.pop(option, None)
    body["items"] = _by_name(body["items"])
    return _digest(body)


def batch_identity(
    normalised: dict[str, Any], agents: dict[str, AgentFingerprint], engine: str
) -> BatchIdentity:
    spec = {k: v for k, v in normalised.items() if k not in RUN_OPTIONS}
    body = {
        "spec": {
            **spec,
            "agents": _by_name(spec["agents"]),
            "items": _by_name(spec["items"]),
        },
        "agents": {name: fp.digest for name, fp in sorted(agents.items())},
        "engine": engine,
    }
    return BatchIdentity(
        batch_id=_digest(body),
        protocol_fingerprint=protocol_fingerprint(normalised),
        engine=engine,
        agents=agents,
    )
