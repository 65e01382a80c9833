"""Our Prisoner's Dilemma against the Axelrod library's own Match: same moves, same per-turn
payoffs. Axelrod's import takes ~25 s (it classifies all of its strategies on import), so only
this module pays it."""

from __future__ import annotations

import pytest

from workers.games import play_episode
from workers.games.prisoners_dilemma import AlwaysDefect, PrisonersDilemma, TitForTat

axl = pytest.importorskip("axelrod")

OURS = {"tit-for-tat": TitForTat, "always-defect": AlwaysDefect}
THEIRS = {"tit-for-tat": lambda: axl.TitForTat(), "always-defect": lambda: axl.Defector()}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("tit-for-tat", "always-defect"),
        ("tit-for-tat", "tit-for-tat"),
        ("always-defect", "always-defect"),
    ],
)
def test_per_turn_payoffs_match_axelrod(first, second):
    match = axl.Match((THEIRS[first](), THEIRS[second]()), turns=100)
    moves = match.play()
    scores = [[float(a), float(b)] for a, b in match.scores()]
    record = play_episode(PrisonersDilemma(100), [OURS[first](), OURS[second]()], seed=0)
    assert record.actions == [[str(a), str(b)] for a, b in moves]
    assert record.payoffs == scores
    # Axelrod's default game is ours: R, P, S, T = 3, 1, 0, 5.
    assert axl.Game().RPST() == (3, 1, 0, 5)
