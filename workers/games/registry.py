"""The five games, their baseline strategies (the rubric's), and the built-in agent."""

from __future__ import annotations

from collections.abc import Callable

from workers.games import auction, colonel_blotto, congestion, prisoners_dilemma, public_goods
from workers.games.base import Game, Strategy

GAMES: dict[str, type[Game]] = {
    game.name: game
    for game in (
        prisoners_dilemma.PrisonersDilemma,
        public_goods.PublicGoods,
        auction.FirstPriceAuction,
        colonel_blotto.ColonelBlotto,
        congestion.Congestion,
    )
}

BASELINES: dict[str, dict[str, Callable[[], Strategy]]] = {
    "prisoners_dilemma": {
        "tit-for-tat": prisoners_dilemma.TitForTat,
        "always-defect": prisoners_dilemma.AlwaysDefect,
    },
    "public_goods": {
        "full-contributor": public_goods.FullContributor,
        "free-rider": public_goods.FreeRider,
        "conditional-cooperator": public_goods.ConditionalCooperator,
        "punisher": public_goods.Punisher,
    },
    "auction": {"truthful": auction.Truthful, "shade": auction.Shade},
    "colonel_blotto": {
        "uniform": colonel_blotto.Uniform,
        "concentrated": colonel_blotto.Concentrated,
    },
    "congestion": {
        "selfish-router": congestion.SelfishRouter,
        "social-optimum": congestion.SocialOptimum,
        "epsilon-greedy": congestion.EpsilonGreedy,
    },
}

# The `builtin` agent. PD: tit-for-tat (cooperates with cooperators, is exploited at most once,
# and nothing earns more than mutual cooperation's 3 in the normalised score). Public goods:
# conditional cooperation. Auction: half the value, the 2-bidder equilibrium. Blotto: the
# skirmisher, which beats both baselines more often than not. Congestion: best response.
BUILTIN: dict[str, Callable[[], Strategy]] = {
    "prisoners_dilemma": prisoners_dilemma.TitForTat,
    "public_goods": public_goods.ConditionalCooperator,
    "auction": auction.Shade,
    "colonel_blotto": colonel_blotto.Skirmisher,
    "congestion": congestion.BestResponder,
}


def opponent_lineup(game: str, opponent: str) -> list[Strategy]:
    """The agent's opponents in a match set against baseline `opponent`: n_players - 1 fresh
    copies of it (one in 2-player games, three in 4-player games)."""
    if game not in BASELINES:
        raise ValueError(f"unknown game {game!r} (games: {', '.join(GAMES)})")
    if opponent not in BASELINES[game]:
        known = ", ".join(BASELINES[game])
        raise ValueError(f"{game}: unknown baseline {opponent!r} (baselines: {known})")
    return [BASELINES[game][opponent]() for _ in range(GAMES[game].n_players - 1)]
