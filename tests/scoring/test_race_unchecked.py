"""A race in which some check could not run is never auto-merged (issue 22, item 3): the verdict
is review, with the reason, however high the winner scored; the scores themselves are those of
the seed's formulas, unchanged."""

from __future__ import annotations

import pytest

from scoring.race import Verdict, format_race_results, race_verdict
from scoring.race_dimensions import TestCounts, TestOutcome
from scoring.race_measures import AgentMeasures, DiffStats, RaceMeasures, score_race


def clean(name: str, passed: int = 6) -> AgentMeasures:
    return AgentMeasures(
        name=name,
        tests=TestOutcome(exit_code=0, counts=TestCounts(passed=passed, failed=0)),
        diff=DiffStats(lines_added=10, lines_removed=0, files_changed=1),
    )


def race(*unchecked: str, passed: int = 6) -> RaceMeasures:
    return RaceMeasures(
        configured={"build": False, "tests": True, "lint": False},
        agents=[clean("a", passed)],
        unchecked=list(unchecked),
    )


def test_an_unchecked_agent_holds_a_winner_back_from_auto_merge() -> None:
    scored = score_race(race())
    held = score_race(race("ghost"))
    assert (scored.verdict, scored.review_reason, scored.unchecked) == (
        Verdict.AUTO_MERGE,
        None,
        [],
    )
    assert held.verdict is Verdict.REVIEW
    assert held.review_reason == "ghost could not be checked"
    assert held.unchecked == ["ghost"]
    assert held.agents == scored.agents and held.winner == scored.winner == "a"  # same scores
    text = format_race_results(held.agents, "t", held.verdict, review_reason=held.review_reason)
    assert "Verdict: review (ghost could not be checked)" in text
    # The baseline's check counts too (its name starts with '@': no agent's can).
    assert score_race(race("@baseline")).verdict is Verdict.REVIEW


def test_below_the_auto_merge_minimum_nothing_changes() -> None:
    outcome = score_race(race("ghost", passed=0))  # 0 passed of 0: tests 0 -> composite low
    assert outcome.verdict is not Verdict.AUTO_MERGE
    assert outcome.review_reason is None


def test_race_verdict_takes_the_unchecked() -> None:
    ranked = score_race(race()).agents
    assert race_verdict(ranked) is Verdict.AUTO_MERGE
    assert race_verdict(ranked, unchecked=["x"]) is Verdict.REVIEW


def test_an_unchecked_name_cannot_be_a_measured_agent() -> None:
    with pytest.raises(ValueError, match=r"unchecked: \['a'\] are measured agents"):
        race("a")
