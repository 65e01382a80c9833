"""Our Prisoner's Dilemma against the Axelrod library's own Match: same moves, same per-turn
payoffs. Importing axelrod takes ~25 s (it classifies all of its strategies on import), so the
import waits for the first test here: collection (in every xdist worker) stays fast."""

from __future__ import annotations

from types import ModuleType

import pytest

from workers.games import play_episode
from workers.games.prisoners_dilemma import AlwaysDefect, PrisonersDilemma, TitForTat

OURS = {"tit-for-tat": TitForTat, "always-defect": AlwaysDefect}


@pytest.fixture(scope="module")
def axl() -> ModuleType:
    return pytest.importorskip("axelrod")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("tit-for-tat", "always-defect"),
        ("tit-for-tat", "tit-for-tat"),
        ("always-defect", "always-defect"),
    ],
)
def test_per_turn_payoffs_match_axelrod(axl, first, second):
    theirs = {"tit-for-tat": axl.TitForTat, "always-defect": axl.Defector}
    match = axl.Match((theirs[first](), theirs[second]()), turns=100)
    moves = match.play()
    record = play_episode(PrisonersDilemma(100), [OURS[first](), OURS[second]()], seed=0)
    assert record.actions == [[str(a), str(b)] for a, b in moves]
    assert record.payoffs == [[float(a), float(b)] for a, b in match.scores()]


def test_axelrod_default_game_is_ours(axl):
    assert axl.Game().RPST() == (3, 1, 0, 5)
