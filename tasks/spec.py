"""Batch specs: what to evaluate, validated before anything is enqueued."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Protocol(SpecModel):
    """How each agent is evaluated; part of a leaderboard's identity."""

    episodes: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    seed: Annotated[int, Field(ge=0, lt=2**63)] = 0
    unit_time_limit_s: Annotated[float, Field(gt=0, le=24 * 3600)] = 600.0


class BatchSpec(SpecModel):
    """The generic shape; `agents`, `items` and `params` are checked by the workload's models."""

    workload: str
    leaderboard: Name | None = None
    agents: Annotated[list[str | dict[str, Any]], Field(min_length=1)]
    items: Annotated[list[str | dict[str, Any]], Field(min_length=1)]
    protocol: Protocol = Protocol()
    params: dict[str, Any] = {}


def derive_seed(master: int, *parts: str | int) -> int:
    """A 63-bit seed from the master seed and a path (Axelrod style: one seed per job)."""
    digest = hashlib.sha256(":".join(map(str, (master, *parts))).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def load_spec_file(path: str | Path) -> Any:
    """YAML or JSON (JSON is YAML); the caller validates."""
    return yaml.safe_load(Path(path).read_text())
