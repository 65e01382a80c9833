"""Checkpoints submitted from a background thread, so that training never waits on an
evaluation (docs/mario.md, "Evaluating while training"). The thread opens the cluster at its
first checkpoint (ARENA_REDIS_URL's, or the data folder's embedded cluster, attached to (started
if none runs) until `close`), validates and submits each checkpoint in turn, and logs what
fails: nothing it does raises into the caller, which reads `errors` (each checkpoint not
submitted is in `submitted` too, state `not-submitted`, with its reason)."""

from __future__ import annotations

import logging
import queue
import threading
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from arena.service.training import (
    CheckpointTemplate,
    Evaluated,
    Target,
    checkpoint_batch,
    evaluation_cluster,
    evaluation_of,
    submit_checkpoint,
    wait_finished,
)
from scoring.compare import Comparison
from tasks.records import FINISHED

log = logging.getLogger("arena.training")
POLL_S = 1.0  # how often the thread looks for evaluations that ended


@dataclass(frozen=True)
class Landed:
    """An evaluation that ended: the checkpoint's path and its evaluation, compared with the
    best checkpoint before it (`arena compare BOARD THIS BEST` on the first board: None for
    the first, or where they cannot be compared), and whether it is the new best: the first
    with scores, then one whose interval says it beats the best (`better` "a"), never a point
    estimate alone."""

    path: Path
    evaluated: Evaluated
    against_best: Comparison | None
    best_before: str | None  # the agent it was compared with
    new_best: bool


@dataclass(frozen=True)
class Submitted:
    agent: str
    path: Path
    batch_id: str  # "" when not submitted
    state: str  # the submission's: enqueued, already-done, already-running, reducing; or
    # not-submitted (no cluster to evaluate on, or the checkpoint refused): `error` says why
    error: str | None = None


class BackgroundEvaluations:
    """`submit` queues a checkpoint and returns at once; `close` ends the thread, on the
    embedded cluster first waiting (up to `wait_s`; None: no limit) for the submitted
    evaluations to finish, as that cluster stops with it."""

    def __init__(self, tpl: CheckpointTemplate, workers: int | None = None) -> None:
        self.template, self.workers = tpl, workers
        self.submitted: list[Submitted] = []
        self.errors: list[str] = []  # one line per checkpoint that could not be submitted
        self.embedded: bool | None = None  # known once the cluster is open
        self.landed: queue.Queue[Landed] = queue.Queue()  # evaluations that ended, in order
        self.best: str | None = None  # the best checkpoint so far (its agent name)
        self._pending: dict[str, tuple[Path, str]] = {}  # batch id -> checkpoint, agent: not ended
        self._queue: queue.Queue[tuple[Path, str] | None] = queue.Queue()
        self._wait_s: float | None = None
        self._thread = threading.Thread(target=self._run, name="arena-evaluations", daemon=True)
        self._thread.start()

    def submit(self, path: Path, agent: str) -> None:
        self._queue.put((path, agent))

    def close(self, wait: bool = True, wait_s: float | None = None) -> None:
        """Submit what is queued, then (embedded, `wait`) wait for the evaluations, and stop."""
        self._wait_s = wait_s if wait else 0.0
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        with ExitStack() as stack:
            target: Target | None = None
            while (item := self._next(target)) is not None:
                if target is None:
                    try:
                        target = stack.enter_context(evaluation_cluster(self.workers))
                    except Exception as exc:
                        self._failed(item[1], f"no cluster to evaluate on: {exc}", item[0])
                        continue
                    self.embedded = target.embedded
                self._submit(target, *item)
            if target is not None and target.embedded:
                self._finish(target)
            if target is not None:
                self._land(target)

    def _next(self, target: Target | None) -> tuple[Path, str] | None:
        """The next checkpoint queued (None: close), looking for ended evaluations meanwhile."""
        while True:
            try:
                return self._queue.get(timeout=POLL_S)
            except queue.Empty:
                if target is not None:
                    self._land(target)

    def _land(self, target: Target) -> None:
        """Each pending evaluation that ended onto `landed`, judged against the best."""
        for batch_id, (path, agent) in list(self._pending.items()):
            try:
                if target.db.status(batch_id) not in FINISHED:
                    continue
                info = target.db.batch(batch_id)
                if info is None:
                    continue
                done = evaluation_of(target.db, agent, info)
                against = self._against_best(target, done)
            except Exception as exc:  # a store gone: tried again at the next look
                log.warning("arena: reading an ended evaluation: %s", exc)
                return
            del self._pending[batch_id]
            before = self.best
            new_best = done.point is not None and (
                before is None or (against is not None and against.better == "a")
            )
            if new_best:
                self.best = done.name
            log.info("arena: %s evaluated%s", agent, ", the new best" if new_best else "")
            self.landed.put(Landed(path, done, against, before, new_best))

    def _against_best(self, target: Target, done: Evaluated) -> Comparison | None:
        from arena.service.compare import compare_agents  # (0.2 s) once an evaluation ended

        if self.best is None or done.point is None or not done.info.boards:
            return None
        board = sorted(done.info.boards)[0]
        try:
            return compare_agents(target.db, board, done.name, self.best).comparison
        except Exception as exc:  # the best's row replaced, or no episodes: no verdict
            log.warning("arena: %s against the best %s: %s", done.name, self.best, exc)
            return None

    def _submit(self, target: Target, path: Path, agent: str) -> None:
        try:
            batch = checkpoint_batch(self.template, path, agent)
            sub = submit_checkpoint(target, batch)
        except Exception as exc:
            self._failed(agent, str(exc), path)
            return
        self.submitted.append(Submitted(agent, path, sub.batch_id, sub.state))
        self._pending[sub.batch_id] = (path, agent)
        log.info("arena: %s submitted (batch %s, %s)", agent, sub.batch_id[:12], sub.state)

    def _finish(self, target: Target) -> None:
        ids = [s.batch_id for s in self.submitted if s.batch_id]
        if self._wait_s == 0.0 or not ids:
            return
        log.info("arena: waiting for %d evaluations on the embedded cluster", len(ids))
        try:
            left = wait_finished(target.db, ids, self._wait_s)
        except Exception as exc:
            log.error("arena: lost the embedded cluster while waiting: %s", exc)
            return
        if left:
            log.warning(
                "arena: %d evaluations unfinished when training left the embedded cluster (it "
                "stops once no command uses it); `arena mario watch FOLDER --once` on this data "
                "folder resumes them",
                len(left),
            )

    def _failed(self, agent: str, why: str, path: Path | None = None) -> None:
        reason = why.splitlines()[0] if why else "failed"
        self.errors.append(f"{agent}: {reason}")
        self.submitted.append(Submitted(agent, path or Path(), "", "not-submitted", reason))
        log.error("arena: evaluation of %s: %s: not submitted", agent, reason)
