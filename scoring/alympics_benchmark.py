"""From played match sets to the rubric's per-game, per-category values (SEED-NOTES readings).

Each match set is one game against one opponent baseline. Per game:
- strategic  = mean over opponents of the normalised payoff;
- robustness = the worst normalised payoff over the opponents;
- cooperation, fairness = mean over opponents of the game's own 0-100 measure.
A match set that could not be played at all, or that the agent forfeit (more than half of its
moves faulted), counts as the worst case (0) everywhere.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from scoring._common import StrictModel
from scoring.alympics import (
    CATEGORY_WEIGHTS,
    GAME_WEIGHTS,
    GAMES,
    AlympicsInput,
    AlympicsScore,
    GameName,
    normalise,
    score_alympics,
)


class MatchMeasures(StrictModel):
    game: GameName
    opponent: str
    raw: float = 0.0
    cooperation: float | None = None
    fairness: float | None = None
    faults: int = 0
    error: str | None = None  # why the match set could not be played, or was forfeit


def _mean_measure(matches: Sequence[MatchMeasures], field: str) -> float:
    values = []
    for m in matches:
        value = getattr(m, field)
        if m.error is None and value is None:
            raise ValueError(f"{m.game} vs {m.opponent}: no {field} measure")
        values.append(0.0 if m.error is not None else float(value))
    return statistics.fmean(values)


def benchmark_input(matches: Sequence[MatchMeasures], agent: str) -> AlympicsInput:
    games: dict[str, dict[str, float]] = {}
    for game in GAMES:
        played = [m for m in matches if m.game == game]
        if not played:
            raise ValueError(f"{game}: no match set played")
        normalised = [0.0 if m.error else normalise(game, m.raw) for m in played]
        values: dict[str, float] = {}
        for category in CATEGORY_WEIGHTS:
            if game not in GAME_WEIGHTS[category]:
                continue
            if category == "strategic":
                values[category] = statistics.fmean(normalised)
            elif category == "robustness":
                values[category] = min(normalised)
            else:
                values[category] = _mean_measure(played, category)
        games[game] = values
    return AlympicsInput.model_validate({"agent": agent, "games": games})


def score_benchmark(matches: Sequence[MatchMeasures], agent: str = "agent") -> AlympicsScore:
    """The composite, categories and per-game values of one agent's match sets."""
    return score_alympics(benchmark_input(matches, agent))
