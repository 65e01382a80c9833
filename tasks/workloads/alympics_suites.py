"""Alympics suites: the games, rounds, episodes and players of a benchmark configuration,
shipped in tasks/suites/ (a name, never a path)."""

from __future__ import annotations

from importlib import resources
from typing import Annotated

import yaml
from pydantic import Field

from scoring.alympics import GameName
from tasks.spec import SpecModel
from tasks.validation import InputError


class SuiteGame(SpecModel):
    variant: str
    rounds: Annotated[int, Field(ge=1)]
    episodes: Annotated[int, Field(ge=1)]
    players: Annotated[int, Field(ge=2)]


class Suite(SpecModel):
    suite: str
    games: dict[GameName, SuiteGame]


def suite_names() -> list[str]:
    folder = resources.files("tasks") / "suites"
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )


def load_suite(name: str) -> Suite:
    """One of the suites shipped in tasks/suites/ (a name, never a path)."""
    if name not in suite_names():
        raise InputError(f"params.suite: unknown suite {name!r} (suites: {suite_names()})")
    path = resources.files("tasks") / "suites" / f"{name}.yaml"
    return Suite.model_validate(yaml.safe_load(path.read_text()))


__all__ = ["Suite", "SuiteGame", "load_suite", "suite_names"]
