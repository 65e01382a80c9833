"""Checkpoints evaluated while they train (docs/mario.md, "Evaluating while training"): what the
SB3 callback (arena/integrations/sb3.py) and `arena mario watch` share. A checkpoint
`<folder>/<run>@<steps>.zip` (or SB3's `<run>_<steps>_steps.zip`) becomes a one-agent Mario
batch, its agent named `<run>@<steps>`, under a template's levels, protocol and params, so every
checkpoint of a run lands on the same board (the protocol's) and forms a series there
(arena/service/series.py).

Where it runs: the cluster at ARENA_REDIS_URL, or (none set) the data folder's embedded
cluster, attached to (started if none runs) while the caller runs (`evaluation_cluster`): two
training processes, a watch and any reader share it. A batch's id hashes its spec and the
checkpoint's bytes, so submitting the same checkpoint again finds the batch already evaluated
or being evaluated (or resumes it, when an earlier embedded host left it) instead of running
it twice."""

from __future__ import annotations

import copy
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.embedded.attach import resume_orphan
from arena.service.boards import Board, boards_made
from arena.service.cluster import Follow, connect, on_embedded
from arena.service.series import (
    SeriesPoint,
    checkpoint_file,
    checkpoint_name,
    parse_checkpoint,
    point_of,
)
from arena.service.waiting import Unwatched, wait
from tasks.records import FINISHED
from tasks.settings import ArenaSettings, load_settings
from tasks.spec import load_spec_file
from tasks.store import BatchInfo, LeaderboardRow, Store
from tasks.validation import InputError
from tasks.workloads import validate_batch
from tasks.workloads.base import ValidatedBatch

if TYPE_CHECKING:
    from tasks.submit import Submission

DEFAULT_SPEC: dict[str, Any] = {
    "workload": "mario",
    "items": ["1-1"],
    "protocol": {"episodes": 8, "seed": 0},
    "params": {},
}
AGENT_KEYS = ("preprocess", "device", "timeout_s")  # what a template's agent lends a checkpoint


@dataclass(frozen=True)
class CheckpointTemplate:
    """How each checkpoint of a run is evaluated: a Mario spec's items, protocol, params and
    leaderboard (its agents ignored), and the checkpoint agent's preprocessing and device."""

    spec: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULT_SPEC))
    agent: dict[str, Any] = field(default_factory=dict)

    def spec_for(self, name: str, path: Path) -> dict[str, Any]:
        """The batch of one checkpoint: the template with the checkpoint as its only agent."""
        agent = {"name": name, "sb3": str(path.resolve()), **self.agent}
        return {**copy.deepcopy(self.spec), "agents": [agent]}

    def check(self) -> None:
        """Refuse a bad template at once (InputError naming the field), not at the first
        checkpoint: the same spec with a built-in in the checkpoint's place."""
        spec = {**copy.deepcopy(self.spec), "agents": ["right"]}
        if spec.get("workload") != "mario":
            raise InputError("spec: workload: checkpoints are evaluated by the mario workload")
        validate_batch(spec, asker="operator")
        extra = set(self.agent) - set(AGENT_KEYS)
        if extra:
            raise InputError(f"agent: {sorted(extra)} (a checkpoint takes {list(AGENT_KEYS)})")


def template(
    spec: str | Path | dict[str, Any] | None = None,
    *,
    level: str | None = None,
    episodes: int | None = None,
    seed: int | None = None,
    params: dict[str, Any] | None = None,
    leaderboard: str | None = None,
    preprocess: dict[str, Any] | None = None,
    device: str | None = None,
) -> CheckpointTemplate:
    """A checked template: `spec` (a Mario spec file or dict; default: 1-1, 8 episodes, seed 0,
    the default params), each option given overriding it. A spec's first agent, if it has
    one, lends the checkpoints its preprocess, device and timeout_s."""
    base = load_spec_file(spec) if isinstance(spec, str | Path) else spec
    if base is not None and not isinstance(base, dict):
        raise InputError("spec: not a mapping")
    body = copy.deepcopy(base if base is not None else DEFAULT_SPEC)
    agents = body.pop("agents", None) or [{}]
    first = agents[0] if isinstance(agents[0], dict) else {}
    agent = {k: first[k] for k in AGENT_KEYS if k in first}
    body.setdefault("workload", "mario")
    body.setdefault("items", ["1-1"])
    protocol = dict(body.get("protocol") or {})
    if episodes is not None:
        protocol["episodes"] = episodes
    if seed is not None:
        protocol["seed"] = seed
    body["protocol"] = protocol
    body["params"] = {**(body.get("params") or {}), **(params or {})}
    if level is not None:
        body["items"] = [level]
    if leaderboard is not None:
        body["leaderboard"] = leaderboard
    if preprocess is not None:
        agent["preprocess"] = preprocess
    if device is not None:
        agent["device"] = device
    made = CheckpointTemplate(spec=body, agent=agent)
    made.check()
    return made


@dataclass
class Target:
    """Where checkpoints are submitted: a store, its settings, and whether it is the embedded
    cluster (whose batches an earlier host left a submission resumes, and which runs only while
    a command is attached to it)."""

    db: Store
    settings: ArenaSettings
    embedded: bool


@contextmanager
def evaluation_cluster(workers: int | None = None) -> Iterator[Target]:
    """The cluster at ARENA_REDIS_URL, or the embedded default, attached to for the block."""
    settings = load_settings()
    if settings.redis_url:
        yield Target(connect(settings), settings, embedded=False)
        return
    with on_embedded(settings, workers, run_batches=True) as local:
        yield Target(connect(local), local, embedded=True)


def checkpoint_batch(tpl: CheckpointTemplate, path: Path, name: str) -> ValidatedBatch:
    """The checkpoint's batch, validated and identified (its file hashed)."""
    return validate_batch(tpl.spec_for(name, path), asker="operator")


def submit_checkpoint(target: Target, batch: ValidatedBatch) -> Submission:
    from tasks.submit import submit  # Celery (0.3 s) only when a checkpoint is submitted

    return submit(
        target.db,
        batch,
        resume_running=target.embedded and resume_orphan(target.db, batch.batch_id),
        visibility_timeout_s=target.settings.visibility_timeout_s,
        default_priority="interactive",  # a training loop (or a watch) waits for its curve
    )


def wait_finished(db: Store, batch_ids: list[str], timeout_s: float | None = None) -> list[str]:
    """Wait until every batch has ended (or `timeout_s` passed): the ids still running."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    left = list(batch_ids)
    while left:
        left = [b for b in left if db.status(b) not in FINISHED]
        if not left or (deadline is not None and time.monotonic() > deadline):
            break
        time.sleep(0.5)
    return left


def save_name(run: str, steps: int) -> str:
    """The file a checkpoint is saved as in its folder: `<run>@<steps>.zip`."""
    return checkpoint_name(run, steps) + ".zip"


def whole_zip(path: Path) -> bool:
    """A complete SB3 checkpoint: a .zip whose central directory reads, with SB3's `data`
    member, and every member's CRC checks. (A truncated checkpoint can still open as a zip:
    the torch files inside it are zips themselves, and the reader finds one's directory.)"""
    try:
        with zipfile.ZipFile(path) as archive:
            return "data" in archive.namelist() and archive.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


def checkpoint_files(folder: Path) -> dict[Path, tuple[str, int]]:
    """The checkpoint files in `folder` (not its subfolders), each with its agent and steps
    (`checkpoint_file`); two files that would be one agent are refused, naming both."""
    files: dict[Path, tuple[str, int]] = {}
    owner: dict[str, Path] = {}
    for path in sorted(folder.glob("*.zip")):
        parsed = checkpoint_file(path.stem)
        if parsed is None:
            continue
        if parsed[0] in owner:
            raise InputError(
                f"{owner[parsed[0]].name} and {path.name} are both agent {parsed[0]}: "
                "keep one of them in the folder"
            )
        owner[parsed[0]], files[path] = path, parsed
    return files


@dataclass
class CheckpointFolder:
    """The checkpoints that appear in a folder (`<run>@<steps>.zip` or SB3's
    `<prefix>_<steps>_steps.zip`, not in subfolders), each given out once, when whole: its size
    and modification time unchanged since the previous look, and a complete .zip."""

    folder: Path
    seen: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (size, mtime_ns)
    given: set[str] = field(default_factory=set)

    def look(self) -> list[tuple[Path, str]]:
        """The new whole checkpoints since the last look: (path, agent name), by steps."""
        found = []
        for path, (name, steps) in checkpoint_files(self.folder).items():
            if name in self.given or not path.is_file():
                continue
            try:
                stat = path.stat()
            except OSError:  # removed since it was listed
                continue
            now = (stat.st_size, stat.st_mtime_ns)
            before, self.seen[name] = self.seen.get(name), now
            if before == now and whole_zip(path):
                self.given.add(name)
                found.append((steps, path, name))
        return [(path, name) for _, path, name in sorted(found)]


STATES = {
    "enqueued": "submitted",
    "already-done": "already evaluated",
    "already-running": "already being evaluated",
    "reducing": "already evaluated, being scored",
}


@dataclass(frozen=True)
class Evaluated:
    """A watched checkpoint whose evaluation ended: its batch as it ended, the checkpoint's
    scores in that batch (as a series point; None when it wrote none) and the line saying
    what went wrong (None when every unit ran clean)."""

    name: str
    info: BatchInfo
    point: SeriesPoint | None
    errors: str | None


@dataclass
class Watched:
    """What a watch did, filled in as it goes (so a caller interrupted by Ctrl-C still has
    it): each checkpoint submitted (its Submission), the evaluations seen to end, whether it
    ran on the embedded cluster and, at the end of a `once` watch, the boards they wrote."""

    submitted: dict[str, Submission] = field(default_factory=dict)  # agent name -> submission
    evaluated: dict[str, Evaluated] = field(default_factory=dict)
    embedded: bool = False
    boards: list[Board] = field(default_factory=list)  # `once`: the boards evaluations wrote

    @property
    def unfinished(self) -> list[str]:
        """The checkpoints submitted whose evaluation was not seen to end."""
        return [name for name in self.submitted if name not in self.evaluated]


def submit_found(
    target: Target, tpl: CheckpointTemplate, path: Path, name: str, say: Callable[[str], None]
) -> Submission | None:
    """Submit one checkpoint the watch found: its submission, or None (refused, said why)."""
    try:
        sub = submit_checkpoint(target, checkpoint_batch(tpl, path, name))
    except InputError as exc:
        say(f"{name}: not submitted: {exc}")
        return None
    say(
        f"{name}: {STATES.get(sub.state, sub.state)}, batch {sub.batch_id[:12]} on "
        f"{sub.leaderboard} ({sub.total} units)"
    )
    return sub


def evaluation_of(db: Store, name: str, info: BatchInfo) -> Evaluated:
    """A checkpoint's ended evaluation: its own entry in the batch (the numbers its row on the
    board has, unless a later evaluation of the same name replaced it) and its errors."""
    from arena.service.batches import finished_errors  # (0.15 s) once an evaluation ended

    parsed = parse_checkpoint(name)
    entry = next((e for e in info.entries if e.agent == name), None)
    point = None
    if entry is not None and parsed is not None:
        ended_at = info.finished_at or info.created_at
        row = LeaderboardRow(
            agent=name, score=entry.score, stats=entry.stats, batch=info.id, updated_at=ended_at
        )
        point = point_of(row, parsed[1])
    return Evaluated(name, info, point, finished_errors(db, info))


def watch(
    folder: Path,
    tpl: CheckpointTemplate,
    say: Callable[[str], None],
    *,
    once: bool = False,
    interval_s: float = 2.0,
    workers: int | None = None,
    evaluated: Callable[[Evaluated], None] | None = None,
    follow: Follow | None = None,
    watched: Watched | None = None,
) -> Watched:
    """`arena mario watch`: submit each whole checkpoint that appears in `folder`, once, until
    interrupted, telling `evaluated` of each evaluation that ends meanwhile; `once`: what is
    there now (whole: unchanged over `interval_s`), then return, on the embedded cluster (which
    may stop once the watch leaves it) after waiting for each evaluation (`follow`: who watches
    that wait, as for `arena run`). What it did is in `watched` (returned)."""
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder")
    found, done = CheckpointFolder(folder), watched if watched is not None else Watched()
    tell = evaluated or (lambda _: None)
    with evaluation_cluster(workers) as target:
        done.embedded = target.embedded
        try:
            found.look()  # notes each file's size: whole once it is unchanged at the next look
            while True:
                time.sleep(interval_s)
                for path, name in found.look():
                    sub = submit_found(target, tpl, path, name, say)
                    if sub is not None:
                        done.submitted[name] = sub
                ended(target.db, done, tell)
                if once:
                    break
            if once and target.embedded and done.unfinished:
                say(f"waiting for {len(done.unfinished)} evaluations on the embedded cluster")
                for name in done.unfinished:
                    sub = done.submitted[name]
                    watcher = follow(sub) if follow else nullcontext(Unwatched())
                    with watcher as following:
                        info = wait(target.db, sub.batch_id, target.settings, following)
                    done.evaluated[name] = evaluation_of(target.db, name, info)
                    tell(done.evaluated[name])
            if once:
                names = {b for e in done.evaluated.values() for b in e.info.boards}
                done.boards = boards_made(target.db, sorted(names))
        except KeyboardInterrupt:
            if target.embedded:
                say("leaving the embedded cluster (it stops once no command uses it)")
            raise
    return done


def ended(db: Store, done: Watched, tell: Callable[[Evaluated], None]) -> None:
    """Note (and tell) each submitted evaluation that has ended since the last look."""
    for name in done.unfinished:
        batch_id = done.submitted[name].batch_id
        info = db.batch(batch_id) if db.status(batch_id) in FINISHED else None
        if info is not None:
            done.evaluated[name] = evaluation_of(db, name, info)
            tell(done.evaluated[name])
