"""An `llm` agent for one unit (docs/alympics.md, "Evaluating a model"): its key read from the
worker's environment under the operator's key policy, its endpoint's limits and the replay
cache shared through the cluster's Redis (in-process runs: this process and the data folder),
and the batch's cost budget, which once spent cancels the batch so no further unit starts."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from tasks.llm_services import cluster_services, local_services
from tasks.repo_policy import Asker
from tasks.settings import current_settings
from tasks.validation import InputError
from tasks.workloads.base import InfrastructureError, Unit
from workers.http_agent import CircuitBreaker
from workers.llm.agent import LlmAgent
from workers.llm.client import ChatClient
from workers.llm.config import LlmConfig
from workers.llm.services import LlmServices, LocalSpend


@dataclass(frozen=True)
class ClusterRedis:
    """The worker's Redis while it runs a chunk (tasks/units.py sets it): an llm agent's limits,
    cache and spend are then the cluster's; unset (a run in one process), this process's."""

    client: Any  # the Store's client
    prefix: str
    cancel: Callable[[str, str], None]  # (batch id, reason): cancel the batch if it runs


cluster_redis: ContextVar[ClusterRedis | None] = ContextVar("cluster_redis", default=None)


class BudgetSpent(InfrastructureError):
    """The batch's cost budget was spent before this unit started: it is not played, enters no
    score, and a rerun with a new budget plays it."""


class ReplayIncomplete(InfrastructureError):
    """Replaying, the cache lacks one of the unit's requests: the unit is not the one cached,
    which says nothing of the agent."""


def check_key_policy(config: LlmConfig) -> None:
    """InputError unless the operator lets this key go to this host (ARENA_LLM_KEY_HOSTS):
    checked at submission and again on the worker, before any request."""
    if config.api_key_env is None:
        return
    allowed = current_settings().llm_key_host_map().get(config.api_key_env)
    if allowed is None:
        raise InputError(
            f"llm.api_key_env: {config.api_key_env} is not a key this cluster sends anywhere "
            "(the operator lists keys and their hosts in ARENA_LLM_KEY_HOSTS)"
        )
    if config.host.lower() not in allowed:
        raise InputError(
            f"llm.base_url: {config.api_key_env} may be sent only to {', '.join(sorted(allowed))}"
            f", not to {config.host} (ARENA_LLM_KEY_HOSTS)"
        )


# One circuit breaker per endpoint in this process: a dead endpoint is learnt once, and every
# match set after faults at once (one probe in ten), instead of each retrying it anew.
_breakers: dict[str, CircuitBreaker] = {}
# An in-process run's spend per batch: its units run one after another in this process.
_local_spend: dict[str, LocalSpend] = {}


def admit_endpoints(agents: list[Any], asker: Asker) -> None:
    """InputError naming the field unless `asker` may name what the agents' endpoints name.
    The operator's CLI may name anything. Anyone else (an API token holder, a schedule):
    - an llm agent's prompt template is given as text, never a file (it would be read on the
      submitting machine and sent to an endpoint of theirs);
    - an llm agent's base_url and an HTTP agent's url name a host the operator lists in
      ARENA_AGENT_HOSTS: else any spec author could make workers POST to the cluster's own
      services (Redis, a metadata service) and read the answers (a transcript, a fault)."""
    if asker in ("operator", "worker"):  # the worker: a stored spec, admitted when submitted
        return
    hosts = current_settings().agent_host_list()
    for index, agent in enumerate(agents):
        if not isinstance(agent, dict):
            continue
        llm = agent.get("llm")
        if isinstance(llm, dict):
            if llm.get("prompt", "default") != "default" and llm.get("template") is None:
                raise InputError(
                    f"agents[{index}].llm.prompt: a template file is read only for the "
                    "operator's CLI; give the template's text as llm.template"
                )
            _check_host(llm.get("base_url"), f"agents[{index}].llm.base_url", hosts)
        _check_host(agent.get("url"), f"agents[{index}].url", hosts)


def _check_host(url: Any, field: str, hosts: list[str]) -> None:
    if not isinstance(url, str):
        return  # absent, or the spec's model refuses it with its own message
    host = urlsplit(url).hostname or ""
    if host.lower() not in hosts:
        listed = ", ".join(hosts) if hosts else "none"
        raise InputError(
            f"{field}: {host or url!r} is not an endpoint this cluster calls for specs from "
            f"outside its CLI (ARENA_AGENT_HOSTS: {listed})"
        )


def services_for(unit: Unit) -> LlmServices:
    cluster = cluster_redis.get()
    if cluster is not None:
        return cluster_services(cluster.client, cluster.prefix, unit.batch_id)
    spend = _local_spend.setdefault(unit.batch_id, LocalSpend())
    return replace(local_services(current_settings().data_dir), spend=spend)


def budget_reason(budget: float, spent: float) -> str:
    return f"the batch's cost budget of ${budget:g} is spent (${spent:.4f})"


@contextmanager
def llm_agent_for_unit(config: LlmConfig, unit: Unit) -> Iterator[LlmAgent]:
    services = services_for(unit)
    budget: float | None = unit.payload.get("cost_budget_usd")
    replay = bool(unit.payload.get("replay_cache"))
    if budget is not None and not replay and services.spend.spent() >= budget:
        raise BudgetSpent(budget_reason(budget, services.spend.spent()))
    client, key = None, None
    if not replay:
        check_key_policy(config)
        key = _key(config)
        lease_s = config.timeout_s + 30
        client = ChatClient(config, services.gate(_endpoint(config), config.limits, lease_s), key)

    def spent(usd: float) -> str | None:
        total = services.spend.add(usd)
        if budget is None or total < budget:
            return None
        reason = budget_reason(budget, total)
        _stop_batch(unit.batch_id, reason)
        return reason

    breaker = _breakers.setdefault(_endpoint(config), CircuitBreaker())
    agent = LlmAgent(
        config, client, services.cache, unit.id, spent=spent, secret=key, breaker=breaker
    )
    try:
        yield agent
    finally:
        agent.close()


def _stop_batch(batch_id: str, reason: str) -> None:
    """The budget is spent: the batch is cancelled, so chunks not started skip their units
    (units running finish their match sets, which were paid for)."""
    cluster = cluster_redis.get()
    if cluster is not None:
        cluster.cancel(batch_id, reason)


def for_replay(units: list[Unit]) -> list[Unit]:
    """`--replay-cache`: the units answer from the replay cache, never the endpoint. Not part
    of the batch's identity: a replay is the same batch, rerun."""
    return [u.model_copy(update={"payload": {**u.payload, "replay_cache": True}}) for u in units]


def _key(config: LlmConfig) -> str | None:
    if config.api_key_env is None:
        return None
    key = os.environ.get(config.api_key_env)
    if not key:
        raise InputError(f"llm.api_key_env: {config.api_key_env} is not set on this worker")
    return key


def _endpoint(config: LlmConfig) -> str:
    """Whose limits these are: one endpoint, model and key share one window."""
    return f"{config.base_url}|{config.model}|{config.api_key_env or ''}"


def usage_totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The `llm` accounting of several units' results summed (an agent's row, a batch), with
    the tokens in all and the mean latency of an answered request."""
    totals: dict[str, Any] = {}
    for usage in results:
        for name, value in usage.items():
            if name != "mean_latency_s":
                totals[name] = totals.get(name, 0) + value
    if not totals:
        return totals
    totals["cost_usd"] = round(totals.get("cost_usd", 0.0), 9)
    totals["latency_s"] = round(totals.get("latency_s", 0.0), 4)
    totals["total_tokens"] = totals.get("prompt_tokens", 0) + totals.get("completion_tokens", 0)
    requests = totals.get("requests", 0)
    totals["mean_latency_s"] = round(totals["latency_s"] / requests, 4) if requests else 0.0
    return totals
