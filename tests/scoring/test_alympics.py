"""Alympics rubric: normalisation bounds and clamping, categories, composite, breakdown text."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from scoring._common import format_half_up
from scoring.alympics import (
    BOUNDS,
    CATEGORY_WEIGHTS,
    GAME_WEIGHTS,
    GAMES,
    AlympicsInput,
    composite_score,
    format_breakdown,
    normalise,
    score_alympics,
)

ROOT = Path(__file__).resolve().parents[2]
# Copied verbatim from the "Example Output" block of shared/seeds/alympics-rubric.md.
SEED_OUTPUT = Path(__file__).with_name("alympics_example_output.txt")
EXAMPLE = json.loads(
    (ROOT / "arena" / "examples" / "scoring" / "alympics-example.json").read_text()
)


@pytest.mark.parametrize(
    ("game", "raw", "expected"),
    [
        ("prisoners_dilemma", 1.0, 0),  # mutual defection
        ("prisoners_dilemma", 3.0, 100),  # mutual cooperation
        ("prisoners_dilemma", 2.0, 50),
        ("prisoners_dilemma", 5.0, 100),  # exploiting a cooperator clamps
        ("prisoners_dilemma", 0.0, 0),  # being exploited clamps
        ("public_goods", 0.0, 0),
        ("public_goods", 10.0, 100),
        ("auction", 25.0, 50),
        ("auction", -3.0, 0),
        ("colonel_blotto", 0.6, 60),
        ("congestion", -20.0, 0),
        ("congestion", -1.0, 100),
        ("congestion", -10.5, 50),
    ],
)
def test_normalisation_uses_the_rubric_bounds(game, raw, expected):
    assert normalise(game, raw) == pytest.approx(expected)


@given(st.sampled_from(GAMES), st.floats(-1e6, 1e6, allow_nan=False))
def test_normalised_scores_stay_in_0_100(game, raw):
    assert 0 <= normalise(game, raw) <= 100


def test_weights_match_the_rubric():
    assert sum(CATEGORY_WEIGHTS.values()) == pytest.approx(1.0)
    for weights in GAME_WEIGHTS.values():
        assert sum(weights.values()) == pytest.approx(1.0)
    assert set(BOUNDS) == set(GAMES) == set(GAME_WEIGHTS["robustness"])


def test_rubric_example_categories_and_composite():
    result = score_alympics(AlympicsInput.model_validate(EXAMPLE))
    cats = {name: c.score for name, c in result.categories.items()}
    assert cats == pytest.approx(
        {"strategic": 85.0, "cooperation": 60.0, "fairness": 78.2, "robustness": 65.0}
    )
    # SEED-NOTES: from the printed categories the composite is 73.0 (the seed prints 72) ...
    assert composite_score(
        {"strategic": 85, "cooperation": 60, "fairness": 78, "robustness": 65}
    ) == pytest.approx(73.0)
    # ... and from the unrounded fairness 78.2 it is 73.05.
    assert result.composite_score == pytest.approx(73.05)


def test_breakdown_text_has_the_rubric_format():
    seed_block = SEED_OUTPUT.read_text().rstrip("\n")
    # Our figures differ from the seed's only where SEED-NOTES says the seed is wrong.
    expected = seed_block.replace("builtin scored 72/100", "builtin scored 73/100").replace(
        "fairness             78.0", "fairness             78.2"
    )
    assert format_breakdown(score_alympics(AlympicsInput.model_validate(EXAMPLE))) == expected


def test_input_must_give_every_pair_the_rubric_weights():
    broken = json.loads(json.dumps(EXAMPLE))
    del broken["games"]["auction"]["fairness"]
    with pytest.raises(ValidationError, match=re.escape("games.auction.fairness: missing")):
        AlympicsInput.model_validate(broken)
    del broken["games"]["auction"]
    with pytest.raises(ValidationError, match=re.escape("games.auction")):
        AlympicsInput.model_validate(broken)


def test_input_refuses_pairs_the_rubric_does_not_weight_and_unknown_games():
    extra = json.loads(json.dumps(EXAMPLE))
    extra["games"]["colonel_blotto"]["cooperation"] = 50
    with pytest.raises(ValidationError, match="does not contribute to cooperation"):
        AlympicsInput.model_validate(extra)
    unknown = json.loads(json.dumps(EXAMPLE))
    unknown["games"]["chess"] = {"strategic": 50}
    with pytest.raises(ValidationError, match="chess"):
        AlympicsInput.model_validate(unknown)


percent = st.floats(0, 100, allow_nan=False)


@st.composite
def alympics_inputs(draw):
    games = {}
    for game in GAMES:
        games[game] = {c: draw(percent) for c, w in GAME_WEIGHTS.items() if game in w}
    return AlympicsInput.model_validate({"agent": "x", "games": games})


@given(alympics_inputs())
def test_composite_and_categories_stay_in_0_100(data):
    result = score_alympics(data)
    assert 0 <= result.composite_score <= 100 + 1e-9
    assert all(0 <= c.score <= 100 + 1e-9 for c in result.categories.values())


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 100.5, -1])
def test_non_finite_or_out_of_range_values_are_refused_by_name(value: float):
    games = {**EXAMPLE["games"], "auction": {**EXAMPLE["games"]["auction"], "fairness": value}}
    with pytest.raises(ValidationError, match=r"games\.auction\.fairness"):
        AlympicsInput.model_validate({**EXAMPLE, "games": games})


def test_displays_round_exact_decimal_halves_up_even_when_the_float_falls_below():
    """Fairness 0*0.4 + 1*0.3 + 24*0.3 is 7.5 on paper and 7.499999999999999 in floats: the
    summary shows 8 (half up, as the rubric rounds), never 7 (issue 20, item 3)."""
    data = json.loads(json.dumps(EXAMPLE))
    for game, value in {"public_goods": 0, "auction": 1, "congestion": 24}.items():
        data["games"][game]["fairness"] = value
    result = score_alympics(AlympicsInput.model_validate(data))
    fairness = result.categories["fairness"].score
    assert fairness < 7.5 and fairness == pytest.approx(7.5)  # the float falls just below
    text = format_breakdown(result)
    assert "fairness: 8" in text.splitlines()[0]
    assert re.search(r"^  fairness\s+7\.5\s", text, re.MULTILINE)


@pytest.mark.parametrize(
    ("value", "places", "shown"),
    [
        (math.nextafter(27.5, 0), 0, "28"),  # the fairness, a hair below the half
        (math.nextafter(72.5, 0), 0, "73"),  # and its composite
        (1.15 * 100, 0, "115"),  # 114.99999999999999
        (93.25, 1, "93.3"),  # the race rubric's own example
        (27.4999, 0, "27"),  # a real difference at 4 places still rounds down
        (math.nextafter(27.5, 100), 0, "28"),
    ],
)
def test_half_up_settles_the_float_to_nine_places_first(value: float, places: int, shown: str):
    assert format_half_up(value, places) == shown
