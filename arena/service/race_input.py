"""What a race's submitter gives besides the spec's own keys: a spec file's folder (a relative
`repo:` is relative to it), and `arena race run`'s scoring flags (commands, timeout, weights,
each agent's duration), put on top of the spec's `scoring` block or the base's hydra.toml. A bad
flag is one line naming it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scoring.race import DIMENSIONS, RaceWeights
from tasks.validation import InputError, describe_validation_error
from tasks.workloads.race import repo_policy
from tasks.workloads.race_config import read_hydra_toml
from tasks.workloads.race_spec import RaceAgentSpec, RaceParams, checked_ref
from workers.race.git import is_local


def anchor_repo(data: Any, spec_path: str) -> Any:
    """A race spec file's relative local `repo:` made relative to the file's folder (not to the
    current directory); `~/...`, absolute paths, URLs and anything odd are left as they are
    (the repository policy judges them)."""
    if not isinstance(data, dict) or data.get("workload", "race") != "race":
        return data
    repo = data.get("repo")
    if not isinstance(repo, str) or not repo or repo.startswith(("-", "~", "/")):
        return data
    if not is_local(repo):
        return data
    return {**data, "repo": str(Path(spec_path).parent / repo)}


def _pairs(option: str, given: tuple[str, ...], form: str) -> dict[str, float]:
    """NAME=NUMBER pairs (`form`: how the option reads them), each name once, each number
    finite."""
    found: dict[str, float] = {}
    for text in given:
        name, sep, number = text.partition("=")
        try:
            value = float(number)
        except ValueError:
            value = math.nan
        if not sep or not name or not math.isfinite(value):
            raise InputError(f"{option}: {text!r} is not {form}")
        if name in found:
            raise InputError(f"{option}: {name!r} is given twice")
        found[name] = value
    return found


@dataclass(frozen=True)
class ScoringFlags:
    """`arena race run`'s --build-command, --test-command, --lint-command, --timeout,
    --setup-command, --weight DIM=W, --duration NAME=SECONDS, --group NAME and --pin-tools."""

    build_command: str | None = None
    test_command: str | None = None
    lint_command: str | None = None
    timeout: float | None = None
    setup_command: str | None = None
    weights: tuple[str, ...] = ()
    durations: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()  # scoring.environment.groups (docs/race.md)
    pin_tools: bool = False  # scoring.environment.pin_tools

    def scoring(self) -> dict[str, Any]:
        """The scoring keys the flags set, each checked as the scoring block checks it."""
        given: dict[str, Any] = {}
        for option, key, value in (
            ("--build-command", "build_command", self.build_command),
            ("--test-command", "test_command", self.test_command),
            ("--lint-command", "lint_command", self.lint_command),
            ("--timeout", "timeout_per_check_seconds", self.timeout),
            ("--setup-command", "setup_command", self.setup_command),
        ):
            if value is None:
                continue
            try:
                RaceParams.model_validate({key: value})
            except ValidationError as exc:
                raise InputError(f"{option}: {_problem(exc)}") from None
            given[key] = value
        weights = _pairs("--weight", self.weights, "DIM=WEIGHT (a number)")
        unknown = sorted(set(weights) - set(DIMENSIONS))
        if unknown:
            raise InputError(
                f"--weight: {unknown[0]!r} is not a dimension ({', '.join(DIMENSIONS)})"
            )
        if weights:
            given["weights"] = weights
        environment = self._environment()
        if environment:
            given["environment"] = environment
        return given

    def _environment(self) -> dict[str, Any]:
        """The environment table --group and --pin-tools give, checked as the spec's is."""
        table: dict[str, Any] = {"groups": list(self.groups)} if self.groups else {}
        if self.pin_tools:
            table["pin_tools"] = True
        try:
            RaceParams.model_validate({"environment": table})
        except ValidationError as exc:
            raise InputError(f"--group: {_problem(exc)}") from None
        return table

    def apply(self, data: dict[str, Any]) -> None:
        """The flags on top of `data` (a race spec in its own shape), in place."""
        overrides = self.scoring()
        if overrides:
            scoring = data.get("scoring")
            if scoring is None:
                scoring = _hydra_scoring(data)
            if not isinstance(scoring, dict):
                raise InputError("scoring: expected a mapping (hydra.toml's [scoring] keys)")
            data["scoring"] = _merged(scoring, overrides)
        if self.durations:
            _set_durations(data, _pairs("--duration", self.durations, "NAME=SECONDS"))


def _problem(exc: ValidationError) -> str:
    """A scoring value's problem without its field's name (the flag names it)."""
    return describe_validation_error(exc).partition(": ")[2] or str(exc)


def _hydra_scoring(data: dict[str, Any]) -> dict[str, Any]:
    """hydra.toml's [scoring] on the base, read as the race shorthand reads it (the repository
    admitted first); {} when there is none: the flags give the scoring."""
    repo = data.get("repo")
    if not isinstance(repo, str):
        return {}  # validation names the missing repo
    admitted = repo_policy("operator").admit(repo)
    return read_hydra_toml(admitted, checked_ref(data.get("base", "main"), "base"), required=False)


def _merged(scoring: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` on `scoring`; a --weight replaces that one weight, the others stay."""
    merged = {**scoring, **overrides}
    if "environment" in overrides:  # --group and --pin-tools replace those keys, not the table
        environment = scoring.get("environment")
        own = environment if isinstance(environment, dict) else {}
        merged["environment"] = {**own, **overrides["environment"]}
    if "weights" in overrides:
        weights = scoring.get("weights")
        merged["weights"] = {
            **(weights if isinstance(weights, dict) else {}),
            **overrides["weights"],
        }
        try:
            RaceWeights.model_validate(merged["weights"])
        except ValidationError as exc:
            raise InputError(f"--weight: {_problem(exc)}") from None
    return merged


def _set_durations(data: dict[str, Any], durations: dict[str, float]) -> None:
    """Each named agent's duration_s (in place of its started_at/completed_at); every agent
    needs one, speed compares them all."""
    agents = [a for a in data.get("agents") or [] if isinstance(a, dict)]
    names = [str(a.get("name")) for a in agents]
    unknown = sorted(set(durations) - set(names))
    if unknown:
        raise InputError(f"--duration: no agent {unknown[0]!r} (agents: {', '.join(names)})")
    for agent in agents:
        if agent.get("name") not in durations:
            continue
        seconds = durations[agent["name"]]
        try:  # the bounds an agent's duration_s has in a spec
            RaceAgentSpec.model_validate({"name": "a", "branch": "b", "duration_s": seconds})
        except ValidationError as exc:
            raise InputError(f"--duration: {agent['name']}: {_problem(exc)}") from None
        for key in ("started_at", "completed_at"):
            agent.pop(key, None)
        agent["duration_s"] = seconds
    untimed = [a["name"] for a in agents if a.get("duration_s") is None and not a.get("started_at")]
    if untimed:
        raise InputError(
            f"--duration: give one for every agent (speed compares them all; none for "
            f"{', '.join(untimed)})"
        )
