"""The JSON shapes `arena score` reads (docs/scoring.md), validated into scoring models."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from scoring._common import StrictModel
from scoring.alympics import AlympicsInput
from scoring.mario import AnyEpisode, EpisodeResult, FullGameResult
from scoring.race import (
    DIMENSIONS,
    DimensionName,
    DimensionScores,
    RaceWeights,
    Thresholds,
)
from scoring.race_dimensions import Score
from scoring.race_measures import (
    RaceMeasures,
)
from tasks.spec import read_text
from tasks.validation import InputError, describe_validation_error


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
    """Dimension scores given directly. ``measured``: the dimensions the race measures (default:
    every dimension some agent gives, plus tests and lint whenever build is among them); only an
    unmeasured dimension leaves the composite (scoring.race.apply_race_rules)."""

    task: str | None = None
    weights: RaceWeights = RaceWeights()
    thresholds: Thresholds = Thresholds()
    measured: list[DimensionName] | None = None
    agents: Annotated[list[RaceAgentInput], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_names(self) -> RaceInput:
        names = [a.name for a in self.agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"agents: duplicate agent names {duplicates}")
        if self.measured is not None:
            repeated = sorted({d for d in self.measured if self.measured.count(d) > 1})
            if repeated:
                raise ValueError(f"measured: {repeated[0]} is listed twice")
            if not self.measured:
                raise ValueError(f"measured: name at least one of {', '.join(DIMENSIONS)}")
        return self


MAX_INPUT_BYTES = 64 * 1024 * 1024  # far above any real input; /dev/zero is refused, not read
MAX_INPUT_DEPTH = 32  # the deepest real input (a leaderboard) is 4 levels
MAX_INT_DIGITS = 4_000


class _Refused(ValueError):
    """A problem the JSON parser's hooks find: reported as is."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of two equal keys: a typo'd copy would silently win.
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Refused(f"duplicate key {key!r} in an object")
        found[key] = value
    return found


def _integer(text: str) -> int:
    # Python refuses to read an int of over 4,300 digits (a ValueError, not a JSON error); any
    # shorter one reaches the models, whose bounds name the field.
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"a number of {digits} digits is too large")
    return int(text)


def _depth(data: Any) -> int:
    """How deeply lists and objects nest (iterative: a deep input cannot exhaust the stack)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return deepest


def read_json(path: str) -> Any:
    """The JSON in a file ('-': standard input); any problem is one InputError line."""
    text = read_text(path, MAX_INPUT_BYTES, stdin=True)
    try:
        parsed = json.loads(text, object_pairs_hook=_object, parse_int=_integer)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    except _Refused as exc:
        raise InputError(f"{path}: {exc}") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply (over {MAX_INPUT_DEPTH} levels)") from None
    if _depth(parsed) > MAX_INPUT_DEPTH:
        raise InputError(f"{path}: nested too deeply (over {MAX_INPUT_DEPTH} levels)")
    return parsed


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


def is_race_measures(data: Any) -> bool:
    """A race's raw measures rather than dimension scores: a top-level baseline or configured, or
    an agent with a diff."""
    if not isinstance(data, dict):
        return False
    if "baseline" in data or "configured" in data:
        return True
    agents = data.get("agents")
    return isinstance(agents, list) and any(isinstance(a, dict) and "diff" in a for a in agents)


def parse_race(data: Any) -> RaceInput | RaceMeasures:
    """Dimension scores (RaceInput) or raw measures (scoring.race_measures.RaceMeasures)."""
    if is_race_measures(data):
        measures: RaceMeasures = _validate(TypeAdapter(RaceMeasures), data, "")
        return measures
    parsed: RaceInput = _validate(TypeAdapter(RaceInput), data, "")
    return parsed


def parse_alympics(data: Any) -> AlympicsInput:
    parsed: AlympicsInput = _validate(TypeAdapter(AlympicsInput), data, "")
    return parsed
