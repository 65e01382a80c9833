"""The JSON shapes `arena score` reads (docs/scoring.md), validated into scoring models."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from arena.errors import InputError, describe_validation_error
from scoring._common import StrictModel
from scoring.alympics import AlympicsInput
from scoring.mario import AnyEpisode, EpisodeResult, FullGameResult
from scoring.race import DimensionScores, RaceWeights, Score, Thresholds


class RaceAgentInput(StrictModel):
    name: Annotated[str, Field(min_length=1)]
    build: Score | None = None
    tests: Score | None = None
    lint: Score | None = None
    diff_size: Score | None = None
    speed: Score | None = None

    def scores(self) -> DimensionScores:
        return DimensionScores(**self.model_dump(exclude={"name"}))


class RaceInput(StrictModel):
    task: str | None = None
    weights: RaceWeights = RaceWeights()
    thresholds: Thresholds = Thresholds()
    agents: Annotated[list[RaceAgentInput], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_names(self) -> RaceInput:
        names = [a.name for a in self.agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"agents: duplicate agent names {duplicates}")
        return self


def read_json(path: str) -> Any:
    try:
        data = Path(path).read_bytes() if path != "-" else sys.stdin.buffer.read()
        text = data.decode("utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply") from None


def _validate(adapter: TypeAdapter[Any], data: Any, where: str) -> Any:
    try:
        return adapter.validate_python(data, strict=True)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc, prefix=where)) from None


_LEVEL = TypeAdapter(EpisodeResult)
_FULL = TypeAdapter(FullGameResult)


def parse_episode(data: Any, where: str = "") -> AnyEpisode:
    if not isinstance(data, dict):
        raise InputError(f"{where or 'episode'}: expected a JSON object, got {type(data).__name__}")
    adapter = _FULL if data.get("full_game") is True else _LEVEL
    episode: AnyEpisode = _validate(adapter, data, f"{where}." if where else "")
    return episode


def parse_episodes(data: Any, where: str = "") -> list[AnyEpisode]:
    if not isinstance(data, list) or not data:
        raise InputError(f"{where or 'episodes'}: expected a non-empty list of episodes")
    return [parse_episode(item, f"{where}[{i}]") for i, item in enumerate(data)]


def parse_mario(data: Any) -> AnyEpisode | list[AnyEpisode] | dict[str, list[AnyEpisode]]:
    """One episode, a list of episodes, or {"agents": {name: [episodes]}} for a leaderboard."""
    if isinstance(data, list):
        return parse_episodes(data)
    if isinstance(data, dict) and "agents" in data:
        agents = data["agents"]
        extra = sorted(set(data) - {"agents"})
        if extra:
            raise InputError(f"{extra[0]}: unknown field")
        if not isinstance(agents, dict) or not agents:
            raise InputError("agents: expected an object of agent name -> list of episodes")
        return {name: parse_episodes(eps, f"agents.{name}") for name, eps in agents.items()}
    return parse_episode(data)


def parse_race(data: Any) -> RaceInput:
    parsed: RaceInput = _validate(TypeAdapter(RaceInput), data, "")
    return parsed


def parse_alympics(data: Any) -> AlympicsInput:
    parsed: AlympicsInput = _validate(TypeAdapter(AlympicsInput), data, "")
    return parsed
