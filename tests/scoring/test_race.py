"""Race scoring engine: the five dimension formulas, composite, ranking, verdict, and the two
inputs (dimension scores, raw measures) that reach them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.race import (
    DIMENSIONS,
    AgentScore,
    DimensionName,
    DimensionScores,
    RaceWeights,
    Thresholds,
    Verdict,
    calculate_composite,
    format_composite,
    format_race_results,
    race_verdict,
    rank_agents,
    resolve_measured,
    score_agents,
    score_race_dimensions,
)
from scoring.race_dimensions import (
    BuildOutcome,
    LintCounts,
    LintOutcome,
    TestCounts,
    TestOutcome,
    score_build,
    score_diff_size,
    score_lint,
    score_lint_outcome,
    score_speed,
    score_tests,
    score_tests_outcome,
)
from scoring.race_measures import (
    AgentMeasures,
    BaselineMeasures,
    CommandsConfigured,
    DiffStats,
    RaceMeasures,
    score_race,
)

ALL: list[DimensionName] = list(DIMENSIONS)

RUBRIC_TABLE = {
    "Claude Code": DimensionScores(build=100, tests=95, lint=90, diff_size=75, speed=80),
    "Codex CLI": DimensionScores(build=100, tests=80, lint=100, diff_size=95, speed=100),
    "Cursor CLI": DimensionScores(build=0, tests=0, lint=0, diff_size=60, speed=70),
}


def test_rubric_example_composites_follow_the_arithmetic():
    # SEED-NOTES: Claude Code is 9125/100 = 91.25 (the seed prints 91.0, a slip).
    scored = {a.name: a.composite for a in score_agents(RUBRIC_TABLE, RaceWeights())}
    assert scored == pytest.approx({"Claude Code": 91.25, "Codex CLI": 93.25, "Cursor CLI": 16.0})
    assert format_composite(scored["Codex CLI"]) == "93.3"  # the seed's display: half up
    assert format_composite(scored["Claude Code"]) == "91.3"
    assert format_composite(scored["Cursor CLI"]) == "16.0"


def test_rubric_example_ranking_and_output():
    ranked = rank_agents(score_agents(RUBRIC_TABLE, RaceWeights()))
    assert [r.name for r in ranked] == ["Codex CLI", "Claude Code", "Cursor CLI"]
    text = format_race_results(
        ranked,
        "implement JWT auth",
        race_verdict(ranked),
        branches={"Codex CLI": "hydra/codex-1708646400", "Claude Code": "hydra/claude-1"},
        merge_hint="Run `hydra merge codex-1708646400` to merge into your branch.",
    )
    # The seed's CLI output, line for line (but 91.3: SEED-NOTES), then the verdict and notes.
    assert text.splitlines() == [
        'Race Results — Task: "implement JWT auth"',
        "============================================",
        "",
        "  #1  Codex CLI      93.3 / 100    [BUILD: ✓] [TESTS: 80] [LINT: 100] [DIFF: 95] [SPEED: 100]",  # noqa: E501
        "  #2  Claude Code    91.3 / 100    [BUILD: ✓] [TESTS: 95] [LINT: 90]  [DIFF: 75] [SPEED: 80]",  # noqa: E501
        "  #3  Cursor CLI     16.0 / 100    [BUILD: ✗] [TESTS: --] [LINT: --]  [DIFF: 60] [SPEED: 70]",  # noqa: E501
        "",
        "Winner: Codex CLI (branch: hydra/codex-1708646400)",
        "Run `hydra merge codex-1708646400` to merge into your branch.",
        "Verdict: auto-merge",
        "",
        "Notes:",
        "  Cursor CLI: build failed: tests and lint not run",
    ]


def test_output_without_branches_or_hint_and_with_an_unmeasured_dimension():
    outcome = score_race_dimensions(
        {
            "a": DimensionScores(build=100, lint=100, diff_size=80),
            "bb": DimensionScores(build=100, lint=40, diff_size=100),
        },
        measured=["build", "lint", "diff_size"],
    )
    lines = format_race_results(outcome.agents).splitlines()
    # a: (3000 + 1500 + 1200) / 60 = 95.0; bb: (3000 + 600 + 1500) / 60 = 85.0
    assert lines[0] == "Race Results"
    assert (
        lines[3]
        == "  #1  a     95.0 / 100    [BUILD: ✓] [TESTS: --] [LINT: 100] [DIFF: 80]  [SPEED: --]"
    )
    assert (
        lines[4]
        == "  #2  bb    85.0 / 100    [BUILD: ✓] [TESTS: --] [LINT: 40]  [DIFF: 100] [SPEED: --]"
    )
    assert lines[5:] == ["", "Winner: a"]


def test_build_is_a_binary_gate():
    assert (score_build(0), score_build(1), score_build(137)) == (100, 0, 0)


def counts(passed: int, failed: int = 0) -> TestCounts:
    return TestCounts(passed=passed, failed=failed)


@pytest.mark.parametrize(
    ("agent", "baseline", "expected"),
    [
        (counts(10), counts(10), 100),  # all pass, nothing new
        (counts(8, 2), counts(10), 80 - 2 / 10 * 50),  # two regressions: 80 - 10 = 70
        (counts(11), counts(10), 100),  # 100 + 1/11*10 clamps to 100
        (counts(9, 2), counts(10), 9 / 11 * 100 + 1 / 11 * 10 - 1 / 10 * 50),
        (counts(0, 5), counts(5), 0),  # 0 - 50 clamps to 0
        (counts(0), counts(0), 0),  # no tests at all: pass rate 0
        (counts(3, 1), counts(0, 4), 75 + 0),  # baseline broken: no regression possible
    ],
)
def test_tests_formula(agent: TestCounts, baseline: TestCounts, expected: float):
    assert score_tests(agent, baseline) == pytest.approx(expected)


def test_tests_errors_count_as_not_passing():
    assert TestCounts(passed=3, failed=1, errors=1, skipped=4).total == 5
    assert score_tests(TestCounts(passed=3, errors=1), counts(3, 1)) == pytest.approx(75)


@pytest.mark.parametrize(
    ("agent", "baseline", "expected"),
    [
        ((0, 0), (0, 0), 100),
        (
            (2, 0),
            (0, 0),
            96,
        ),  # two new warnings: 100 - 4 (SEED-NOTES: the seed's 90 is illustrative)
        ((0, 1), (0, 0), 90),  # one new error
        ((0, 0), (3, 2), 100),  # resolved 5: 105 clamps to 100
        ((5, 0), (2, 1), 100 - 3 * 2),  # 3 new warnings, 1 error fixed; total grows: no bonus
        ((0, 20), (0, 0), 0),  # clamps at 0
    ],
)
def test_lint_formula(agent: tuple[int, int], baseline: tuple[int, int], expected: float):
    a = LintCounts(warnings=agent[0], errors=agent[1])
    b = LintCounts(warnings=baseline[0], errors=baseline[1])
    assert score_lint(a, b) == pytest.approx(expected)


def test_lint_resolution_bonus_after_penalties():
    # 1 new error (-10) but 15 issues resolved overall (+15): 105 -> 100; 8 resolved -> 98
    assert score_lint(LintCounts(warnings=0, errors=1), LintCounts(warnings=16, errors=0)) == 100
    assert score_lint(LintCounts(warnings=0, errors=1), LintCounts(warnings=9, errors=0)) == 98


@pytest.mark.parametrize(
    ("added", "removed", "files", "expected"),
    [
        (50, 50, 5, 100),  # churn 100, 5 files: both at 100
        (200, 100, 5, (100 - 200 / 400 * 40) * 0.6 + 40),  # churn 300 -> 80
        (400, 100, 10, 60 * 0.6 + (100 - 5 / 10 * 30) * 0.4),  # churn 500 -> 60; files 10 -> 85
        (1000, 500, 15, (60 - 1000 / 1000 * 40) * 0.6 + 70 * 0.4),  # churn 1500 -> 20
        (5000, 0, 35, 20 * 0.6 + (70 - 20 / 20 * 40) * 0.4),  # both floors: 20 and 30
        (10_000, 0, 200, 20 * 0.6 + 30 * 0.4),
    ],
)
def test_diff_size_formula(added: int, removed: int, files: int, expected: float):
    assert score_diff_size(added, removed, files) == pytest.approx(expected)


@given(st.integers(0, 5000), st.integers(0, 5000), st.integers(0, 200), st.integers(1, 500))
def test_diff_size_never_rewards_more_churn(added, removed, files, more):
    assert score_diff_size(added + more, removed, files) <= score_diff_size(added, removed, files)
    assert score_diff_size(added, removed, files + 1) <= score_diff_size(added, removed, files)


def test_speed_relative_to_fastest():
    assert score_speed({"a": 36.0, "b": 45.0, "c": 72.0}) == pytest.approx(
        {"a": 100, "b": 80, "c": 50}
    )
    assert score_speed({"only": 0.0}) == {"only": 100}
    with pytest.raises(ValueError, match="negative"):
        score_speed({"a": -1.0})


def test_unmeasured_dimension_is_renormalised_as_in_the_rubric():
    # No test command: build=30, lint=15, diff_size=15, speed=10 -> total 70 renormalised.
    scores = DimensionScores(build=100, lint=50, diff_size=80, speed=100)
    no_tests: list[DimensionName] = ["build", "lint", "diff_size", "speed"]
    assert calculate_composite(scores, RaceWeights(), no_tests) == pytest.approx(
        (100 * 30 + 50 * 15 + 80 * 15 + 100 * 10) / 70
    )
    # A measured dimension without a score is an error, never renormalised away.
    with pytest.raises(ValueError, match="tests: missing"):
        calculate_composite(scores, RaceWeights(), ALL)


def test_composite_needs_a_weighted_dimension():
    with pytest.raises(ValueError, match="no measured dimension"):
        calculate_composite(DimensionScores(speed=100), RaceWeights(speed=0), ["speed"])
    with pytest.raises(ValueError, match="no dimension is measured"):
        calculate_composite(DimensionScores(speed=100), RaceWeights(), [])
    with pytest.raises(ValueError, match="weights"):
        RaceWeights(build=0, tests=0, lint=0, diff_size=0, speed=0)


score_values = st.floats(0, 100, allow_nan=False)
weight_values = st.floats(0.01, 100, allow_nan=False)
partial_scores = st.builds(
    DimensionScores, **{d: st.one_of(st.none(), score_values) for d in DIMENSIONS}
).filter(lambda s: any(getattr(s, d) is not None for d in DIMENSIONS))


def given_dims(scores: DimensionScores) -> list[DimensionName]:
    return [d for d in DIMENSIONS if getattr(scores, d) is not None]


@given(partial_scores, st.builds(RaceWeights, **{d: weight_values for d in DIMENSIONS}))
def test_composite_stays_in_0_100(scores, weights):
    assert 0 <= calculate_composite(scores, weights, given_dims(scores)) <= 100 + 1e-9


@given(
    st.builds(DimensionScores, **{d: score_values for d in DIMENSIONS}),
    st.builds(RaceWeights, **{d: weight_values for d in DIMENSIONS}),
    st.sampled_from(DIMENSIONS),
)
def test_renormalised_weights_behave_as_if_the_dimension_never_existed(scores, weights, missing):
    unmeasured = [d for d in DIMENSIONS if d != missing]
    zero_weight = weights.model_copy(update={missing: 0.0})
    assert calculate_composite(scores, weights, unmeasured) == pytest.approx(
        calculate_composite(scores, zero_weight, ALL)
    )
    # ... and its value no longer matters at all.
    other_value = scores.model_copy(update={missing: 100 - (getattr(scores, missing) or 0)})
    assert calculate_composite(other_value, weights, unmeasured) == (
        calculate_composite(scores, weights, unmeasured)
    )


@given(partial_scores, weight_values, st.floats(0.1, 10))
def test_composite_is_invariant_to_weight_scale(scores, w, factor):
    weights = RaceWeights(build=w, tests=2 * w, lint=w, diff_size=w, speed=w / 2)
    scaled = RaceWeights(**{d: getattr(weights, d) * factor for d in DIMENSIONS})
    dims = given_dims(scores)
    assert calculate_composite(scores, scaled, dims) == pytest.approx(
        calculate_composite(scores, weights, dims)
    )


def ranked_with(*composites: float):
    return rank_agents(
        [
            AgentScore(name=f"agent{i}", scores=DimensionScores(build=c), composite=c)
            for i, c in enumerate(composites)
        ]
    )


@pytest.mark.parametrize(
    ("composites", "verdict"),
    [
        ((93.25, 91.25, 16.0), Verdict.AUTO_MERGE),
        ((85.0, 10.0), Verdict.AUTO_MERGE),  # "minimum": at the threshold merges
        ((84.99,), Verdict.REVIEW),
        ((30.0, 5.0), Verdict.REVIEW),
        ((29.99, 5.0), Verdict.ALL_FAILED),
        ((), Verdict.ALL_FAILED),
    ],
)
def test_verdict_thresholds(composites: tuple[float, ...], verdict: Verdict):
    assert race_verdict(ranked_with(*composites)) == verdict


def test_verdict_custom_thresholds():
    assert race_verdict(ranked_with(70.0), Thresholds(auto_merge_minimum=70)) == Verdict.AUTO_MERGE


def test_ties_share_a_rank_and_list_by_name():
    ranked = rank_agents(
        [
            AgentScore(name="b", scores=DimensionScores(build=50), composite=50),
            AgentScore(name="a", scores=DimensionScores(build=50), composite=50),
            AgentScore(name="c", scores=DimensionScores(build=10), composite=10),
        ]
    )
    assert [(r.rank, r.name) for r in ranked] == [(1, "a"), (1, "b"), (3, "c")]


# -- nonsense weights, thresholds and scores are refused ------------------------------------------


@pytest.mark.parametrize(
    "weights",
    [
        {"build": float("inf")},
        {"build": float("nan")},
        {"tests": -1.0},
        {"lint": 1e308},  # two of these would sum to infinity
        {"speed": 5e-324},  # too small to multiply exactly
    ],
)
def test_weights_must_be_finite_bounded_and_not_vanishing(weights: dict[str, float]):
    (name,) = weights
    with pytest.raises(ValueError, match=name):
        RaceWeights(**weights)


def test_thresholds_must_not_be_inverted_but_may_meet():
    with pytest.raises(ValueError, match=r"auto_merge_minimum \(10\) is below fail_maximum"):
        Thresholds(auto_merge_minimum=10, fail_maximum=50)
    meeting = Thresholds(auto_merge_minimum=50, fail_maximum=50)
    assert race_verdict(ranked_with(50.0), meeting) == Verdict.AUTO_MERGE
    assert race_verdict(ranked_with(49.9), meeting) == Verdict.ALL_FAILED


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.1, 100.1])
def test_scores_and_thresholds_stay_in_0_100(value: float):
    with pytest.raises(ValueError, match="build"):
        DimensionScores(build=value)
    with pytest.raises(ValueError, match="auto_merge_minimum"):
        Thresholds(auto_merge_minimum=value, fail_maximum=0)


any_weight = st.one_of(st.just(0.0), st.floats(1e-6, 1_000_000))
any_weights = (
    st.fixed_dictionaries({d: any_weight for d in DIMENSIONS})
    .filter(lambda w: any(w.values()))
    .map(lambda w: RaceWeights(**w))
)


@given(partial_scores, any_weights)
def test_composite_is_finite_and_in_range_for_every_accepted_weight(scores, weights):
    try:
        composite = calculate_composite(scores, weights, given_dims(scores))
    except ValueError:  # every measured dimension weighs 0
        return
    assert 0 <= composite <= 100 + 1e-9


# -- the race's rules on dimension scores (SEED-NOTES) ---------------------------------------------


def composites(agents: dict[str, DimensionScores], **kwargs) -> dict[str, float]:
    return {a.name: a.composite for a in score_race_dimensions(agents, **kwargs).agents}


def test_a_failed_build_makes_tests_and_lint_0_not_missing():
    # Formerly 29.09: tests and lint were renormalised away for this agent alone.
    # (0*30 + 0*30 + 0*15 + 60*15 + 70*10) / 100 = 16.0
    assert composites({"a": DimensionScores(build=0, diff_size=60, speed=70)}) == {"a": 16.0}
    # Formerly 53.5: the tests and lint it gave counted although the table shows "--".
    outcome = score_race_dimensions(
        {"a": DimensionScores(build=0, tests=80, lint=90, diff_size=60, speed=70)}
    )
    (agent,) = outcome.agents
    assert agent.composite == pytest.approx(16.0)
    assert (agent.scores.tests, agent.scores.lint) == (0, 0)
    assert agent.notes == ["build failed: tests and lint not run"]
    assert outcome.measured == ALL


def test_default_measured_is_what_some_agent_gives_plus_tests_and_lint_with_build():
    given = [DimensionScores(build=0, diff_size=60), DimensionScores(diff_size=100)]
    # build is given, so tests and lint are measured; speed is given by no one.
    assert resolve_measured(given) == ["build", "tests", "lint", "diff_size"]
    assert resolve_measured([DimensionScores(lint=50, speed=1)]) == ["lint", "speed"]
    assert resolve_measured(given, ["speed", "build"]) == ["build", "speed"]
    # b's build is measured (a gives one) but missing.
    with pytest.raises(ValueError, match=r"^agents\[1\]\.build: missing; the race measures build"):
        score_agents(
            {"a": DimensionScores(build=0, diff_size=60), "b": DimensionScores(diff_size=100)},
            RaceWeights(),
        )


def test_a_passed_build_must_give_every_measured_dimension():
    agents = {
        "a": DimensionScores(build=100, tests=80, lint=100, diff_size=95, speed=100),
        "b": DimensionScores(build=100, lint=100, diff_size=100, speed=90),
    }
    with pytest.raises(ValueError) as caught:
        score_agents(agents, RaceWeights())
    assert str(caught.value) == (
        "agents[1].tests: missing; the race measures tests (list the measured dimensions in "
        '"measured" to leave one out)'
    )


def test_measured_leaves_a_dimension_out_for_every_agent_alike():
    agents = {
        "a": DimensionScores(build=100, lint=50, diff_size=80, speed=100),
        "b": DimensionScores(build=0, diff_size=100, speed=50),
    }
    no_tests: list[DimensionName] = ["build", "lint", "diff_size", "speed"]
    # a: (3000 + 750 + 1200 + 1000) / 70 = 85.0; b: (0 + 0 + 1500 + 500) / 70 = 28.571...
    assert composites(agents, measured=no_tests) == pytest.approx({"a": 85.0, "b": 2000 / 70})
    with pytest.raises(ValueError, match=r"agents\[0\]\.speed: given, but the race does not"):
        score_agents(agents, RaceWeights(), ["build", "lint", "diff_size"])


@pytest.mark.parametrize("build", [0.5, 50.0, 99.9])
def test_build_is_0_or_100(build: float):
    with pytest.raises(ValueError, match=r"^agents\[0\]\.build: must be 0 or 100$"):
        score_agents({"a": DimensionScores(build=build, diff_size=1)}, RaceWeights())


@given(
    st.tuples(score_values, score_values),  # the failed agent's diff and speed
    st.tuples(score_values, score_values, score_values, score_values),  # the passed one's
)
def test_a_failed_build_never_outranks_a_passed_one_under_the_rubric_weights(failed, passed):
    # Failed: at most (15*100 + 10*100)/100 = 25; passed: at least 30 from the build alone.
    outcome = score_race_dimensions(
        {
            "failed": DimensionScores(
                build=0, tests=100, lint=100, diff_size=failed[0], speed=failed[1]
            ),
            "passed": DimensionScores(
                build=100, tests=passed[0], lint=passed[1], diff_size=passed[2], speed=passed[3]
            ),
        }
    )
    assert [a.name for a in outcome.agents] == ["passed", "failed"]


# -- one command's outcome -------------------------------------------------------------------------


def ran_tests(passed: int, failed: int = 0, exit_code: int = 0, **kw) -> TestOutcome:
    return TestOutcome(exit_code=exit_code, counts=TestCounts(passed=passed, failed=failed), **kw)


def test_tests_outcome_against_a_parsed_baseline():
    # 9 of 10 pass; baseline 12 passed: 90 - (12 - 9)/12 * 50 = 77.5
    result = score_tests_outcome(ran_tests(9, 1, exit_code=1), ran_tests(12))
    assert (result.score, result.notes) == (pytest.approx(77.5), [])


@pytest.mark.parametrize(
    ("baseline", "why"),
    [
        (TestOutcome(exit_code=2), "the baseline's output was not parsed"),
        (TestOutcome(exit_code=0, timed_out=True, counts=TestCounts(passed=3)), "timed out"),
        (None, "no baseline run"),
    ],
)
def test_tests_outcome_without_a_usable_baseline_drops_the_baseline_terms(baseline, why):
    # Formerly the baseline counted as 0 tests: 9 new tests, bonus 9/10*10, 90 + 9 = 99.
    result = score_tests_outcome(ran_tests(9, 1, exit_code=1), baseline)
    assert result.score == pytest.approx(90.0)
    (note,) = result.notes
    assert why in note and "no new-test bonus, no regression penalty" in note
    # Nor any regression penalty: 1 of 4 passing is 25, whatever the baseline had.
    assert score_tests_outcome(ran_tests(1, 3), baseline).score == pytest.approx(25.0)


@pytest.mark.parametrize(
    ("agent", "score", "note"),
    [
        (TestOutcome(exit_code=0), 100.0, "scored by the exit code"),
        (TestOutcome(exit_code=1), 0.0, "scored by the exit code"),
        (ran_tests(10, timed_out=True), 0.0, "tests timed out"),
        (TestOutcome(exit_code=0, timed_out=True), 0.0, "tests timed out"),
    ],
)
def test_tests_outcome_fallbacks(agent: TestOutcome, score: float, note: str):
    result = score_tests_outcome(agent, ran_tests(10))
    assert result.score == score
    assert any(note in n for n in result.notes)


def lint_run(warnings: int, errors: int, exit_code: int = 1, **kw) -> LintOutcome:
    return LintOutcome(
        exit_code=exit_code, counts=LintCounts(warnings=warnings, errors=errors), **kw
    )


@pytest.mark.parametrize(
    ("agent", "baseline", "score", "note"),
    [
        (lint_run(5, 1), lint_run(3, 0), 100 - 10 - 4, None),  # score_lint: 1 error, 2 warnings new
        (lint_run(3, 1), LintOutcome(exit_code=2), 100 - 10 - 6, "every finding counts as new"),
        (lint_run(3, 1), None, 84, "no baseline run"),
        (lint_run(0, 20), None, 0, "every finding counts as new"),  # clamps at 0
        (LintOutcome(exit_code=0), lint_run(3, 0), 100, "scored by the exit code"),
        (LintOutcome(exit_code=1), lint_run(3, 0), 0, "scored by the exit code"),
        (lint_run(0, 0, exit_code=0, timed_out=True), lint_run(0, 0), 0, "lint timed out"),
    ],
)
def test_lint_outcome(agent, baseline, score, note):
    result = score_lint_outcome(agent, baseline)
    assert result.score == pytest.approx(score)
    assert result.notes == [] if note is None else any(note in n for n in result.notes)


# -- a race from its raw measures ------------------------------------------------------------------


def measures(**kw) -> RaceMeasures:
    """The example race (arena/examples/scoring/race-raw-measures.json), as models."""
    base = {
        "task": "implement JWT auth",
        "baseline": BaselineMeasures(tests=ran_tests(40), lint=lint_run(3, 0)),
        "agents": [
            AgentMeasures(
                name="Claude Code",
                build=BuildOutcome(exit_code=0),
                tests=ran_tests(42),
                lint=lint_run(5, 0),
                diff=DiffStats(lines_added=150, lines_removed=30, files_changed=4),
                duration_s=45.0,
            ),
            AgentMeasures(
                name="Codex CLI",
                build=BuildOutcome(exit_code=0),
                tests=ran_tests(38, 2, exit_code=1),
                lint=lint_run(3, 0),
                diff=DiffStats(lines_added=40, lines_removed=10, files_changed=2),
                duration_s=36.0,
            ),
            AgentMeasures(
                name="Cursor CLI",
                build=BuildOutcome(exit_code=2),
                diff=DiffStats(lines_added=300, lines_removed=200, files_changed=12),
                duration_s=51.0,
            ),
        ],
    }
    return RaceMeasures(**{**base, **kw})


def test_score_race_by_hand():
    outcome = score_race(measures())
    by_name = {a.name: a for a in outcome.agents}
    claude, codex, cursor = by_name["Claude Code"], by_name["Codex CLI"], by_name["Cursor CLI"]
    # Claude: 42/42 pass, 2 new tests: 100 + 2/42*10 clamps to 100; lint 2 new warnings: 96;
    # churn 180: 100 - 80/400*40 = 92, 4 files: 100 -> 92*0.6 + 40 = 95.2; speed 36/45 = 80.
    assert claude.scores.model_dump() == pytest.approx(
        {"build": 100, "tests": 100, "lint": 96, "diff_size": 95.2, "speed": 80}
    )
    assert claude.composite == pytest.approx((3000 + 3000 + 96 * 15 + 95.2 * 15 + 800) / 100)
    # Codex: 38/40 = 95, 2 fewer passing than 40: -2/40*50 = -2.5 -> 92.5; the rest 100.
    assert codex.scores == DimensionScores(
        build=100, tests=92.5, lint=100, diff_size=100, speed=100
    )
    assert codex.composite == pytest.approx(97.75)
    # Cursor: build failed: tests and lint 0; churn 500: 60, 12 files: 100 - 7/10*30 = 79
    # -> 36 + 31.6 = 67.6; speed 36/51.
    assert cursor.scores.model_dump() == pytest.approx(
        {"build": 0, "tests": 0, "lint": 0, "diff_size": 67.6, "speed": 3600 / 51}
    )
    assert cursor.composite == pytest.approx((67.6 * 15 + 3600 / 51 * 10) / 100)
    assert cursor.notes == ["build failed: tests and lint not run"]
    assert [(a.rank, a.name) for a in outcome.agents] == [
        (1, "Codex CLI"),
        (2, "Claude Code"),
        (3, "Cursor CLI"),
    ]
    assert (outcome.winner, outcome.verdict, outcome.measured) == (
        "Codex CLI",
        Verdict.AUTO_MERGE,
        ALL,
    )


def test_score_race_with_an_unparsed_baseline_says_so():
    outcome = score_race(
        measures(
            baseline=BaselineMeasures(tests=TestOutcome(exit_code=1), lint=LintOutcome(exit_code=1))
        )
    )
    claude = next(a for a in outcome.agents if a.name == "Claude Code")
    codex = next(a for a in outcome.agents if a.name == "Codex CLI")
    # No bonus, no penalty: Claude 42/42 = 100, Codex 38/40 = 95 (not 92.5).
    # Lint without a baseline: Claude 5 warnings -> 90, Codex 3 warnings -> 94.
    assert (claude.scores.tests, codex.scores.tests) == (100, 95)
    assert (claude.scores.lint, codex.scores.lint) == (90, 94)
    assert any("tests: the baseline's output was not parsed" in n for n in codex.notes)
    assert any("lint: the baseline's output was not parsed" in n for n in codex.notes)


def test_an_unconfigured_command_leaves_the_composite_for_every_agent():
    race = measures()
    no_tests = race.model_copy(
        update={
            "configured": CommandsConfigured(tests=False),
            "baseline": BaselineMeasures(lint=lint_run(3, 0)),
            "agents": [a.model_copy(update={"tests": None}) for a in race.agents],
        }
    )
    outcome = score_race(no_tests)
    assert outcome.measured == ["build", "lint", "diff_size", "speed"]
    codex = next(a for a in outcome.agents if a.name == "Codex CLI")
    cursor = next(a for a in outcome.agents if a.name == "Cursor CLI")
    assert codex.scores.tests is None and codex.composite == pytest.approx(100.0)
    # Cursor: (0*30 + 0*15 + 67.6*15 + 3600/51*10) / 70
    assert cursor.composite == pytest.approx((67.6 * 15 + 3600 / 51 * 10) / 70)


def test_speed_is_measured_only_when_every_agent_has_a_duration():
    race = measures()
    untimed = race.model_copy(
        update={"agents": [a.model_copy(update={"duration_s": None}) for a in race.agents]}
    )
    outcome = score_race(untimed)
    assert outcome.measured == ["build", "tests", "lint", "diff_size"]
    codex = next(a for a in outcome.agents if a.name == "Codex CLI")
    assert codex.composite == pytest.approx((3000 + 2775 + 1500 + 1500) / 90)
    partly = race.model_copy(
        update={
            "agents": [
                race.agents[0],
                race.agents[1].model_copy(update={"duration_s": None}),
                race.agents[2],
            ]
        }
    )
    with pytest.raises(ValueError, match=r"^agents\[1\]\.duration_s: missing; speed is measured"):
        score_race(partly)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tests": None}, r"^agents\[0\]\.tests: missing; the race runs tests"),
        ({"lint": None}, r"^agents\[0\]\.lint: missing; the race runs lint"),
        ({"build": None}, r"^agents\[0\]\.build: missing; the race runs a build"),
    ],
)
def test_a_configured_command_missing_for_an_agent_is_refused(change, message):
    race = measures()
    broken = race.model_copy(
        update={"agents": [race.agents[0].model_copy(update=change), *race.agents[1:]]}
    )
    with pytest.raises(ValueError, match=message):
        score_race(broken)


def test_measures_of_an_unconfigured_command_are_refused():
    with pytest.raises(ValueError, match=r"^agents\[0\]\.lint: given, but the race runs no lint"):
        score_race(
            measures(
                configured=CommandsConfigured(lint=False),
                baseline=BaselineMeasures(tests=ran_tests(40)),
            )
        )
    with pytest.raises(ValueError, match=r"^baseline\.lint: given, but the race runs no lint"):
        score_race(measures(configured=CommandsConfigured(lint=False)))


def test_a_failed_or_timed_out_build_ignores_what_tests_and_lint_gave():
    race = measures()
    timed_out = race.agents[1].model_copy(
        update={"build": BuildOutcome(exit_code=0, timed_out=True)}
    )
    outcome = score_race(race.model_copy(update={"agents": [race.agents[0], timed_out]}))
    codex = next(a for a in outcome.agents if a.name == "Codex CLI")
    assert (codex.scores.build, codex.scores.tests, codex.scores.lint) == (0, 0, 0)
    assert codex.notes == ["build timed out", "build failed: tests and lint not run"]
    # 0 + 0 + 0 + 100*15 + 100*10 (36s is still the fastest of the two)
    assert codex.composite == pytest.approx(25.0)


def test_score_race_needs_weight_on_what_it_measures():
    race = measures(weights=RaceWeights(build=0, tests=0, lint=0, diff_size=0, speed=10))
    untimed = race.model_copy(
        update={"agents": [a.model_copy(update={"duration_s": None}) for a in race.agents]}
    )
    with pytest.raises(ValueError, match="no measured dimension carries weight"):
        score_race(untimed)


def test_race_measures_are_strict():
    with pytest.raises(ValueError, match="duplicate agent names"):
        measures(agents=[measures().agents[0], measures().agents[0]])
    with pytest.raises(ValueError, match="duration_s"):
        AgentMeasures(
            name="a",
            diff=DiffStats(lines_added=0, lines_removed=0, files_changed=0),
            duration_s=float("nan"),
        )
    with pytest.raises(ValueError, match="exit_code"):
        BuildOutcome(exit_code=10**30)
    with pytest.raises(ValueError, match="lines_added"):
        DiffStats(lines_added=10**400, lines_removed=0, files_changed=0)
    assert BuildOutcome(exit_code=-9).passed is False  # killed by a signal


outcomes = st.one_of(
    st.builds(
        TestOutcome,
        exit_code=st.integers(0, 2),
        timed_out=st.booleans(),
        counts=st.none()
        | st.builds(TestCounts, passed=st.integers(0, 50), failed=st.integers(0, 50)),
    ),
)
lint_outcomes = st.builds(
    LintOutcome,
    exit_code=st.integers(0, 2),
    timed_out=st.booleans(),
    counts=st.none() | st.builds(LintCounts, warnings=st.integers(0, 30), errors=st.integers(0, 9)),
)


@st.composite
def races(draw: st.DrawFn) -> RaceMeasures:
    n = draw(st.integers(1, 4))
    timed = draw(st.booleans())
    agents = [
        AgentMeasures(
            name=f"agent{i}",
            build=BuildOutcome(exit_code=draw(st.sampled_from([0, 0, 1]))),
            tests=draw(outcomes),
            lint=draw(lint_outcomes),
            diff=DiffStats(
                lines_added=draw(st.integers(0, 3000)),
                lines_removed=draw(st.integers(0, 3000)),
                files_changed=draw(st.integers(0, 60)),
            ),
            duration_s=draw(st.floats(0, 1000)) if timed else None,
        )
        for i in range(n)
    ]
    baseline = BaselineMeasures(
        tests=draw(st.none() | outcomes), lint=draw(st.none() | lint_outcomes)
    )
    return RaceMeasures(agents=agents, baseline=baseline)


@given(races())
def test_raw_measures_and_their_dimension_scores_rank_alike(race: RaceMeasures):
    # One code path: the dimension scores score_race reaches, given back as dimension scores,
    # give the same composites, ranks and verdict.
    raw = score_race(race)
    again = score_race_dimensions(
        {a.name: a.scores for a in raw.agents}, measured=raw.measured, thresholds=race.thresholds
    )
    assert [(a.rank, a.name, a.composite) for a in again.agents] == [
        (a.rank, a.name, a.composite) for a in raw.agents
    ]
    assert (again.verdict, again.winner) == (raw.verdict, raw.winner)
    for agent in raw.agents:
        assert 0 <= agent.composite <= 100 + 1e-9
        if agent.scores.build == 0:
            assert (agent.scores.tests, agent.scores.lint) == (0, 0)


MEASURED = ["build", "speed"]


def speed_for(composite: float) -> DimensionScores:
    """Build passed (weight 30) and a speed (weight 10): composite = (3000 + 10 speed) / 40."""
    return DimensionScores(build=100, speed=(composite * 40 - 3000) / 10)


@pytest.mark.parametrize(
    ("first", "second", "tie"),
    [
        (85.0, 85.0, True),  # exactly tied: the name order must not pick the merge
        (85.04, 84.96, True),  # both read 85.0 / 100
        (85.1, 84.9, False),  # one is ahead as shown
    ],
)
def test_a_tie_at_the_top_is_for_a_person_to_decide(first: float, second: float, tie: bool):
    """Issue 20, item 3: two agents tied at 85.00 made the first by name the winner and the
    verdict auto-merge."""
    agents = {"alpha": speed_for(first), "beta": speed_for(second)}
    outcome = score_race_dimensions(agents, measured=MEASURED)
    assert [a.composite for a in outcome.agents] == pytest.approx([first, second])
    if tie:
        assert outcome.verdict is Verdict.REVIEW
        assert (outcome.winner, outcome.tied) == (None, ["alpha", "beta"])
        text = format_race_results(outcome.agents, "t", outcome.verdict)
        assert "Winner: none: alpha, beta tie at 85.0 / 100" in text
    else:
        assert outcome.verdict is Verdict.AUTO_MERGE
        assert (outcome.winner, outcome.tied) == ("alpha", [])


def test_a_tie_below_the_merge_line_keeps_its_verdict():
    broken = DimensionScores(build=0, speed=80)  # composite 20, under fail_maximum (30)
    failed = score_race_dimensions({"a": broken, "b": broken}, measured=MEASURED)
    assert failed.verdict is Verdict.ALL_FAILED and failed.tied == ["a", "b"]
    review = score_race_dimensions({"a": speed_for(80), "b": speed_for(80)}, measured=MEASURED)
    assert review.verdict is Verdict.REVIEW and review.winner is None
