"""A race's checks reduced: their raw measures scored together (scoring.race_measures.score_race:
tests and lint against the baseline, speed against the fastest agent), and the summary `arena race
results` prints: ranking, verdict, notes, errors and their measures. A race whose base's
environment could not be built is not scored: verdict "failed", with `failed_reason`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scoring.race import RaceOutcome, Verdict
from scoring.race_dimensions import BuildOutcome, LintOutcome, TestOutcome
from scoring.race_measures import (
    AgentMeasures,
    BaselineMeasures,
    RaceMeasures,
    score_race,
)
from scoring.race_measures import DiffStats as ScoredDiff
from scoring.race_tests import TestChanges, compare_cases
from tasks.workloads.base import UnitResult, ValidatedBatch
from tasks.workloads.race_environments import environments_of
from tasks.workloads.race_spec import BASELINE, RaceAgentSpec, RaceItem, RaceParams
from workers.race.check import BASE_ENVIRONMENT_FAILED, CheckError

# A unit's error reason is the exception's type and message (tasks/execute.py, describe).
ENVIRONMENT = f"{CheckError.__name__}: environment: "  # a check whose environment failed
# What environment.py adds when another check of the race built (and failed) it first.
BUILT_BEFORE = " (this environment's build failed)"


def _outcome(run: dict[str, Any] | None, kind: type[Any]) -> Any:
    if run is None:
        return None
    fields = {
        "exit_code": run["exit_code"] if run["exit_code"] is not None else -1,
        "timed_out": run["timed_out"],
    }
    if kind is TestOutcome:
        fields |= {"counts": run["counts"], "runner": run["runner"]}
    elif kind is LintOutcome:
        fields |= {"counts": run["counts"], "linter": run["linter"]}
    return kind.model_validate(fields, strict=False)


def test_changes(
    baseline: dict[str, Any] | None, branch: dict[str, Any] | None
) -> TestChanges | None:
    """What a branch's test run did to the baseline's tests, by name (scoring.race_tests):
    None when either run is missing or timed out (a run cut short names only part of them)."""
    if not baseline or not branch or baseline.get("timed_out") or branch.get("timed_out"):
        return None
    return compare_cases(baseline.get("cases"), branch.get("cases"))


def agent_measures(
    agents: dict[str, RaceAgentSpec],
    by_agent: dict[str, UnitResult],
    baseline_tests: dict[str, Any] | None = None,
) -> list[AgentMeasures]:
    """The raw measures of each agent whose check ran (an error result has none), its tests
    compared by name with `baseline_tests` (the baseline's test run)."""
    return [
        AgentMeasures(
            name=name,
            build=_outcome(r.result["build"], BuildOutcome),
            tests=_outcome(r.result["tests"], TestOutcome),
            lint=_outcome(r.result["lint"], LintOutcome),
            diff=ScoredDiff.model_validate(r.result["diff"], strict=False),
            duration_s=agents[name].duration(),
            test_changes=test_changes(baseline_tests, r.result["tests"]),
        )
        for name, r in by_agent.items()
        if name != BASELINE and r.status == "ok"
    ]


def score_measures(
    item: RaceItem,
    params: RaceParams,
    base_raw: dict[str, Any],
    measures: list[AgentMeasures],
    unchecked: list[str],
) -> RaceOutcome:
    """The race scored (scoring.race_measures.score_race) against the baseline's tests and
    lint; `unchecked`: the checks that could not run (the race is then never auto-merged)."""
    return score_race(
        RaceMeasures(
            task=item.task,
            weights=params.weights,
            thresholds=params.thresholds,
            configured=params.configured(),
            baseline=BaselineMeasures(
                tests=_outcome(base_raw.get("tests"), TestOutcome),
                lint=_outcome(base_raw.get("lint"), LintOutcome),
            ),
            agents=measures,
            unchecked=unchecked,
        )
    )


def environment_failure(result: UnitResult | None) -> str | None:
    """Why a check's environment could not be built (its error reason less the exception's name,
    "environment: " and the note that another check built it first); None for any other."""
    reason = (result.reason or "") if result is not None and result.status == "error" else ""
    if not reason.startswith(ENVIRONMENT):
        return None
    return reason.removeprefix(ENVIRONMENT).removesuffix(BUILT_BEFORE)


def repeats_base(result: UnitResult, base_failed: str) -> bool:
    """An agent's error that only repeats the base's environment failure: its check said it has
    the base's environment (workers/race/check.py), or its environment failed the same way."""
    own = environment_failure(result)
    return own is not None and (own.startswith(BASE_ENVIRONMENT_FAILED) or own == base_failed)


def failed_summary(
    item: RaceItem, results: Sequence[UnitResult], base_failed: str
) -> dict[str, Any]:
    """A race that failed at the start, its base's environment not built: nothing is scored or
    ranked (an agent whose branch built an environment of its own has no baseline to be
    compared with), and the agents' errors that only repeat the base's are left out."""
    errors = {
        r.agent: r.reason or "error"
        for r in results
        if r.status == "error" and (r.agent == BASELINE or not repeats_base(r, base_failed))
    }
    return {
        "task": item.task,
        "repo": item.repo,
        "base": item.base,
        "base_commit": None,
        "verdict": Verdict.FAILED.value,
        "failed_reason": f"{BASE_ENVIRONMENT_FAILED}: {base_failed}",
        "winner": None,
        "winner_branch": None,
        "tied": [],
        "review_reason": None,
        "measured": [],
        "agents": [],
        "errors": errors,
        "baseline": {"error": errors[BASELINE]},
    }


def baseline_measures(base_raw: dict[str, Any]) -> dict[str, Any]:
    """The baseline's commit and runs as the summary shows them: its tests' names are counted
    (`named_tests`), not listed (every agent's changes name the ones that matter)."""
    shown = {k: base_raw.get(k) for k in ("commit", "build", "tests", "lint")}
    tests = shown.get("tests")
    if tests:
        cases = tests.get("cases")
        named = len(cases) if cases is not None else None
        shown["tests"] = {**{k: v for k, v in tests.items() if k != "cases"}, "named_tests": named}
    return shown


def reduce_race(batch: ValidatedBatch, results: Sequence[UnitResult]) -> dict[str, Any]:
    """The race scored from its checks' raw measures (scoring.race_measures.score_race), and the
    summary `arena race results` prints: ranking, verdict, notes, errors and their measures; or,
    when the base's environment could not be built, the race failed at the start (one reason)."""
    item: RaceItem = batch.items[0]
    agents = {a.name: a for a in batch.agents}
    by_agent = {r.agent: r for r in results}
    baseline = by_agent.get(BASELINE)
    base_failed = environment_failure(baseline)
    if base_failed is not None:
        return failed_summary(item, results, base_failed)
    base_ok = baseline is not None and baseline.status == "ok"
    base_raw = baseline.result if baseline is not None and base_ok else {}
    measures = agent_measures(agents, by_agent, base_raw.get("tests"))
    errors = {r.agent: r.reason or "error" for r in results if r.status == "error"}
    unchecked = sorted(errors)  # the baseline as @baseline: no agent name starts with @
    outcome = None
    if measures:
        outcome = score_measures(item, batch.params, base_raw, measures, unchecked)
    measured = {m.name: m.model_dump(mode="json", exclude={"name"}) for m in measures}
    ranked = [
        {
            **a.model_dump(mode="json"),
            "branch": agents[a.name].branch,
            "commit": by_agent[a.name].result["commit"],
            "measures": measured[a.name],
        }
        for a in (outcome.agents if outcome else [])
    ]
    summary = {
        "task": item.task,
        "repo": item.repo,
        "base": item.base,
        "base_commit": base_raw.get("commit"),
        "verdict": outcome.verdict.value if outcome is not None else Verdict.ALL_FAILED.value,
        "failed_reason": None,  # why a race failed at the start (failed_summary)
        "winner": outcome.winner if outcome else None,
        "winner_branch": agents[outcome.winner].branch if outcome and outcome.winner else None,
        "tied": list(outcome.tied) if outcome else [],
        "review_reason": outcome.review_reason if outcome else None,
        "measured": list(outcome.measured) if outcome else [],
        "agents": ranked,
        "errors": errors,
        "baseline": baseline_measures(base_raw)
        if base_ok
        else {"error": errors.get(BASELINE, "no baseline check")},
        "environments": environments_of(results),  # what each held (race_environments.py)
    }
    return summary
