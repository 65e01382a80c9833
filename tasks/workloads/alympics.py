"""Workload `alympics`: the game-theory benchmark. A unit is one match set: an agent against one
baseline of one game, for all of that game's episodes (rounds and episodes from the suite)."""

from __future__ import annotations

import hashlib
import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from scoring.alympics import GAMES, GameName, format_breakdown
from scoring.alympics_benchmark import MatchMeasures, score_benchmark
from tasks.repo_policy import Asker
from tasks.spec import Name, Protocol, SpecModel, derive_seed
from tasks.validation import InputError
from tasks.workloads.alympics_agent import AlympicsAgent
from tasks.workloads.alympics_play import play_match_set
from tasks.workloads.alympics_suites import load_suite
from tasks.workloads.base import (
    Column,
    LeaderboardEntry,
    PageColumn,
    Reduction,
    Unit,
    UnitCount,
    UnitResult,
    ValidatedBatch,
    Workload,
)
from tasks.workloads.llm_agents import (
    admit_endpoints,
    check_key_policy,
    usage_totals,
)
from tasks.workloads.untrusted import (
    refuse_at_submission,
)
from workers.fingerprint import AgentFingerprint
from workers.games import (
    BASELINES,
    ForfeitWatch,
    game_measures,
)
from workers.games import GAMES as GAME_CLASSES
from workers.images import image_fingerprint
from workers.llm.config import LlmConfig


class AlympicsGame(SpecModel):
    name: GameName


class AlympicsParams(SpecModel):
    suite: Name = "alympics_lite"
    # Overrides every game's episodes (bounded: a typo must not queue a week of work).
    episodes: Annotated[int, Field(ge=1, le=100_000)] | None = None


class AlympicsWorkload(Workload):
    name = "alympics"
    agent_model = AlympicsAgent
    item_model = AlympicsGame
    params_model = AlympicsParams
    chunk_size = 10  # a match set takes about 10 ms (docs/performance.md, section 1)

    def chunk_size_for(self, units: Sequence[Unit]) -> int:
        """An llm agent's match set waits on its endpoint (seconds to hours): one per task, so
        every worker takes its share (10 to a chunk would leave the others idle)."""
        has_llm = any(u.payload.get("agent", {}).get("llm") for u in units)
        return 1 if has_llm else self.chunk_size

    score_header = "Composite"
    page_columns = (
        *(
            PageColumn(key=f"categories.{c}", header=c.capitalize(), shown_as="bar")
            for c in ("strategic", "cooperation", "fairness", "robustness")
        ),
        PageColumn(key="llm.total_tokens", header="Tokens", fmt="count", optional=True),
        PageColumn(key="llm.cost_usd", header="Cost $", optional=True),
    )
    table_columns = (
        Column(key="categories.strategic", header="Strategic"),
        Column(key="categories.cooperation", header="Cooperation"),
        Column(key="categories.fairness", header="Fairness"),
        Column(key="categories.robustness", header="Robustness"),
        Column(key="faults", header="Faults", fmt="count"),
        # An llm agent's spend (— for other agents); per match set in the report, per move in
        # the unit's log.
        Column(key="llm.total_tokens", header="Tokens", fmt="count", optional=True),
        Column(key="llm.cost_usd", header="Cost $", optional=True),
    )
    errors_column = Column(key="failed_match_sets", header="Failed match sets", fmt="count")

    def coerce_spec(self, data: dict[str, Any], asker: Asker = "token-holder") -> dict[str, Any]:
        """What an agent's endpoint may name depends on who asks (llm_agents.admit_endpoints)."""
        agents = data.get("agents")
        if isinstance(agents, list):
            admit_endpoints(agents, asker)
        return data

    def fingerprint_agent(self, agent: Any) -> AgentFingerprint:
        if agent.entry_point:
            refuse_at_submission()
        if agent.image and not agent.version:
            return image_fingerprint(agent.image)  # the content id the workers will run
        if agent.llm is not None:
            check_key_policy(agent.llm)
            return model_fingerprint(agent.llm, agent.version)
        return super().fingerprint_agent(agent)

    def check(self, batch: ValidatedBatch) -> None:
        if batch.spec.protocol.episodes != 1:
            raise InputError(
                "protocol.episodes: alympics takes episodes per game from the suite; "
                "override them with params.episodes"
            )
        suite = load_suite(batch.params.suite)
        absent = [i.name for i in batch.items if i.name not in suite.games]
        if absent:
            raise InputError(f"items: {absent[0]!r} is not in suite {suite.suite!r}")
        missing = sorted(set(GAMES) - {i.name for i in batch.items})
        if missing:
            raise InputError(f"items: the composite needs all five games (missing: {missing})")

    def unit_count(
        self, agents: list[Any], items: list[Any], params: Any, protocol: Protocol
    ) -> UnitCount:
        """One unit per agent, game and baseline opponent (as `expand` makes them)."""
        matches = sum(len(BASELINES.get(item.name, ())) for item in items)
        formula = f"{len(agents):,} agents × {matches:,} baseline matches"
        return UnitCount(total=len(agents) * matches, formula=formula)

    def expand(self, batch: ValidatedBatch) -> list[Unit]:
        suite = load_suite(batch.params.suite)
        protocol = batch.spec.protocol
        units = []
        for agent in batch.agents:
            for item in batch.items:
                game = suite.games[item.name]
                for opponent in sorted(BASELINES[item.name]):
                    key = f"{item.name}@{opponent}"
                    units.append(
                        Unit(
                            id=f"{batch.batch_id}:{agent.name}:{key}:0",
                            batch_id=batch.batch_id,
                            workload=self.name,
                            agent=agent.name,
                            item=key,
                            episode=0,
                            env_seed=derive_seed(protocol.seed, "env", key),
                            agent_seed=derive_seed(protocol.seed, "agent", agent.name, key),
                            time_limit_s=protocol.unit_time_limit_s,
                            payload={
                                "agent": agent.model_dump(mode="json"),
                                "game": item.name,
                                "opponent": opponent,
                                "rounds": game.rounds,
                                "episodes": batch.params.episodes or game.episodes,
                                **llm_payload(agent, batch.spec.cost_budget_usd),
                            },
                            agent_fingerprint=batch.identity.agents.get(agent.name),
                            engine=batch.identity.engine,
                        )
                    )
        return units

    def run_unit(self, unit: Unit) -> dict[str, Any]:
        """Play the match set. More than half of the agent's moves faulted: AgentForfeit, raised
        as soon as that is certain, which makes the unit an error result (0 everywhere)."""
        p = unit.payload
        game_class = GAME_CLASSES[p["game"]]
        watch = ForfeitWatch(moves=p["rounds"] * p["episodes"], player=0)
        records, usage = play_match_set(AlympicsAgent.model_validate(p["agent"]), unit, watch)
        # Credited payoffs (a faulted move earns nothing), so they agree with measures["raw"].
        per_episode = [statistics.fmean(game_class.credited_payoffs(r, 0)) for r in records]
        reasons = [reason for rec in records for reason in rec.fault_reasons][:5]
        return {
            "game": p["game"],
            "opponent": p["opponent"],
            "measures": game_measures(records, 0),
            "episode_payoffs": per_episode,
            "fault_reasons": reasons,
            **({"llm": usage.as_dict()} if usage is not None else {}),
        }

    def reduce(self, batch: ValidatedBatch, results: Sequence[UnitResult]) -> Reduction:
        entries, breakdowns = [], {}
        for agent, matches in sorted(matches_by_agent(results).items()):
            score = score_benchmark(matches, agent)
            breakdowns[agent] = format_breakdown(score)
            stats = {
                "composite_score": score.composite_score,
                "categories": {c: s.score for c, s in score.categories.items()},
                "games": {c: s.games for c, s in score.categories.items()},
                "faults": sum(m.faults for m in matches),
                "failed_match_sets": sum(m.error is not None for m in matches),
            }
            llm = usage_totals(
                [r.result["llm"] for r in results if r.agent == agent and "llm" in r.result]
            )
            if llm:
                stats["llm"] = llm
            entries.append(LeaderboardEntry(agent=agent, score=score.composite_score, stats=stats))
        summary: dict[str, Any] = {"units": len(results), "breakdown": breakdowns}
        llm = usage_totals(llm_usages(results))
        if llm:
            summary["llm"] = llm
        return Reduction(summary=summary, entries=entries)


def model_fingerprint(config: LlmConfig, version: str | None) -> AgentFingerprint:
    """A model is what answers: its name, the endpoint's host, sampling, the prompt template's
    hash and how answers are read (LlmConfig.identity), and a declared version if any (a hosted
    model's weights can change under one name)."""
    identity = {**config.identity(), "version": version}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    detail = f"model {config.model} at {config.host}, template {config.template_sha256[:12]}"
    return AgentFingerprint(kind="model", digest=digest, detail=detail)


def llm_usages(results: Sequence[UnitResult], agent: str | None = None) -> list[dict[str, Any]]:
    """The `llm` accounting of the results (of one agent's), failed units' included."""
    return [
        r.result["llm"]
        for r in results
        if "llm" in r.result and (agent is None or r.agent == agent)
    ]


def llm_payload(agent: AlympicsAgent, budget_usd: float | None) -> dict[str, Any]:
    if agent.llm is None or budget_usd is None:
        return {}
    return {"cost_budget_usd": budget_usd}


def matches_by_agent(results: Sequence[UnitResult]) -> dict[str, list[MatchMeasures]]:
    """Unit results as the rubric's match measures; a failed unit is a failed match set."""
    by_agent: dict[str, list[MatchMeasures]] = defaultdict(list)
    for r in results:
        game, opponent = r.item.split("@")
        fields: dict[str, Any] = {"game": game, "opponent": opponent}
        if r.status == "ok":
            m = r.result["measures"]
            fields |= {
                "raw": m["raw"],
                "cooperation": m.get("cooperation"),
                "fairness": m.get("fairness"),
                "faults": int(m.get("faults", 0)),
            }
        else:
            fields["error"] = r.reason or "error"
        match = MatchMeasures.model_validate(fields)
        by_agent[r.agent].append(match)
    return dict(by_agent)
