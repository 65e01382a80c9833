"""The Alympics benchmark as the rubric presents it: `run_alympics`, `score_benchmark`.

import asyncio
from arena.service.alympics import run_alympics
result = asyncio.run(run_alympics(agent_name="builtin"))
print(result.summary())
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import yaml

from scoring.alympics import GAMES, AlympicsScore, CategoryScore, format_breakdown
from scoring.alympics_benchmark import MatchMeasures, score_benchmark
from tasks.execute import execute_batch
from tasks.validation import InputError
from tasks.workloads import validate_batch
from tasks.workloads.alympics import llm_usages, matches_by_agent
from tasks.workloads.base import UnitResult, ValidatedBatch
from tasks.workloads.llm_agents import usage_totals

__all__ = ["BenchmarkResult", "MatchMeasures", "benchmark_spec", "run_alympics", "score_benchmark"]


LLM_AGENT = re.compile(r"^llm:(?P<model>[^@]+)@(?P<url>https?://\S+)$")


def llm_options(pairs: list[str]) -> dict[str, Any]:
    """`KEY=VALUE` pairs as an llm spec's fields: a dotted key is nested (limits.concurrent=4),
    a value is read as YAML (60 is a number, true a boolean)."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[a-z_]+(\.[a-z_0-9]+)?", key):
            raise InputError(f"--llm: {pair!r} is not KEY=VALUE (e.g. limits.concurrent=4)")
        try:
            parsed = yaml.safe_load(value) if value else value
        except yaml.YAMLError:
            parsed = value
        head, _, tail = key.partition(".")
        if tail:
            fields.setdefault(head, {})[tail] = parsed
        else:
            fields[head] = parsed
    return fields


def agent_spec(
    agent_name: str, timeout_s: float | None = None, llm: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`builtin`, `package.module:factory`, an `http(s)://` endpoint (`timeout_s`: its
    per-move timeout; other agents are bounded by the unit's time limit), or
    `llm:MODEL@BASE_URL` (`llm`: its other fields, docs/alympics.md)."""
    model = LLM_AGENT.match(agent_name)
    if model:
        name = "llm-" + re.sub(r"[^A-Za-z0-9._-]+", "-", model["model"]).strip("-")
        config = {"base_url": model["url"], "model": model["model"], **(llm or {})}
        return {"name": name[:64], "llm": config}
    if agent_name.startswith("llm:"):
        raise InputError(f"--agent: {agent_name!r} is not llm:MODEL@http(s)://BASE_URL")
    if llm:
        raise InputError("--llm: applies to an llm:MODEL@BASE_URL agent")
    if re.match(r"^https?://", agent_name):
        host = re.sub(r"[^A-Za-z0-9._-]+", "-", agent_name.split("://", 1)[1]).strip("-")
        spec = {"name": f"http-{host}"[:64], "url": agent_name}
        return spec | ({"timeout_s": timeout_s} if timeout_s is not None else {})
    if timeout_s is not None:
        raise InputError(
            "--move-timeout: applies to HTTP agents; a Python agent is bounded by --unit-time-limit"
        )
    if ":" in agent_name:
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", agent_name)[:64]
        return {"name": name, "entry_point": agent_name}
    return {"name": agent_name}


def benchmark_spec(
    agent_name: str = "builtin",
    episodes: int | None = None,
    seed: int = 0,
    suite: str = "alympics_lite",
    move_timeout_s: float | None = None,
    unit_time_limit_s: float | None = None,
    llm: dict[str, Any] | None = None,
    cost_budget_usd: float | None = None,
) -> dict[str, Any]:
    """The standard protocol (suite's episodes, seed 0, default unit time limit) goes to the
    `alympics` board; any other to a board of its own (`alympics-<protocol fingerprint>`), so
    protocols never mix."""
    standard = episodes is None and seed == 0 and suite == "alympics_lite"
    standard = standard and unit_time_limit_s is None
    protocol: dict[str, Any] = {"seed": seed}
    if unit_time_limit_s is not None:
        protocol["unit_time_limit_s"] = unit_time_limit_s
    return {
        "workload": "alympics",
        "leaderboard": "alympics" if standard else None,
        "agents": [agent_spec(agent_name, move_timeout_s, llm)],
        "items": list(GAMES),
        "protocol": protocol,
        "params": {"suite": suite, "episodes": episodes},
    } | ({"cost_budget_usd": cost_budget_usd} if cost_budget_usd is not None else {})


class BenchmarkResult:
    """One agent's benchmark: `.composite_score`, `.categories`, `.summary()`. `score` is None
    when match sets did not run (a spent cost budget, a replay the cache lacks, a lost worker):
    such a benchmark is not scored, `not_scored` says why."""

    def __init__(
        self,
        agent: str,
        score: AlympicsScore | None,
        results: list[UnitResult],
        not_scored: str | None = None,
    ) -> None:
        self.agent, self.score, self.results, self.not_scored = agent, score, results, not_scored

    def _scored(self) -> AlympicsScore:
        if self.score is None:
            raise ValueError(f"{self.agent} was not scored: {self.not_scored}")
        return self.score

    @property
    def composite_score(self) -> float:
        return self._scored().composite_score

    @property
    def categories(self) -> dict[str, CategoryScore]:
        return {str(name): c for name, c in self._scored().categories.items()}

    def llm_usage(self) -> dict[str, Any]:
        """An llm agent's requests, tokens, cost and latency over the benchmark ({} for others)."""
        return usage_totals(llm_usages(self.results))

    def summary(self) -> str:
        lines = [
            format_breakdown(self.score)
            if self.score is not None
            else f"{self.agent} not scored: {self.not_scored}"
        ]
        usage = self.llm_usage()
        if usage:
            lines.append(
                f"LLM: {usage['requests']:,} requests ({usage['attempts']:,} sent, "
                f"{usage['reasks']:,} re-asks), {usage['prompt_tokens']:,} prompt + "
                f"{usage['completion_tokens']:,} completion tokens, ${usage['cost_usd']:.4f}, "
                f"mean latency {usage['mean_latency_s']:.3f} s"
            )
        return "\n".join(lines)

    def matches(self) -> list[dict[str, Any]]:
        """Per match set: game, opponent, measures, faults (the verbose view)."""
        return [
            {"item": r.item, "status": r.status, "reason": r.reason, **r.result}
            for r in self.results
        ]

    def to_json(self) -> dict[str, Any]:
        usage = self.llm_usage()
        scored = (
            self.score.model_dump(mode="json")
            if self.score is not None
            else {"agent": self.agent, "not_scored": self.not_scored}
        )
        return {**scored, **({"llm": usage} if usage else {}), "matches": self.matches()}


def result_of(batch: ValidatedBatch, results: list[UnitResult]) -> BenchmarkResult:
    """The benchmark of the batch's one agent; not scored when a match set did not run."""
    agent = batch.agents[0].name
    unplayed = [r for r in results if r.error_kind == "infrastructure"]
    if unplayed:
        why = f"{len(unplayed)} match set(s) did not run; first: {unplayed[0].reason}"
        return BenchmarkResult(agent, None, results, why)
    try:
        score = score_benchmark(matches_by_agent(results).get(agent, []), agent)
    except ValueError as exc:  # a batch that ended before every game was played (cancelled)
        return BenchmarkResult(agent, None, results, str(exc))
    return BenchmarkResult(agent, score, results)


def _run(spec: dict[str, Any]) -> BenchmarkResult:
    batch = validate_batch(spec, asker="operator")  # a Python caller in its own process
    return result_of(batch, execute_batch(batch))


async def run_alympics(
    agent_name: str = "builtin", episodes: int | None = None, seed: int = 0
) -> BenchmarkResult:
    """Run the standard suite for one agent in this process (in a thread: await-friendly)."""
    return await asyncio.to_thread(_run, benchmark_spec(agent_name, episodes, seed))
