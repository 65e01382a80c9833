"""Episodes played together, round by round (workers/games/lockstep.py): the same records as
each played alone, faults and hooks included, and each phase's calls sent at once."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.workers.games.helpers import Scripted
from workers.games import BASELINES, BUILTIN, GAMES, ForfeitWatch, opponent_lineup, play_episode
from workers.games.episode import AgentForfeit
from workers.games.lockstep import play_lockstep

MATCH_SETS = [(game, opponent) for game in GAMES for opponent in BASELINES[game]]
SEEDS = [11, 12, 13, 14]


def lineups(game: str, opponent: str, agent: Any) -> list[list[Any]]:
    return [[agent(), *opponent_lineup(game, opponent)] for _ in SEEDS]


@pytest.mark.parametrize(("game", "opponent"), MATCH_SETS)
def test_episodes_played_together_are_each_as_played_alone(game: str, opponent: str):
    alone = [
        play_episode(GAMES[game](7), [BUILTIN[game](), *opponent_lineup(game, opponent)], seed)
        for seed in SEEDS
    ]
    together = play_lockstep(
        [GAMES[game](7) for _ in SEEDS],
        lineups(game, opponent, BUILTIN[game]),
        SEEDS,
        [None] * len(SEEDS),
        lambda: None,
    )
    assert together == alone


class Halves:
    """A strategy asked in halves, as a sandboxed slot is: it records what was queued and when
    the queue was sent, and answers from an inner strategy."""

    def __init__(self, inner: Any, log: list[str], name: str) -> None:
        self.inner, self.log, self.name = inner, log, name
        self.label = getattr(inner, "label", type(inner).__name__)

    def begin_reset(self, **context: Any) -> None:
        self.log.append(f"reset {self.name}")
        self.context = context

    def finish_reset(self) -> None:
        self.inner.reset(**self.context)

    def begin_act(self, observation: Any) -> None:
        self.log.append(f"act {self.name}")
        self.observation = observation

    def finish_act(self) -> Any:
        return self.inner.act(self.observation)


def test_each_half_of_a_round_is_queued_then_sent_once():
    log: list[str] = []
    agents = [Halves(BUILTIN["prisoners_dilemma"](), log, str(e)) for e in range(3)]
    records = play_lockstep(
        [GAMES["prisoners_dilemma"](2) for _ in range(3)],
        [[agent, *opponent_lineup("prisoners_dilemma", "tit-for-tat")] for agent in agents],
        [1, 2, 3],
        [None] * 3,
        lambda: log.append("sent"),
    )
    # Resets at once; then each round's moves in two halves in flight (episodes 0-1, then 2).
    resets = ["reset 0", "reset 1", "reset 2", "sent"]
    assert log == resets + ["act 0", "act 1", "sent", "act 2", "sent"] * 2
    alone = [
        play_episode(
            GAMES["prisoners_dilemma"](2),
            [BUILTIN["prisoners_dilemma"](), *opponent_lineup("prisoners_dilemma", "tit-for-tat")],
            seed,
        )
        for seed in (1, 2, 3)
    ]
    assert records == alone


class FailsReset(Scripted):
    def reset(self, game: str, player: int, seed: int) -> None:
        raise ConnectionError("no route to host")


def test_faults_are_each_episodes_own_and_the_watch_hears_them_in_order():
    heard: list[tuple[int, int, int]] = []
    records = play_lockstep(
        [GAMES["prisoners_dilemma"](3) for _ in range(2)],
        [
            [Scripted("C", "?", "D"), BUILTIN["prisoners_dilemma"]()],
            [FailsReset("?"), BUILTIN["prisoners_dilemma"]()],
        ],
        [2, 4],
        [partial(lambda e, p, r, why: heard.append((e, p, r)), e) for e in range(2)],
        lambda: None,
    )
    assert records[0].faults == [1, 0] and records[0].faulted == [[1], []]
    assert records[1].faults == [4, 0]  # its reset and its three moves
    assert records[1].fault_reasons[0] == (
        "player 0, round 0: reset failed: ConnectionError: no route to host"
    )
    # Resets first, then round by round, episode by episode.
    assert heard == [(1, 0, 0), (1, 0, 1), (0, 0, 2), (1, 0, 2), (1, 0, 3)]


def test_a_forfeit_stops_every_episode_of_the_block():
    watch = ForfeitWatch(moves=2 * 10)
    with pytest.raises(AgentForfeit, match="11 of 20 moves faulted"):
        play_lockstep(
            [GAMES["prisoners_dilemma"](10) for _ in range(2)],
            [[Scripted("?"), BUILTIN["prisoners_dilemma"]()] for _ in range(2)],
            [1, 2],
            [partial(watch.fault, e) for e in range(2)],
            lambda: None,
        )
