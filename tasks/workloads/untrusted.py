"""Where a unit's untrusted agent runs (docs/agents.md, "Where agents run"): Python entry points
and Stable-Baselines3 checkpoints in the agent sandbox (workers/sandbox/agent_sandbox.py), under
the settings' limits, wherever a jail starts; in the worker only where none starts and the
operator trusts every agent (ARENA_TRUST_AGENTS=true, the same meaning as for race commands).
Arena's built-ins never leave the worker. An image agent (Mario or Alympics) runs in its own
container (workers/agent_image.py), whatever the settings.

Where no sandbox can start, an untrusted agent is refused in one line naming the setting: at
submission when the submitting machine also runs the units (no ARENA_REDIS_URL), else as the
unit's infrastructure error (a worker without a sandbox is not the agent's fault; a resubmission
retries the unit, on a worker that has one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import redis

from tasks.keys import Keys
from tasks.settings import ArenaSettings, current_settings, load_settings
from tasks.workloads.base import Unit
from tasks.workloads.llm_agents import cluster_redis
from workers.agent_image import ImageAgent, image_agent
from workers.fingerprint import FingerprintError
from workers.images import image_to_run
from workers.sandbox.agent_sandbox import (
    AgentLimits,
    AgentSandboxUnavailable,
    AgentSource,
    gpu_devices,
    refusal,
    untrusted_agent,
)
from workers.sandbox.shared_agent import shared_agent

# A Docker image reference (name[:tag][@digest]) or a content id (sha256:...): no spaces, no
# leading dash (it is handed to the engine, never to a shell).
IMAGE_REF = r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,299}$"


def agent_limits(settings: ArenaSettings) -> AgentLimits:
    return AgentLimits(
        memory_mb=settings.agent_memory_mb,
        cpus=settings.agent_cpus,
        start_timeout_s=settings.agent_start_timeout_s,
        data_dir=settings.data_dir,
    )


def unit_cpu_s(settings: ArenaSettings, unit: Unit) -> float:
    """A sandboxed agent's CPU seconds for the unit: ARENA_AGENT_CPU_S, or (0) as many cores as
    ARENA_AGENT_CPUS for as long as the unit may take."""
    return settings.agent_cpu_s or settings.agent_cpus * unit.time_limit_s


def note_in_process(unit: Unit) -> None:
    """On a worker: note in Redis that the unit's agent runs in this process, before it runs, so
    that a worker it ends is blamed on it (tasks/trusted_deaths.py). Redis out of reach: nothing
    is noted, and such a death stays the infrastructure error it was."""
    cluster = cluster_redis.get()
    if cluster is not None:
        with suppress(redis.RedisError):
            cluster.client.sadd(Keys(cluster.prefix).in_process(unit.batch_id), unit.id)


@contextmanager
def agent_for_unit(
    source: AgentSource, unit: Unit, step_timeout_s: float, in_process: Callable[[], Any]
) -> Iterator[Any]:
    """The unit's agent, sandboxed wherever a jail starts; where none does, `in_process()` (as
    before the sandbox) if the operator trusts every agent, else AgentSandboxUnavailable."""
    settings = current_settings()
    if settings.trust_agents and refusal() is not None:
        note_in_process(unit)
        yield in_process()
        return
    limits = agent_limits(settings).model_copy(update={"cpu_s": unit_cpu_s(settings, unit)})
    with untrusted_agent(
        source, unit.agent_fingerprint, limits, step_timeout_s=step_timeout_s
    ) as agent:
        yield agent


@contextmanager
def group_agent_for_unit(
    source: AgentSource, unit: Unit, step_timeout_s: float, in_process: Callable[[], Any]
) -> Iterator[Any]:
    """A lockstep group's checkpoint: on its host's shared inference process where the settings
    say so (ARENA_SHARED_INFERENCE; auto: `device: cuda` on a host with a GPU), else as any
    unit's agent. Trusted agents where no jail starts run in the worker either way."""
    settings = current_settings()
    mode = settings.shared_inference
    shared = mode == "always" or (mode == "auto" and source.device == "cuda" and gpu_devices())
    if not shared or not source.checkpoint or (settings.trust_agents and refusal() is not None):
        with agent_for_unit(source, unit, step_timeout_s, in_process) as agent:
            yield agent
        return
    with shared_agent(
        source,
        unit.agent_fingerprint,
        agent_limits(settings),
        step_timeout_s=step_timeout_s,
        idle_s=settings.inference_idle_s,
        silence_s=settings.inference_silence_s,
    ) as agent:
        yield agent


def refuse_at_submission() -> None:
    """An untrusted agent that no sandbox could run here is refused before anything is
    enqueued, where this machine runs the units (no ARENA_REDIS_URL: `arena run`'s embedded
    cluster, `arena game benchmark` in one process). A cluster's submitter cannot tell what its
    workers can: there the unit says so (AgentSandboxUnavailable)."""
    settings = load_settings()
    if settings.trust_agents or settings.redis_url:
        return
    why = refusal()
    if why is not None:
        raise FingerprintError(why)


@contextmanager
def image_agent_for_unit(image: str, unit: Unit, timeout_s: float) -> Iterator[ImageAgent]:
    """An image agent (Mario or Alympics) for one unit: the submitted content id, the
    settings' work dir, a reaping deadline past the unit's own time limit."""
    settings = load_settings()
    ref = image_to_run(image, unit.agent_fingerprint)
    label = image if ref == image else f"{image} ({ref[:19]})"
    with image_agent(
        ref,
        timeout_s=timeout_s,
        deadline_s=unit.time_limit_s + 60,
        label=label,
        work_dir=settings.work_dir,
        host_work_dir=settings.sandbox_host_work_dir,
        memory_mb=settings.agent_memory_mb,
        cpus=settings.agent_cpus,
        pids=settings.agent_pids,
        start_timeout_s=settings.agent_start_timeout_s,
    ) as agent:
        yield agent


__all__ = [
    "IMAGE_REF",
    "AgentSandboxUnavailable",
    "AgentSource",
    "agent_for_unit",
    "image_agent_for_unit",
    "refuse_at_submission",
]
