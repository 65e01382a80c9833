"""Prisoner's Dilemma: payoffs, the rubric's bounds, baselines and measures."""

from __future__ import annotations

import pytest

from scoring.alympics import normalise
from tests.workers.games.helpers import Scripted, payoffs_of, play
from workers.games import BASELINES, InvalidAction, game_measures
from workers.games.prisoners_dilemma import AlwaysDefect, PrisonersDilemma, TitForTat


@pytest.mark.parametrize(
    ("actions", "payoffs"),
    [(["C", "C"], [3, 3]), (["C", "D"], [0, 5]), (["D", "C"], [5, 0]), (["D", "D"], [1, 1])],
)
def test_payoff_matrix(actions, payoffs):
    assert payoffs_of(PrisonersDilemma(1), actions) == payoffs


@pytest.mark.parametrize(
    ("action", "parsed"),
    [("C", "C"), ("d", "D"), (" cooperate ", "C"), ("DEFECT", "D")],
)
def test_parse_accepts_letters_and_words(action, parsed):
    assert PrisonersDilemma(1).parse_action(0, action) == parsed


@pytest.mark.parametrize("action", ["X", "", None, 1, True, ["C"], {"action": "C"}])
def test_parse_rejects_anything_else(action):
    with pytest.raises(InvalidAction, match='"C" or "D"'):
        PrisonersDilemma(1).parse_action(0, action)


def test_mutual_defection_is_0_and_mutual_cooperation_100():
    defect = game_measures([play(PrisonersDilemma(100), [AlwaysDefect(), AlwaysDefect()])])
    cooperate = game_measures([play(PrisonersDilemma(100), [TitForTat(), TitForTat()])])
    assert defect["raw"] == 1.0
    assert normalise("prisoners_dilemma", defect["raw"]) == 0 == defect["strategic"]
    assert cooperate["raw"] == 3.0
    assert normalise("prisoners_dilemma", cooperate["raw"]) == 100 == cooperate["strategic"]


def test_tit_for_tat_copies_the_last_move():
    record = play(PrisonersDilemma(6), [TitForTat(), Scripted("D", "C", "C", "D", "D", "C")])
    assert [a[0] for a in record.actions] == ["C", "D", "C", "C", "D", "D"]


def test_measures_hand_checked():
    # Agent: C, D, D, C against tit-for-tat: C, C, D, D -> payoffs 3, 5, 1, 0.
    record = play(PrisonersDilemma(4), [Scripted("C", "D", "D", "C"), TitForTat()])
    assert [p[0] for p in record.payoffs] == [3, 5, 1, 0]
    measures = game_measures([record])
    assert measures == {"raw": 9 / 4, "strategic": 62.5, "faults": 0.0, "cooperation": 50.0}
    assert game_measures([record], player=1)["cooperation"] == 50.0


def test_measures_average_rounds_over_episodes():
    first = play(PrisonersDilemma(2), [Scripted("C"), Scripted("C")])  # 3, 3
    second = play(PrisonersDilemma(2), [Scripted("D"), Scripted("D")])  # 1, 1
    measures = game_measures([first, second])
    assert measures["raw"] == 2.0
    assert measures["cooperation"] == 50.0


def test_baselines_are_the_rubric_ones():
    assert set(BASELINES["prisoners_dilemma"]) == {"tit-for-tat", "always-defect"}
