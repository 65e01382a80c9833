"""The workload interface: one module per workload under tasks/workloads/ implements it.

A workload says how a batch spec expands into units, how one unit runs (raw result), and how
the raw results of a batch reduce to a summary and leaderboard entries (with `scoring/`).
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from tasks.spec import BatchSpec, derive_seed

QueueName = Literal["cpu", "gpu"]


class Unit(BaseModel):
    """One isolated piece of work; its id is `{batch}:{agent}:{item}:{episode}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    batch_id: str
    workload: str
    agent: str
    item: str
    episode: int
    env_seed: int  # same for every agent on an (item, episode): common random numbers
    agent_seed: int  # the agent's own randomness
    queue: QueueName = "cpu"
    time_limit_s: float
    payload: dict[str, Any]  # the workload's validated agent, item and params


class UnitResult(BaseModel):
    """What a unit stored: never an exception, an error is a result with a reason."""

    model_config = ConfigDict(extra="forbid")

    unit_id: str
    agent: str
    item: str
    episode: int
    status: Literal["ok", "error"]
    reason: str | None = None
    result: dict[str, Any] = {}
    duration_s: float = 0.0


class LeaderboardEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str
    score: float  # the primary score, the sorted set's value
    stats: dict[str, Any]


class Reduction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: dict[str, Any]
    entries: list[LeaderboardEntry]


class ValidatedBatch(BaseModel):
    """A spec whose workload-specific parts passed the workload's models."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    spec: BatchSpec
    agents: list[Any]
    items: list[Any]
    params: Any

    @property
    def batch_id(self) -> str:
        return self.spec.batch_id()


class Workload(ABC):
    name: ClassVar[str]
    agent_model: ClassVar[type[BaseModel]]
    item_model: ClassVar[type[BaseModel]]
    params_model: ClassVar[type[BaseModel]]
    # Units per Celery task: tiny units are chunked so dispatch does not dominate.
    chunk_size: ClassVar[int] = 1

    def coerce_agent(self, raw: str | dict[str, Any]) -> dict[str, Any]:
        """A bare string names a built-in agent."""
        return {"name": raw} if isinstance(raw, str) else raw

    def coerce_item(self, raw: str | dict[str, Any]) -> dict[str, Any]:
        return {"name": raw} if isinstance(raw, str) else raw

    def agent_key(self, agent: Any) -> str:
        return str(agent.name)

    def item_key(self, item: Any) -> str:
        return str(item.name)

    def queue(self, agent: Any, item: Any, params: Any) -> QueueName:
        return "cpu"

    def check(self, batch: ValidatedBatch) -> None:  # noqa: B027 (optional hook)
        """Cross-field checks of a whole spec; raise InputError naming the field."""

    def expand(self, batch: ValidatedBatch) -> list[Unit]:
        """agents × items × episodes, in a fixed order, with seeds derived from the batch seed."""
        protocol = batch.spec.protocol
        units = []
        for agent, item, episode in itertools.product(
            batch.agents, batch.items, range(protocol.episodes)
        ):
            a, i = self.agent_key(agent), self.item_key(item)
            units.append(
                Unit(
                    id=f"{batch.batch_id}:{a}:{i}:{episode}",
                    batch_id=batch.batch_id,
                    workload=self.name,
                    agent=a,
                    item=i,
                    episode=episode,
                    env_seed=derive_seed(protocol.seed, "env", i, episode),
                    agent_seed=derive_seed(protocol.seed, "agent", a, i, episode),
                    queue=self.queue(agent, item, batch.params),
                    time_limit_s=protocol.unit_time_limit_s,
                    payload={
                        "agent": agent.model_dump(mode="json"),
                        "item": item.model_dump(mode="json"),
                        "params": batch.params.model_dump(mode="json"),
                    },
                )
            )
        return units

    @abstractmethod
    def run_unit(self, unit: Unit) -> dict[str, Any]:
        """Run one unit; return its raw result. May raise: the caller turns that into an error."""

    @abstractmethod
    def reduce(self, batch: ValidatedBatch, results: Sequence[UnitResult]) -> Reduction:
        """Scores from every unit's raw result (with scoring/), once the batch is complete."""

    def rank(self, entries: Sequence[LeaderboardEntry]) -> list[LeaderboardEntry]:
        return sorted(entries, key=lambda e: (-e.score, e.agent))
