"""The workload interface: one module per workload under tasks/workloads/ implements it.

A workload says how a batch spec expands into units, how one unit runs (raw result), and how
the raw results of a batch reduce to a summary and leaderboard entries (with `scoring/`).
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from tasks.identity import BatchIdentity
from tasks.repo_policy import Asker
from tasks.spec import RUN_OPTIONS, BatchSpec, Protocol, derive_seed
from tasks.validation import InputError
from tasks.workloads import unit_work
from workers.fingerprint import (
    AgentFingerprint,
    FingerprintError,
    builtin_fingerprint,
    check_entry_point,
    declared_fingerprint,
    source_fingerprint,
    unversioned_fingerprint,
)

QueueName = Literal["cpu", "gpu"]
# "agent": the agent's doing (raise, hang, invalid action) — it scores as the rubric says.
# "infrastructure": not the agent's (a lost worker or unit, another engine on the worker) — it
# never enters a score, a resume retries it, and a batch left with one is "incomplete".
ErrorKind = Literal["agent", "infrastructure"]


class InfrastructureError(RuntimeError):
    """Not the agent's doing (a lost worker, another Arena engine on the worker, a spent
    budget): the unit never enters a score, a resume runs it again (UnitResult.error_kind ==
    "infrastructure", tasks/execute.py)."""


class Unit(BaseModel):
    """One isolated piece of work; its id is `{batch}:{agent}:{item}:{episode}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    batch_id: str
    workload: str
    agent: str
    item: str
    episode: int
    env_seed: int  # same for every agent on an (item, episode): common random numbers
    agent_seed: int  # the agent's own randomness
    queue: QueueName = "cpu"
    time_limit_s: float
    payload: dict[str, Any]  # the workload's validated agent, item and params
    # Taken at submission: a worker whose copy of the agent differs refuses to run it.
    agent_fingerprint: AgentFingerprint | None = None
    engine: str = ""  # the submitter's engine fingerprint


class UnitResult(BaseModel):
    """What a unit stored: never an exception, an error is a result with a reason."""

    model_config = ConfigDict(extra="forbid")

    unit_id: str
    agent: str
    item: str
    episode: int
    status: Literal["ok", "error"]
    reason: str | None = None
    error_kind: ErrorKind | None = None  # set when status == "error"
    result: dict[str, Any] = {}
    duration_s: float = 0.0
    # Provenance: which worker ran it and when (ISO 8601, UTC), and the end of what it printed.
    host: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    log_tail: str = ""


class LeaderboardEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str
    score: float  # the primary score, the sorted set's value
    stats: dict[str, Any]
    board: str | None = None  # which of the batch's boards (Workload.boards); None: the first


class Reduction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: dict[str, Any]
    entries: list[LeaderboardEntry]


# How a leaderboard cell shows a number (arena/service/numbers.py): 4 significant digits, never
# scientific; a whole number with thousands separators; a percentage.
ColumnFormat = Literal["number", "count", "percent"]


class Column(BaseModel):
    """A leaderboard column: `key` is a dotted path into an entry's stats (categories.fairness)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    header: str
    fmt: ColumnFormat = "number"
    # Shown only on a board where some row has the value (an llm agent's cost on an Alympics
    # board): declared, so the table never guesses from one row's values.
    optional: bool = False


class IntervalSpec(BaseModel):
    """A point estimate and its 95% interval (a [low, high] pair), both keys of an entry's stats."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    point: str
    ci95: str
    header: str
    fmt: ColumnFormat = "number"


class PageColumn(BaseModel):
    """A column of a board on the web page: `key` (a stats path) shown as a number, as a point
    with its 95% interval (`ci95`, another stats path), or as a 0-100 bar. `name`: the cell's
    class (the key's last part when empty)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    header: str
    fmt: ColumnFormat = "number"
    shown_as: Literal["number", "interval", "bar"] = "number"
    ci95: str | None = None
    name: str = ""
    optional: bool = False  # as Column.optional

    @property
    def css(self) -> str:
        return self.name or self.key.rsplit(".", 1)[-1]


class UnitCount(BaseModel):
    """How many units a spec expands to, and the product that says why (for the refusal)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total: int
    formula: str  # "3 agents × 2 items × 16 episodes"


class ValidatedBatch(BaseModel):
    """A spec whose workload-specific parts passed the workload's models, and its identity."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    spec: BatchSpec
    agents: list[Any]
    items: list[Any]
    params: Any
    identity: BatchIdentity

    @property
    def batch_id(self) -> str:
        return self.identity.batch_id

    @property
    def protocol_fingerprint(self) -> str:
        return self.identity.protocol_fingerprint

    def leaderboard_name(self) -> str:
        return self.spec.leaderboard or f"{self.spec.workload}-{self.protocol_fingerprint[:8]}"

    def normalised(self) -> dict[str, Any]:
        return normalise(self.spec, self.agents, self.items, self.params)


def normalise(spec: BatchSpec, agents: list[Any], items: list[Any], params: Any) -> dict[str, Any]:
    """The spec as validated, every default filled in: two spellings of one protocol agree.
    `occasion` and the run options (RUN_OPTIONS) appear only when given (batches without them
    keep the identities they had)."""
    normalised = {
        "workload": spec.workload,
        "leaderboard": spec.leaderboard,
        "agents": [a.model_dump(mode="json") for a in agents],
        "items": [i.model_dump(mode="json") for i in items],
        "protocol": spec.protocol.model_dump(mode="json"),
        "params": params.model_dump(mode="json"),
    }
    if spec.occasion is not None:
        normalised["occasion"] = spec.occasion
    for option in RUN_OPTIONS:  # only when given: older batches keep their identities
        if getattr(spec, option) is not None:
            normalised[option] = getattr(spec, option)
    return normalised


class Workload(ABC):
    name: ClassVar[str]
    agent_model: ClassVar[type[BaseModel]]
    item_model: ClassVar[type[BaseModel]]
    params_model: ClassVar[type[BaseModel]]
    # Units per Celery task: tiny units are chunked so dispatch does not dominate.
    chunk_size: ClassVar[int] = 1

    def chunk_size_for(self, units: Sequence[Unit]) -> int:
        """The chunk size for these units (a workload whose units are sometimes long says so)."""
        return self.chunk_size

    # How a leaderboard shows the entries (arena/cli/tables.py): the primary score, then the
    # interval (rows not separated from the row above are marked), these stats, and the errors
    # column when any entry has errors. Declared, so no column depends on the values of the
    # first row.
    score_header: ClassVar[str] = "Score"
    interval: ClassVar[IntervalSpec | None] = None
    table_columns: ClassVar[tuple[Column, ...]] = ()
    errors_column: ClassVar[Column | None] = None
    # What a board's web page shows beside rank, agent and score (None: the interval and the
    # table columns above), and whether its rows link the best episode's replay.
    page_columns: ClassVar[tuple[PageColumn, ...] | None] = None
    replays: ClassVar[bool] = False
    # Said after "holds results of a different protocol" (tasks/submit.py), where a workload's
    # defaults changed under existing boards and the way back to them is worth a line.
    protocol_hint: ClassVar[str] = ""

    def memory_limit_mb(self, unit: Unit) -> int:
        """The address space a worker process may use while it runs this unit, MiB (0: none;
        ARENA_UNIT_MEMORY_MB overrides it): measured per workload (tasks/workloads/unit_work.py)."""
        return unit_work.memory_limit_mb(self.name, unit.payload)

    def check_unit_work(self, agents: list[Any], items: list[Any], params: Any) -> None:
        """The ceilings on what one unit does (episodes, pulls, steps a spec sets), checked at
        submission; InputError naming the field and the numbers."""
        unit_work.check(self.name, items, params)

    def coerce_spec(self, data: dict[str, Any], asker: Asker = "token-holder") -> dict[str, Any]:
        """A workload whose spec has its own shape (a race: task, repo, scoring) maps it onto
        the generic one here; the stored, normalised spec is always the generic shape. `asker`:
        who submits it (what it may name depends on it: tasks/repo_policy.py)."""
        return data

    def admit(self, items: list[Any], asker: Asker) -> list[Any]:
        """The validated items as the workers will use them, once `asker` may name what they
        name (a race's repository); InputError naming the field otherwise. Runs at submission,
        before anything reads what the items name."""
        return items

    def unit_count(
        self, agents: list[Any], items: list[Any], params: Any, protocol: Protocol
    ) -> UnitCount:
        """How many units `expand` would make, computed without making them (the cap on a
        batch, ARENA_MAX_UNITS, is checked before expansion)."""
        total = len(agents) * len(items) * protocol.episodes
        return UnitCount(
            total=total,
            formula=f"{len(agents):,} agents × {len(items):,} items × "
            f"{protocol.episodes:,} episodes",
        )

    def coerce_agent(self, raw: str | dict[str, Any]) -> dict[str, Any]:
        """A bare string names a built-in agent."""
        return {"name": raw} if isinstance(raw, str) else raw

    def coerce_item(self, raw: str | dict[str, Any]) -> dict[str, Any]:
        return {"name": raw} if isinstance(raw, str) else raw

    def agent_key(self, agent: Any) -> str:
        return str(agent.name)

    def item_key(self, item: Any) -> str:
        return str(item.name)

    def queue(self, agent: Any, item: Any, params: Any) -> QueueName:
        return "cpu"

    def check(self, batch: ValidatedBatch) -> None:  # noqa: B027 (optional hook)
        """Cross-field checks of a whole spec; raise InputError naming the field."""

    def boards(self, batch: ValidatedBatch) -> dict[str, str]:
        """The leaderboards a batch writes: name -> the protocol fingerprint the board holds.
        One board for the whole batch unless a workload splits it (Mario: one per level)."""
        return {batch.leaderboard_name(): batch.protocol_fingerprint}

    def fingerprint_agent(self, agent: Any) -> AgentFingerprint:
        """What identifies the agent's code: a declared `version`, else the files of its entry
        point, else (an HTTP agent) nothing — such an agent is always rerun. May raise
        FingerprintError when the agent cannot be found."""
        version = getattr(agent, "version", None)
        if version:
            return declared_fingerprint(version)
        entry_point = getattr(agent, "entry_point", None)
        if entry_point:
            check_entry_point(entry_point)
            return source_fingerprint(entry_point)
        if getattr(agent, "url", None):
            return unversioned_fingerprint(
                "an HTTP agent without a declared version cannot be fingerprinted: always rerun"
            )
        return builtin_fingerprint(self.agent_key(agent))

    def fingerprint_agents(
        self, agents: list[Any], items: list[Any], params: Any
    ) -> dict[str, AgentFingerprint]:
        """Every agent's fingerprint (a race resolves branches in the item's repository)."""
        found = {}
        for index, agent in enumerate(agents):
            try:
                found[self.agent_key(agent)] = self.fingerprint_agent(agent)
            except FingerprintError as exc:
                field = next(
                    (k for k in ("image", "sb3", "entry_point") if getattr(agent, k, None)), "name"
                )
                raise InputError(f"agents[{index}].{field}: {exc}") from None
        return found

    def expand(self, batch: ValidatedBatch) -> list[Unit]:
        """agents × items × episodes, in a fixed order, with seeds derived from the batch seed."""
        protocol = batch.spec.protocol
        units = []
        for agent, item, episode in itertools.product(
            batch.agents, batch.items, range(protocol.episodes)
        ):
            a, i = self.agent_key(agent), self.item_key(item)
            units.append(
                Unit(
                    id=f"{batch.batch_id}:{a}:{i}:{episode}",
                    batch_id=batch.batch_id,
                    workload=self.name,
                    agent=a,
                    item=i,
                    episode=episode,
                    env_seed=derive_seed(protocol.seed, "env", i, episode),
                    agent_seed=derive_seed(protocol.seed, "agent", a, i, episode),
                    queue=self.queue(agent, item, batch.params),
                    time_limit_s=protocol.unit_time_limit_s,
                    payload={
                        "agent": agent.model_dump(mode="json"),
                        "item": item.model_dump(mode="json"),
                        "params": batch.params.model_dump(mode="json"),
                    },
                    agent_fingerprint=batch.identity.agents.get(a),
                    engine=batch.identity.engine,
                )
            )
        return units

    @abstractmethod
    def run_unit(self, unit: Unit) -> dict[str, Any]:
        """Run one unit; return its raw result. May raise: the caller turns that into an error."""

    @abstractmethod
    def reduce(self, batch: ValidatedBatch, results: Sequence[UnitResult]) -> Reduction:
        """Scores from every unit's raw result (with scoring/), once the batch is complete."""

    def format_board(self, name: str, entries: Sequence[LeaderboardEntry]) -> str | None:
        """The board as the workload's rubric prints it; None: the generic table
        (arena/cli/tables.py, from the columns declared above)."""
        return None

    def board_page_columns(self) -> tuple[PageColumn, ...]:
        """The columns of a board's web page: as declared, or the terminal table's."""
        if self.page_columns is not None:
            return self.page_columns
        columns = [
            PageColumn(key=c.key, header=c.header, fmt=c.fmt, optional=c.optional)
            for c in self.table_columns
        ]
        if self.interval is not None:
            spec = self.interval
            point = PageColumn(
                key=spec.point,
                header=spec.header,
                fmt=spec.fmt,
                shown_as="interval",
                ci95=spec.ci95,
            )
            columns.insert(0, point)
        return tuple(columns)

    def rank(self, entries: Sequence[LeaderboardEntry]) -> list[LeaderboardEntry]:
        return sorted(entries, key=lambda e: (self.rank_key(e), e.agent))

    def rank_key(self, entry: LeaderboardEntry) -> tuple[float, ...]:
        """What orders the board (then the name); equal keys are tied: they share a rank."""
        return (-entry.score,)
