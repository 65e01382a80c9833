"""Workload `bandit`: agents × Bernoulli bandits × episodes; leaderboard by mean reward per pull."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any

from pydantic import Field, model_validator

from scoring.bandit import summarise_bandit
from tasks.spec import Name, SpecModel
from tasks.workloads.base import (
    Column,
    IntervalSpec,
    LeaderboardEntry,
    Reduction,
    Unit,
    UnitResult,
    ValidatedBatch,
    Workload,
)
from tasks.workloads.untrusted import AgentSource, agent_for_unit, refuse_at_submission
from workers.agents import ENTRY_POINT, load_entry_point
from workers.bandit import BUILTIN_AGENTS, BanditAgent, play_episode
from workers.fingerprint import AgentFingerprint
from workers.sandbox.agent_sandbox import STEP_TIMEOUT_S


class BanditAgentSpec(SpecModel):
    name: Name
    # A built-in strategy (default: the agent's name) or a Python entry point.
    builtin: str | None = None
    entry_point: Annotated[str, Field(pattern=ENTRY_POINT.pattern)] | None = None
    # Identifies the agent's code instead of hashing its files (docs/reproducibility.md).
    version: Annotated[str, Field(min_length=1, max_length=200)] | None = None

    @model_validator(mode="after")
    def _resolvable(self) -> BanditAgentSpec:
        if self.entry_point is None and (self.builtin or self.name) not in BUILTIN_AGENTS:
            known = ", ".join(sorted(BUILTIN_AGENTS))
            raise ValueError(
                f"unknown built-in agent {self.builtin or self.name!r} "
                f"(built-ins: {known}; or give entry_point: package.module:factory)"
            )
        return self


class BanditItem(SpecModel):
    name: Name
    arms: Annotated[list[Annotated[float, Field(ge=0, le=1)]], Field(min_length=2)]


class BanditParams(SpecModel):
    pulls: Annotated[int, Field(ge=1, le=10_000_000)] = 1000


class BanditWorkload(Workload):
    name = "bandit"
    agent_model = BanditAgentSpec
    item_model = BanditItem
    params_model = BanditParams
    chunk_size = 10  # an episode of 1,000 pulls takes about a millisecond
    score_header = "Mean reward"
    interval = IntervalSpec(point="iqm_reward", ci95="iqm_ci95", header="IQM [95% CI]")
    table_columns = (
        Column(key="mean_regret", header="Regret"),
        Column(key="best_arm_rate", header="Best-arm rate", fmt="percent"),
        Column(key="episodes", header="Episodes", fmt="count"),
    )
    errors_column = Column(key="errors", header="Errors", fmt="count")

    def make_agent(
        self, spec: BanditAgentSpec, fingerprint: AgentFingerprint | None = None
    ) -> BanditAgent:
        if spec.entry_point:
            agent: BanditAgent = load_entry_point(spec.entry_point, fingerprint)
            return agent
        return BUILTIN_AGENTS[spec.builtin or spec.name]()

    def fingerprint_agent(self, agent: Any) -> AgentFingerprint:
        if agent.entry_point:
            refuse_at_submission()
        return super().fingerprint_agent(agent)

    def run_unit(self, unit: Unit) -> dict[str, Any]:
        agent = BanditAgentSpec.model_validate(unit.payload["agent"])
        item = BanditItem.model_validate(unit.payload["item"])
        params = BanditParams.model_validate(unit.payload["params"])
        with self.open_agent(agent, unit) as agent_object:
            return play_episode(
                agent_object, item.arms, params.pulls, unit.env_seed, unit.agent_seed
            )

    @contextmanager
    def open_agent(self, spec: BanditAgentSpec, unit: Unit) -> Iterator[BanditAgent]:
        """A built-in in the worker; an entry point in the agent sandbox (in the worker when
        agents are trusted), with the default per-step timeout."""
        if not spec.entry_point:
            yield self.make_agent(spec)
            return
        source = AgentSource(entry_point=spec.entry_point)

        def in_process() -> BanditAgent:
            return self.make_agent(spec, unit.agent_fingerprint)

        with agent_for_unit(source, unit, STEP_TIMEOUT_S, in_process) as agent:
            yield agent

    def reduce(self, batch: ValidatedBatch, results: Sequence[UnitResult]) -> Reduction:
        by_agent: dict[str, list[UnitResult]] = defaultdict(list)
        for r in results:
            by_agent[r.agent].append(r)
        entries = []
        for agent, rows in sorted(by_agent.items()):
            ok = [r.result for r in sorted(rows, key=lambda r: r.unit_id) if r.status == "ok"]
            stats = summarise_bandit(
                [r["mean_reward"] for r in ok],
                [r["regret"] for r in ok],
                [r["best_arm_rate"] for r in ok],
                errors=len(rows) - len(ok),
                bootstrap_seed=batch.spec.protocol.seed,
            )
            entries.append(
                LeaderboardEntry(agent=agent, score=stats.mean_reward, stats=stats.model_dump())
            )
        errors = [r for r in results if r.status == "error"]
        summary = {
            "units": len(results),
            "errors": len(errors),
            "error_reasons": sorted({r.reason or "" for r in errors})[:10],
            "ranking": [e.agent for e in self.rank(entries)],
        }
        return Reduction(summary=summary, entries=entries)
