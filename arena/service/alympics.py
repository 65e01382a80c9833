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

from scoring.alympics import GAMES, AlympicsScore, CategoryScore, format_breakdown
from scoring.alympics_benchmark import MatchMeasures, score_benchmark
from tasks.execute import execute_batch
from tasks.validation import InputError
from tasks.workloads import validate_batch
from tasks.workloads.alympics import matches_by_agent
from tasks.workloads.base import UnitResult, ValidatedBatch

__all__ = ["BenchmarkResult", "MatchMeasures", "benchmark_spec", "run_alympics", "score_benchmark"]


def agent_spec(agent_name: str, timeout_s: float | None = None) -> dict[str, Any]:
    """`builtin`, `package.module:factory`, or an `http(s)://` endpoint (`timeout_s`: its
    per-move timeout; other agents are bounded by the unit's time limit)."""
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
        "agents": [agent_spec(agent_name, move_timeout_s)],
        "items": list(GAMES),
        "protocol": protocol,
        "params": {"suite": suite, "episodes": episodes},
    }


class BenchmarkResult:
    """One agent's benchmark: `.composite_score`, `.categories`, `.summary()`."""

    def __init__(self, score: AlympicsScore, results: list[UnitResult]) -> None:
        self.score = score
        self.results = results

    @property
    def agent(self) -> str:
        return self.score.agent

    @property
    def composite_score(self) -> float:
        return self.score.composite_score

    @property
    def categories(self) -> dict[str, CategoryScore]:
        return {str(name): c for name, c in self.score.categories.items()}

    def summary(self) -> str:
        return format_breakdown(self.score)

    def matches(self) -> list[dict[str, Any]]:
        """Per match set: game, opponent, measures, faults (the verbose view)."""
        return [
            {"item": r.item, "status": r.status, "reason": r.reason, **r.result}
            for r in self.results
        ]

    def to_json(self) -> dict[str, Any]:
        return {**self.score.model_dump(mode="json"), "matches": self.matches()}


def result_of(batch: ValidatedBatch, results: list[UnitResult]) -> BenchmarkResult:
    agent = batch.agents[0].name
    return BenchmarkResult(score_benchmark(matches_by_agent(results)[agent], agent), results)


def _run(spec: dict[str, Any]) -> BenchmarkResult:
    batch = validate_batch(spec)
    return result_of(batch, execute_batch(batch))


async def run_alympics(
    agent_name: str = "builtin", episodes: int | None = None, seed: int = 0
) -> BenchmarkResult:
    """Run the standard suite for one agent in this process (in a thread: await-friendly)."""
    return await asyncio.to_thread(_run, benchmark_spec(agent_name, episodes, seed))
