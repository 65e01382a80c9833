"""Workload `alympics`: the game-theory benchmark. A unit is one match set: an agent against one
baseline of one game, for all of that game's episodes (rounds and episodes from the suite)."""

from __future__ import annotations

import hashlib
import json
import statistics
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Annotated, Any, cast

from pydantic import Field, model_validator

from scoring.alympics import GAMES, GameName, format_breakdown
from scoring.alympics_benchmark import MatchMeasures, score_benchmark
from tasks.repo_policy import Asker
from tasks.spec import Name, Protocol, SpecModel, derive_seed
from tasks.validation import InputError
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
    BudgetSpent,
    ReplayIncomplete,
    admit_endpoints,
    check_key_policy,
    llm_agent_for_unit,
    usage_totals,
)
from tasks.workloads.untrusted import (
    IMAGE_REF,
    AgentSource,
    agent_for_unit,
    image_agent_for_unit,
    refuse_at_submission,
)
from workers.agents import ENTRY_POINT, load_entry_point
from workers.fingerprint import AgentFingerprint
from workers.games import (
    BASELINES,
    BUILTIN,
    ForfeitWatch,
    game_measures,
    opponent_lineup,
    play_episode,
)
from workers.games import GAMES as GAME_CLASSES
from workers.games.base import Strategy
from workers.http_agent import HttpAgent
from workers.images import image_fingerprint
from workers.llm.agent import LlmAgent, LlmUsage, ReplayMiss, SpendingStopped
from workers.llm.config import LlmConfig


class AlympicsAgent(SpecModel):
    """`builtin`, a Python entry point, an HTTP endpoint (any language), a Docker image serving
    the agent contract on a unix socket (docs/agents.md), or a model behind a chat-completions
    endpoint (`llm`, docs/alympics.md)."""

    name: Name
    entry_point: Annotated[str, Field(pattern=ENTRY_POINT.pattern)] | None = None
    url: Annotated[str, Field(pattern=r"^https?://")] | None = None
    image: Annotated[str, Field(pattern=IMAGE_REF)] | None = None
    llm: LlmConfig | None = None
    # Per move, for the agents Arena waits on: HTTP, image and (sandboxed) entry-point agents.
    timeout_s: Annotated[float, Field(gt=0, le=600)] = 10.0
    # Identifies the agent's code when its files cannot (an HTTP agent) or should not be hashed.
    version: Annotated[str, Field(min_length=1, max_length=200)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> AlympicsAgent:
        kinds = (self.entry_point, self.url, self.image, self.llm)
        if sum(k is not None for k in kinds) > 1:
            raise ValueError("give one of entry_point, url, image or llm")
        if all(k is None for k in kinds) and self.name != "builtin":
            raise ValueError(
                f"unknown built-in agent {self.name!r} (built-in: builtin; or give "
                "entry_point: package.module:factory, url: http://..., image: name:tag, or "
                "llm: {base_url: ..., model: ...})"
            )
        return self


class AlympicsGame(SpecModel):
    name: GameName


class AlympicsParams(SpecModel):
    suite: Name = "alympics_lite"
    # Overrides every game's episodes (bounded: a typo must not queue a week of work).
    episodes: Annotated[int, Field(ge=1, le=100_000)] | None = None


@contextmanager
def open_strategy(agent: AlympicsAgent, game: str, unit: Unit) -> Iterator[Strategy]:
    """The unit's strategy for the agent: an entry point in the agent sandbox (in the worker
    when agents are trusted); an HTTP client, a sandboxed agent's process or an image's
    container lives exactly as long as the block. Faults of a sandboxed agent are moves as any
    other's: its process dead, every move it has left faults."""
    if agent.llm is not None:
        with llm_agent_for_unit(agent.llm, unit) as model:
            yield model
        return
    if agent.image:
        with image_agent_for_unit(agent.image, unit, agent.timeout_s) as image:
            yield cast(Strategy, image)  # reset is called with keywords (games/episode.py)
        return
    if agent.entry_point:
        source = AgentSource(entry_point=agent.entry_point)

        def in_process() -> Strategy:
            return make_strategy(agent, game, unit.agent_fingerprint)

        with agent_for_unit(source, unit, agent.timeout_s, in_process) as sandboxed:
            yield cast(Strategy, sandboxed)
        return
    strategy = make_strategy(agent, game, unit.agent_fingerprint)
    try:
        yield strategy
    finally:
        if isinstance(strategy, HttpAgent):
            strategy.close()


def make_strategy(
    agent: AlympicsAgent, game: str, fingerprint: AgentFingerprint | None = None
) -> Strategy:
    if agent.url:
        return HttpAgent(agent.url, agent.timeout_s)
    if agent.entry_point:
        strategy: Strategy = load_entry_point(agent.entry_point, fingerprint)
        return strategy
    return BUILTIN[game]()


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
        records = []
        with open_strategy(AlympicsAgent.model_validate(p["agent"]), p["game"], unit) as agent:
            usage = agent.usage if isinstance(agent, LlmAgent) else None
            try:
                for episode in range(p["episodes"]):
                    game = game_class(p["rounds"])
                    players = [agent, *opponent_lineup(p["game"], p["opponent"])]
                    seed = derive_seed(unit.env_seed, episode)
                    on_fault = partial(watch.fault, episode)
                    records.append(play_episode(game, players, seed, on_fault=on_fault))
            except ReplayMiss as miss:
                raise ReplayIncomplete(str(miss)) from None
            except SpendingStopped as stopped:
                raise with_usage(BudgetSpent(str(stopped)), usage) from None
            except Exception as exc:
                with_usage(exc, usage)  # a forfeit's requests were paid for all the same
                raise
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


def with_usage(exc: BaseException, usage: LlmUsage | None) -> BaseException:
    """`exc`, carrying what an llm agent spent so far into its unit's error result
    (tasks/execute.py reads `partial_result`)."""
    if usage is not None:
        exc.partial_result = {"llm": usage.as_dict()}  # type: ignore[attr-defined]
    return exc


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
