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
    Target,
    checkpoint_batch,
    evaluation_cluster,
    submit_checkpoint,
    wait_finished,
)

log = logging.getLogger("arena.training")


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
            while (item := self._queue.get()) is not None:
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

    def _submit(self, target: Target, path: Path, agent: str) -> None:
        try:
            batch = checkpoint_batch(self.template, path, agent)
            sub = submit_checkpoint(target, batch)
        except Exception as exc:
            self._failed(agent, str(exc), path)
            return
        self.submitted.append(Submitted(agent, path, sub.batch_id, sub.state))
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
