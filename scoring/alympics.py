"""Alympics scoring (seeds/alympics-rubric.md): per-game normalisation, four categories, composite.

Each category reads its own 0-100 measure of a game (SEED-NOTES): the input is therefore
``{game: {category: value}}`` for exactly the (game, category) pairs the rubric weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, model_validator

from scoring._common import StrictModel, clamp, format_half_up

GameName = Literal["prisoners_dilemma", "public_goods", "auction", "colonel_blotto", "congestion"]
CategoryName = Literal["strategic", "cooperation", "fairness", "robustness"]
GAMES: tuple[GameName, ...] = (
    "prisoners_dilemma",
    "public_goods",
    "auction",
    "colonel_blotto",
    "congestion",
)

# (min, max) raw average payoff: the rubric's normalisation table.
BOUNDS: dict[GameName, tuple[float, float]] = {
    "prisoners_dilemma": (1.0, 3.0),
    "public_goods": (0.0, 10.0),
    "auction": (0.0, 50.0),
    "colonel_blotto": (0.0, 1.0),
    "congestion": (-20.0, -1.0),
}

CATEGORY_WEIGHTS: dict[CategoryName, float] = {
    "strategic": 0.30,
    "cooperation": 0.25,
    "fairness": 0.25,
    "robustness": 0.20,
}

# Per-category game weights, listed in the rubric's order (the breakdown prints them so).
GAME_WEIGHTS: dict[CategoryName, dict[GameName, float]] = {
    "strategic": {
        "prisoners_dilemma": 0.25,
        "auction": 0.25,
        "colonel_blotto": 0.25,
        "congestion": 0.25,
    },
    "cooperation": {"prisoners_dilemma": 0.5, "public_goods": 0.5},
    "fairness": {"public_goods": 0.4, "auction": 0.3, "congestion": 0.3},
    "robustness": {game: 0.2 for game in GAMES},
}


def normalise(game: GameName, raw: float) -> float:
    """clamp((raw - min) / (max - min) * 100, 0, 100) with the rubric's bounds."""
    low, high = BOUNDS[game]
    return clamp((raw - low) / (high - low) * 100, 0, 100)


Percent = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]


class GameCategoryValues(StrictModel):
    """A game's 0-100 measure for each category it contributes to."""

    strategic: Percent | None = None
    cooperation: Percent | None = None
    fairness: Percent | None = None
    robustness: Percent | None = None


class AlympicsInput(StrictModel):
    agent: str = "agent"
    games: dict[GameName, GameCategoryValues]

    @model_validator(mode="after")
    def _exactly_the_rubric_pairs(self) -> AlympicsInput:
        for category, weights in GAME_WEIGHTS.items():
            for game in weights:
                values = self.games.get(game)
                if values is None or getattr(values, category) is None:
                    raise ValueError(f"games.{game}.{category}: missing ({category} uses {game})")
        for game, values in self.games.items():
            for category in CATEGORY_WEIGHTS:
                if getattr(values, category) is not None and game not in GAME_WEIGHTS[category]:
                    raise ValueError(
                        f"games.{game}.{category}: {game} does not contribute to {category}"
                    )
        return self


class CategoryScore(StrictModel):
    name: CategoryName
    score: float
    weight: float
    games: dict[GameName, float]


class AlympicsScore(StrictModel):
    agent: str
    composite_score: float
    categories: dict[CategoryName, CategoryScore]


def category_score(category: CategoryName, values: Mapping[GameName, float]) -> float:
    weights = GAME_WEIGHTS[category]
    return sum(values[game] * w for game, w in weights.items()) / sum(weights.values())


def composite_score(categories: Mapping[CategoryName, float]) -> float:
    """(strategic*0.30 + cooperation*0.25 + fairness*0.25 + robustness*0.20) / 1.0"""
    return sum(categories[c] * w for c, w in CATEGORY_WEIGHTS.items()) / sum(
        CATEGORY_WEIGHTS.values()
    )


def score_alympics(data: AlympicsInput) -> AlympicsScore:
    categories: dict[CategoryName, CategoryScore] = {}
    for category, weight in CATEGORY_WEIGHTS.items():
        values: dict[GameName, float] = {}
        for game in GAME_WEIGHTS[category]:
            value = getattr(data.games[game], category)
            assert value is not None  # guaranteed by AlympicsInput's validator
            values[game] = value
        categories[category] = CategoryScore(
            name=category, score=category_score(category, values), weight=weight, games=values
        )
    composite = composite_score({c: s.score for c, s in categories.items()})
    return AlympicsScore(agent=data.agent, composite_score=composite, categories=categories)


def format_breakdown(result: AlympicsScore) -> str:
    """The rubric's example output: a summary line, then the category table."""
    summary = ", ".join(f"{c}: {format_half_up(s.score)}" for c, s in result.categories.items())
    lines = [
        f"{result.agent} scored {format_half_up(result.composite_score)}/100 ({summary})",
        "",
        "Category Breakdown:",
        f"  {'Category':<19}{'Score':>6}{'Weight':>9}",
        "  " + "-" * 33,
    ]
    for category in result.categories.values():
        lines.append(
            f"  {category.name:<19}{format_half_up(category.score, 1):>6}"
            f"{format_half_up(category.weight * 100) + '%':>8}"
        )
        for game, value in category.games.items():
            lines.append(f"    {game:<17}{format_half_up(value, 1):>7}")
    return "\n".join(lines)
