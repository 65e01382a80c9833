"""How a race reads to people: the seed's CLI layout for a race's results and for a board."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scoring.race import (
    AgentScore,
    DimensionScores,
    RankedAgent,
    Verdict,
    format_race_results,
    rank_agents,
)
from scoring.race_tests import TestChanges
from tasks.workloads.base import LeaderboardEntry
from tasks.workloads.race_environments import format_environments
from tasks.workloads.race_spec import BASELINE


def _ranked(rows: Sequence[dict[str, Any]]) -> list[RankedAgent]:
    return [
        RankedAgent(
            rank=row["rank"],
            name=row["name"],
            composite=row["composite"],
            scores=DimensionScores.model_validate(row["scores"], strict=False),
        )
        for row in rows
    ]


def format_results(summary: dict[str, Any], batch_id: str) -> str:
    """`arena race results`: ranking, winner and merge hint, then errors and notes. A race that
    failed at the start has no ranking: its reason is the command's one error line (exit 1)."""
    ranked = _ranked(summary["agents"])
    branches = {row["name"]: row["branch"] for row in summary["agents"]}
    verdict = Verdict(summary["verdict"])
    hint = f"Run `arena race merge {batch_id}` to merge into {summary['base']}."
    if verdict is not Verdict.AUTO_MERGE:
        hint += f" (verdict {verdict.value}: add --force)"
    merge_hint = hint if ranked else None
    reason = summary.get("review_reason")
    lines = [format_race_results(ranked, summary["task"], verdict, branches, merge_hint, reason)]
    counted = [(row["name"], _test_counts(row)) for row in summary["agents"]]
    if any(text for _, text in counted):
        lines += ["", "Tests:"] + [f"  {name}: {text}" for name, text in counted if text]
    changed = [(row["name"], _changed_tests(row)) for row in summary["agents"]]
    if any(text for _, text in changed):  # by name: what the seed's counts cannot see
        lines += ["", "Baseline tests:"] + [f"  {name}: {text}" for name, text in changed if text]
    diffs = [(row["name"], _diff_counts(row)) for row in summary["agents"]]
    if any(text for _, text in diffs):  # the raw numbers DIFF scores (its cell is 0-100)
        lines += ["", "Diff:"] + [f"  {name}: {text}" for name, text in diffs if text]
    errors = summary.get("errors") or {}
    if verdict is Verdict.FAILED:  # the base's error is the race's: `arena:` says it, once
        errors = {name: why for name, why in errors.items() if name != BASELINE}
    if errors:
        lines += ["", "Not scored (the check could not run):"]
        lines += [f"  {name}: {reason}" for name, reason in sorted(errors.items())]
    notes = [(row["name"], note) for row in summary["agents"] for note in row.get("notes", [])]
    if notes:
        lines += ["", "Notes:"] + [f"  {name}: {note}" for name, note in notes]
    lines += format_environments(summary)  # the versions on record
    return "\n".join(lines)


TEST_WORDS = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")


def _test_counts(row: dict[str, Any]) -> str:
    """An agent's parsed test counts ("9 passed, 1 failed, 0 errors, 1 xfailed"): passed, failed
    and errors always, skipped, xfailed and xpassed where there are any; "" where none parsed."""
    tests = (row.get("measures") or {}).get("tests") or {}
    counts = tests.get("counts") or {}
    if not counts:
        return ""
    shown = [w for w in TEST_WORDS if w in TEST_WORDS[:3] or counts.get(w)]
    return ", ".join(f"{counts.get(w, 0)} {w}" for w in shown)


def _diff_counts(row: dict[str, Any]) -> str:
    """An agent's diff against the base as `git diff --stat` counts it ("+14 −0, 2 files");
    "" where the diff was not measured."""
    diff = (row.get("measures") or {}).get("diff") or {}
    if not diff:
        return ""
    files = diff.get("files_changed", 0)
    return (
        f"+{diff.get('lines_added', 0)} \u2212{diff.get('lines_removed', 0)}, "
        f"{files} file{'' if files == 1 else 's'}"
    )


def _changed_tests(row: dict[str, Any]) -> str:
    """The baseline's tests an agent broke, skipped or no longer runs, named (up to 10 of
    each; --json has them all); "" where none, or where they were not compared."""
    changes = row.get("test_changes")
    if not changes:
        return ""
    return TestChanges.model_validate(changes, strict=False).describe(limit=10)


def format_board(name: str, entries: Sequence[LeaderboardEntry]) -> str:
    """A race board in the seed's layout (each agent's latest race on this protocol)."""
    scored = [
        AgentScore(
            name=e.agent,
            composite=e.score,
            scores=DimensionScores.model_validate(e.stats["scores"], strict=False),
        )
        for e in entries
    ]
    ranked = rank_agents(scored)
    task = entries[0].stats.get("task") if entries else None
    text = format_race_results(ranked, task)
    return text.replace("Race Results", f"Race Leaderboard {name}", 1)
