"""Scoring results produced elsewhere (`arena score`, `arena demo`): the text for people and the
JSON for machines, from the rubrics in scoring/."""

from __future__ import annotations

import json
from typing import Any

from arena.service.inputs import parse_alympics, parse_mario, parse_race
from scoring import alympics, mario, race
from scoring.mario_display import format_aggregate, format_episode_breakdown, format_leaderboard
from scoring.race_measures import RaceMeasures, score_race
from tasks.validation import InputError


def _mario(data: Any) -> tuple[str, dict[str, Any]]:
    parsed = parse_mario(data)
    try:
        if isinstance(parsed, dict):
            stats = {name: mario.aggregate_scores(eps) for name, eps in parsed.items()}
            ranked = mario.rank(stats)
            rows = [
                {"rank": r.rank, "name": r.name, **r.stats.model_dump(mode="json")} for r in ranked
            ]
            return format_leaderboard(ranked), {"leaderboard": rows}
        if isinstance(parsed, list):
            agg = mario.aggregate_scores(parsed)
            scores = [mario.compute_arena_score(e) for e in parsed]
            lines = [
                f"Episode {i + 1}: {mario.format_score_display(s)}"
                f" ({'completed' if e.completed else f'failed at x={e.max_x_pos:,}'})"
                for i, (e, s) in enumerate(zip(parsed, scores, strict=True))
            ]
            text = "\n".join([*lines, "", format_aggregate(agg)])
            return text, {**agg.model_dump(mode="json"), "episode_scores": scores}
    except ValueError as exc:  # e.g. episodes that mix frame skips
        raise InputError(str(exc)) from None
    breakdown = mario.score_breakdown(parsed)
    payload = {"arena_score": breakdown.total, "breakdown": breakdown.model_dump(mode="json")}
    return format_episode_breakdown(parsed), payload


def _race(data: Any) -> tuple[str, dict[str, Any]]:
    spec = parse_race(data)
    try:
        if isinstance(spec, RaceMeasures):
            outcome = score_race(spec)
        else:
            outcome = race.score_race_dimensions(
                {a.name: a.scores() for a in spec.agents},
                weights=spec.weights,
                thresholds=spec.thresholds,
                measured=spec.measured,
                task=spec.task,
            )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    raw = (
        {a.name: a.model_dump(mode="json", exclude={"name"}) for a in spec.agents}
        if isinstance(spec, RaceMeasures)
        else {}
    )
    payload = {
        "task": outcome.task,
        "verdict": outcome.verdict.value,
        "winner": outcome.winner,
        "tied": outcome.tied,
        "review_reason": outcome.review_reason,
        "measured": outcome.measured,
        "agents": [
            {
                "rank": r.rank,
                "name": r.name,
                "composite": r.composite,
                "scores": r.scores.model_dump(mode="json"),
                "notes": r.notes,
                **({"measures": raw[r.name]} if raw else {}),
            }
            for r in outcome.agents
        ],
    }
    text = race.format_race_results(
        outcome.agents, outcome.task, outcome.verdict, review_reason=outcome.review_reason
    )
    return text, payload


def _alympics(data: Any) -> tuple[str, dict[str, Any]]:
    result = alympics.score_alympics(parse_alympics(data))
    return alympics.format_breakdown(result), result.model_dump(mode="json")


SCORERS = {"mario": _mario, "race": _race, "alympics": _alympics}


def score(workload: str, data: Any) -> tuple[str, dict[str, Any]]:
    """(human text, JSON payload) for one workload's input."""
    text, payload = SCORERS[workload](data)
    try:
        # The models' bounds keep every figure finite; should one slip through, it is refused
        # here rather than printed as NaN (which is not JSON).
        json.dumps(payload, allow_nan=False)
    except ValueError:
        raise InputError(
            f"{workload}: the input gives a score that is not a finite number"
        ) from None
    return text, payload
