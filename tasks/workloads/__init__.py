"""Workload registry: every module in this package that defines a Workload subclass adds one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache
from typing import Any

from pydantic import BaseModel, ValidationError

from tasks.identity import BatchIdentity, batch_identity
from tasks.repo_policy import Asker
from tasks.settings import ArenaSettings, current_settings, load_settings
from tasks.spec import BatchSpec
from tasks.validation import InputError, describe_validation_error
from tasks.workloads.base import Unit, ValidatedBatch, Workload, normalise
from workers.fingerprint import engine_fingerprint


@cache
def workloads() -> dict[str, Workload]:
    found: dict[str, Workload] = {}
    for module_info in pkgutil.iter_modules(__path__):
        if module_info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, Workload)
                and not inspect.isabstract(cls)
                and cls.__module__ == module.__name__
            ):
                found[cls.name] = cls()
    return found


def get_workload(name: str) -> Workload:
    try:
        return workloads()[name]
    except KeyError:
        known = ", ".join(sorted(workloads()))
        raise InputError(f"workload: unknown workload {name!r} (known: {known})") from None


def _each(model: type[BaseModel], values: list[Any], where: str) -> list[Any]:
    parsed = []
    for index, value in enumerate(values):
        try:
            parsed.append(model.model_validate(value))
        except ValidationError as exc:
            raise InputError(describe_validation_error(exc, prefix=f"{where}[{index}].")) from None
    return parsed


def _settings() -> ArenaSettings:
    try:
        return current_settings()
    except ValidationError:
        return load_settings()  # raises the one-line InputError naming the variable


def _check_size(
    workload: Workload, spec: BatchSpec, agents: list[Any], items: list[Any], params: Any
) -> None:
    """The cap on a batch, from the spec alone: a batch of 10^10 units is refused before one
    unit is made (ARENA_MAX_UNITS)."""
    limit = _settings().max_units
    count = workload.unit_count(agents, items, params, spec.protocol)
    if count.total > limit:
        raise InputError(
            f"protocol: the batch would be {count.total:,} units ({count.formula}), over the "
            f"limit of {limit:,} (ARENA_MAX_UNITS); split it into smaller batches"
        )


def validate_batch(
    data: Any, identity: BatchIdentity | None = None, *, asker: Asker = "token-holder"
) -> ValidatedBatch:
    """The whole spec checked (generic shape, then the workload's parts; errors name the field)
    and identified: every agent fingerprinted, unless `identity` (stored at submission) is
    given — a reducer rebuilds the batch a submitter identified, it never re-fingerprints.

    `asker`: who submits it. It decides what the spec may name (tasks/repo_policy.py); the
    default is the most restricted front door, a token holder of the HTTP API, so a caller
    that forgets to say gets the strict rule. The operator's CLI says "operator"."""
    if not isinstance(data, dict):
        raise InputError("spec: expected a mapping with workload, agents, items, protocol")
    if isinstance(data.get("workload"), str) and data["workload"] in workloads():
        # A stored batch is rebuilt as it was accepted: what its submitter could name stands.
        data = workloads()[data["workload"]].coerce_spec(
            data, asker if identity is None else "worker"
        )
    try:
        spec = BatchSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc)) from None
    workload = get_workload(spec.workload)
    agents = _each(workload.agent_model, [workload.coerce_agent(a) for a in spec.agents], "agents")
    items = _each(workload.item_model, [workload.coerce_item(i) for i in spec.items], "items")
    for label, keys in (
        ("agents", [workload.agent_key(a) for a in agents]),
        ("items", [workload.item_key(i) for i in items]),
    ):
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise InputError(f"{label}: duplicate names {duplicates}")
    try:
        params = workload.params_model.model_validate(spec.params)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc, prefix="params.")) from None
    if identity is None:  # a stored batch is rebuilt as it was accepted
        _check_size(workload, spec, agents, items, params)
        workload.check_unit_work(agents, items, params)  # a stored batch keeps its old counts
        items = workload.admit(items, asker)
    normalised = normalise(spec, agents, items, params)
    if identity is None:
        fingerprints = workload.fingerprint_agents(agents, items, params)
        identity = batch_identity(normalised, fingerprints, engine_fingerprint())
    batch = ValidatedBatch(spec=spec, agents=agents, items=items, params=params, identity=identity)
    workload.check(batch)
    return batch


def stored_units(spec: Any, identity: BatchIdentity) -> tuple[ValidatedBatch, list[Unit]]:
    """A stored batch rebuilt as it was accepted (its spec, the identity of its submission)
    and its units in their fixed order: what a reducer, a requeue, a report or a replay reads
    its results by."""
    batch = validate_batch(spec, identity=identity)
    return batch, get_workload(batch.spec.workload).expand(batch)
