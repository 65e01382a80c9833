"""Workload `mario`: Super Mario Bros on the real emulator (seeds/mario-arena-scoring.md).

A unit is one agent × one level (or the full game) × one episode; a batch writes one leaderboard
per level (`mario-1-1`, `mario-full-game`). The emulator is imported only inside a unit, so specs
are checked where the `mario` extra is not installed.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import field_validator

from scoring.mario import (
    AggregateStats,
    AnyEpisode,
    EpisodeResult,
    FullGameResult,
    aggregate_scores,
    compute_arena_score,
    rank,
    rank_key,
)
from scoring.mario_display import format_leaderboard
from tasks.checkpoint_policy import admit_checkpoints, worker_checkpoint
from tasks.checkpoint_space import preprocess_from_checkpoints
from tasks.identity import protocol_fingerprint
from tasks.repo_policy import Asker
from tasks.spec import SpecModel, derive_seed
from tasks.workloads.base import (
    LeaderboardEntry,
    PageColumn,
    QueueName,
    Reduction,
    Unit,
    UnitResult,
    ValidatedBatch,
    Workload,
)
from tasks.workloads.mario_spec import MarioAgentSpec, Preprocess
from tasks.workloads.untrusted import (
    AgentSource,
    agent_for_unit,
    group_agent_for_unit,
    image_agent_for_unit,
    refuse_at_submission,
)
from workers.agents import Agent, AgentChanged, load_entry_point
from workers.fingerprint import AgentFingerprint, file_fingerprint
from workers.images import image_fingerprint
from workers.mario.protocol import (
    FULL_GAME,
    LockstepGroup,
    MarioProtocol,
    action_names,
    check_level,
)
from workers.mario.trajectory import distinct_trajectories
from workers.sandbox.agent_sandbox import STEP_TIMEOUT_S

if TYPE_CHECKING:
    from workers.mario.runner import EpisodeOutcome

log = logging.getLogger(__name__)


class MarioLevel(SpecModel):
    name: str

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        try:
            return check_level(name)
        except ValueError:
            raise ValueError(f"unknown level {name!r} (1-1 .. 8-4, or {FULL_GAME})") from None


class MarioWorkload(Workload):
    name = "mario"
    agent_model = MarioAgentSpec
    item_model = MarioLevel
    params_model = MarioProtocol
    chunk_size = 1  # an episode takes seconds: no batching needed
    score_header: ClassVar[str] = "Best score"
    page_columns: ClassVar[tuple[PageColumn, ...] | None] = (
        PageColumn(
            key="success_rate",
            ci95="success_ci95",
            header="Success rate [Wilson 95%]",
            fmt="percent",
            shown_as="interval",
            name="success",
        ),
        PageColumn(
            key="iqm_score",
            ci95="iqm_ci95",
            header="IQM [bootstrap 95%]",
            shown_as="interval",
            name="iqm",
        ),
        PageColumn(key="episodes", header="Episodes", fmt="count"),
    )
    replays: ClassVar[bool] = True
    protocol_hint: ClassVar[str] = (
        " (boards from before sticky actions 0.25 became the default hold sticky_p 0: "
        "params: {sticky_p: 0} adds to them)"
    )

    def queue(self, agent: Any, item: Any, params: Any) -> QueueName:
        return "gpu" if agent.device == "cuda" else "cpu"

    def boards(self, batch: ValidatedBatch) -> dict[str, str]:
        """One board per level; a board's protocol is this level's, so another batch that
        plays the same level under the same protocol shares it."""
        prefix = batch.spec.leaderboard or "mario"
        normalised = batch.normalised()
        boards = {}
        for item in normalised["items"]:
            own = {**normalised, "items": [item]}
            boards[f"{prefix}-{item['name']}"] = protocol_fingerprint(own)
        return boards

    def coerce_spec(self, data: dict[str, Any], asker: Asker = "token-holder") -> dict[str, Any]:
        """Each `sb3:` checkpoint as `asker` may name it, before anything reads it; then its
        preprocessing from its own observation space (tasks/checkpoint_space.py), a declared
        one it contradicts refused here, not at evaluation."""
        admitted = admit_checkpoints(data, asker)
        return admitted if asker == "worker" else preprocess_from_checkpoints(admitted)

    def fingerprint_agent(self, agent: Any) -> AgentFingerprint:
        if agent.entry_point or agent.sb3:
            refuse_at_submission()
        if agent.sb3 and not agent.version:
            return file_fingerprint(agent.sb3)
        if agent.image and not agent.version:
            return image_fingerprint(agent.image)  # the content id the workers will run
        return super().fingerprint_agent(agent)

    def expand(self, batch: ValidatedBatch) -> list[Unit]:
        """Under `inference_batch: K > 1` each checkpoint unit carries its lockstep group: the
        env seeds of the K consecutive episodes (of its agent on its level) played with it."""
        units = super().expand(batch)
        size = batch.params.inference_batch
        if size == 1:
            return units
        seeds: dict[tuple[str, str, int], list[Unit]] = defaultdict(list)
        for unit in units:
            seeds[unit.agent, unit.item, unit.episode // size].append(unit)
        grouped = []
        for unit in units:
            if not unit.payload["agent"].get("sb3"):
                grouped.append(unit)  # its agent answers one observation at a time anyway
                continue
            group = seeds[unit.agent, unit.item, unit.episode // size]
            payload = {**unit.payload, "group": lockstep_group(group, unit)}
            grouped.append(unit.model_copy(update={"payload": payload}))
        return grouped

    def chunk_size_for(self, units: Sequence[Unit]) -> int:
        """A lockstep group's units go together, so that one worker process plays the group."""
        grouped = [
            u.payload["params"].get("inference_batch", 1) for u in units if "group" in u.payload
        ]
        return max(grouped, default=self.chunk_size)

    def run_unit(self, unit: Unit) -> dict[str, Any]:
        from workers.mario.runner import run_episode  # the emulator: only where units run

        spec = MarioAgentSpec.model_validate(unit.payload["agent"])
        params = MarioProtocol.model_validate(unit.payload["params"])
        level = unit.payload["item"]["name"]
        if "group" in unit.payload:
            outcome, runtime = run_in_group(spec, params, unit)
        else:
            with open_agent(spec, unit) as agent:
                outcome = run_episode(level, agent, params, unit.env_seed, unit.agent_seed)
                runtime = getattr(agent, "runtime", None) if spec.sb3 else None
        result = outcome.model_dump(mode="json")
        if isinstance(runtime, dict):  # a checkpoint: device, versions, determinism flags
            result["runtime"] = runtime
        result["arena_score"] = compute_arena_score(scoring_episode(result, params.frame_skip))
        return result

    def reduce(self, batch: ValidatedBatch, results: Sequence[UnitResult]) -> Reduction:
        params: MarioProtocol = batch.params
        boards = dict(zip((i.name for i in batch.items), self.boards(batch), strict=True))
        grouped: dict[tuple[str, str], list[UnitResult]] = defaultdict(list)
        for r in results:
            grouped[r.item, r.agent].append(r)
        entries, reasons = [], {}
        for (level, agent), rows in sorted(grouped.items()):
            played = [
                scoring_episode(r.result, params.frame_skip) for r in rows if r.status == "ok"
            ]
            failed = [r for r in rows if r.status == "error"]
            stats = aggregate_scores(
                played,
                bootstrap_seed=batch.spec.protocol.seed,
                failed=len(failed),
                frame_skip=params.frame_skip,
            )
            extra = {
                "level": level,
                "protocol": params.model_dump(mode="json"),
                "trajectories": row_trajectories(rows, params, batch.spec.protocol.seed),
            }
            entries.append(
                LeaderboardEntry(
                    agent=agent,
                    score=stats.arena_score,
                    board=boards[level],
                    stats={**stats.model_dump(mode="json"), **extra},
                )
            )
            if failed:
                reasons[f"{agent} on {level}"] = sorted({r.reason or "" for r in failed})[:3]
        summary = {"units": len(results), "boards": list(boards.values()), "errors": reasons}
        return Reduction(summary=summary, entries=entries)

    def rank(self, entries: Sequence[LeaderboardEntry]) -> list[LeaderboardEntry]:
        """Best score, then the rubric's tiebreakers: success rate, average score, steps."""
        by_agent = {e.agent: e for e in entries}
        ranked = rank({e.agent: aggregate_of(e.stats) for e in entries})
        return [by_agent[r.name] for r in ranked]

    def rank_key(self, entry: LeaderboardEntry) -> tuple[float, ...]:
        return rank_key(aggregate_of(entry.stats))

    def format_board(self, name: str, entries: Sequence[LeaderboardEntry]) -> str | None:
        """The rubric's table, with the intervals beside it."""
        ranked = rank({e.agent: aggregate_of(e.stats) for e in entries})
        trajectories = {e.agent: e.stats.get("trajectories") for e in entries}
        return format_leaderboard(
            ranked,
            title=f"MARIO ARENA LEADERBOARD: {name}",
            intervals=True,
            trajectories=trajectories,
        )


def aggregate_of(stats: dict[str, Any]) -> AggregateStats:
    return AggregateStats.model_validate(
        {k: stats[k] for k in AggregateStats.model_fields}, strict=False
    )


def row_trajectories(results: Sequence[UnitResult], params: MarioProtocol, seed: int) -> int | None:
    """How many distinct trajectories a row's played episodes are (workers/mario/trajectory.py):
    under a deterministic protocol a deterministic agent's N episodes are one, and no interval
    over them says more than that one episode does. The env seeds are the ones `expand` gave.
    None when a result holds no action log to count (not known, never a failed reduce)."""
    try:
        return distinct_trajectories(
            (
                (
                    r.result["actions"],
                    r.result["frames"],
                    derive_seed(seed, "env", r.item, r.episode),
                )
                for r in results
                if r.status == "ok"
            ),
            params,
        )
    except (KeyError, TypeError, ValueError):
        return None


def scoring_episode(result: dict[str, Any], frame_skip: int) -> AnyEpisode:
    """A stored unit result as the rubric's episode (scoring/mario.py)."""
    common = {
        "world": result["world"],
        "stage": result["stage"],
        "max_x_pos": result["max_x"],
        "steps": result["steps"],
        "completed": result["completed"],
        "coins": result["coins"],
        "frame_skip": frame_skip,
    }
    if result["level"] == FULL_GAME:
        return FullGameResult(
            full_game=True,
            levels_completed=result["levels_completed"] or 0,
            lives_lost=result["lives_lost"],
            **common,
        )
    return EpisodeResult(time_remaining=result["time_remaining"], **common)


@contextmanager
def open_agent(spec: MarioAgentSpec, unit: Unit) -> Iterator[Agent]:
    """The unit's agent: a built-in in the worker, an entry point or a checkpoint in the agent
    sandbox (in the worker when agents are trusted), an image in its container; a sandboxed
    agent's process or an image's container serves exactly the block."""
    if spec.image:
        with image_agent_for_unit(spec.image, unit, spec.timeout_s or STEP_TIMEOUT_S) as image:
            yield image
        return
    if not (spec.entry_point or spec.sb3):
        yield make_agent(spec, unit.agent_fingerprint)
        return

    def in_process() -> Agent:
        return make_agent(spec, unit.agent_fingerprint)

    timeout_s = spec.timeout_s or STEP_TIMEOUT_S
    with agent_for_unit(agent_source(spec), unit, timeout_s, in_process) as agent:
        yield agent


def lockstep_group(group: Sequence[Unit], unit: Unit) -> dict[str, Any]:
    """A unit's group (LockstepGroup) as its payload carries it."""
    return {
        "env_seeds": [u.env_seed for u in group],
        "agent_seed": group[0].agent_seed,
        "index": [u.id for u in group].index(unit.id),
    }


def run_in_group(
    spec: MarioAgentSpec, params: MarioProtocol, unit: Unit
) -> tuple[EpisodeOutcome, Any]:
    """The unit's episode (and the agent's runtime) from its group's lockstep play: played here
    once, its other episodes kept for the group's next units (workers/mario/batched.py)."""
    from workers.mario.batched import GROUPS, agent_policy, run_lockstep
    from workers.mario.sb3 import Preprocessing

    group = LockstepGroup.model_validate(unit.payload["group"])
    group.check(unit.env_seed, params.inference_batch)
    level = unit.payload["item"]["name"]
    key = (unit.batch_id, unit.agent, unit.item, tuple(group.env_seeds), group.agent_seed)
    found = GROUPS.get(key)
    if found is None:
        pre = spec.preprocess or Preprocess()
        preprocessing = Preprocessing(pre.grayscale, pre.resize, pre.frame_stack)
        source, timeout_s = agent_source(spec), spec.timeout_s or STEP_TIMEOUT_S
        in_process = functools.partial(make_agent, spec, unit.agent_fingerprint)
        with group_agent_for_unit(source, unit, timeout_s, in_process) as agent:
            agent.reset(
                seed=group.agent_seed,
                level=level,
                action_set=params.action_set,
                actions=action_names(params.action_set),
            )
            policy = agent_policy(agent, group.agent_seed)
            outcomes = run_lockstep(level, policy, preprocessing, params, group.env_seeds)
            runtime = getattr(agent, "runtime", None)
        GROUPS.put(key, outcomes, runtime)
        found = (outcomes, runtime)
    outcomes, runtime = found
    return outcomes[group.index], runtime


def agent_source(spec: MarioAgentSpec) -> AgentSource:
    """What the agent sandbox runs for an entry point or a checkpoint."""
    if spec.entry_point:
        return AgentSource(entry_point=spec.entry_point, device=spec.device)
    pre = spec.preprocess or Preprocess()
    return AgentSource(
        checkpoint=worker_checkpoint(spec.sb3 or ""),
        grayscale=pre.grayscale,
        resize=pre.resize,
        frame_stack=pre.frame_stack,
        device=spec.device,
    )


def make_agent(spec: MarioAgentSpec, fingerprint: AgentFingerprint | None) -> Agent:
    if spec.entry_point:
        agent: Agent = load_entry_point(spec.entry_point, fingerprint)
        return agent
    if spec.sb3:
        # here: Stable-Baselines3 (the sb3 extra: torch, gymnasium) only where a checkpoint runs
        from workers.mario.sb3 import load_checkpoint_agent

        worker_checkpoint(spec.sb3)
        if fingerprint is not None and fingerprint.kind == "file":
            here = file_fingerprint(spec.sb3)  # the copy on this worker is the one submitted
            if here.digest != fingerprint.digest:
                raise AgentChanged(f"{spec.sb3} differs from the checkpoint submitted")

        pre = spec.preprocess or Preprocess()
        return load_checkpoint_agent(
            spec.sb3,
            grayscale=pre.grayscale,
            resize=pre.resize,
            frame_stack=pre.frame_stack,
            device=spec.device,
        )
    from workers.mario.agents import BUILTIN  # NumPy (the mario extra): only where units run

    return BUILTIN[spec.builtin or spec.name]()
