"""Which checkpoint files a spec may name (a Mario agent's `sb3:`): docs/security.md.

A checkpoint path is read, hashed and loaded on the machine that validates the spec, then on
the workers; from a token holder of the HTTP API or a stored schedule, a path that reached the
file system unchecked was an oracle (`/etc/nonexistent`, a folder and `/etc/passwd` answered
three different ways, the last with its sha256 in the public batch) and a way to hang the API
(`/dev/zero` was read to the end). The rule, like ARENA_REPO_ROOTS for repositories: a
checkpoint resolves (links followed) under a folder ARENA_CHECKPOINT_ROOTS lists; with none
listed the operator's own CLI (and a worker running what it accepted) may name any file, the
API and the schedules none. Only a regular file of at most MAX_ARTIFACT_BYTES is taken, checked
with stat before anything reads it, and every refusal says the same thing whatever the reason
(missing, a folder, a device, outside the roots, unreadable, too big): the answer tells nothing
about the API host's files, and no digest of a file refused is ever computed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Any

from tasks.repo_policy import Asker
from tasks.settings import ArenaSettings, load_settings
from tasks.validation import InputError
from workers.fingerprint import MAX_ARTIFACT_BYTES

ROOTS_SETTING = "ARENA_CHECKPOINT_ROOTS"
MAX_SHOWN = 100  # characters of a refused path quoted back


def _shown(path: str) -> str:
    text = repr(path)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


@dataclass(frozen=True)
class CheckpointPolicy:
    """What checkpoint files `asker` may name, from the operator's settings."""

    asker: Asker
    roots: tuple[Path, ...]  # resolved; empty: see `anywhere`
    max_bytes: int = MAX_ARTIFACT_BYTES

    @classmethod
    def of(cls, settings: ArenaSettings, asker: Asker) -> CheckpointPolicy:
        roots = settings.checkpoint_root_list()
        return cls(asker=asker, roots=tuple(dict.fromkeys(r.resolve() for r in roots)))

    @property
    def anywhere(self) -> bool:
        """No roots set: the operator's CLI (and a worker running what it submitted) may name
        any file."""
        return not self.roots and self.asker in ("operator", "worker")

    def refusal(self, field: str, path: str) -> InputError:
        """The one refusal, whatever the reason."""
        wanted = f"a readable regular file of at most {self.max_bytes / (1 << 30):g} GiB"
        if self.roots:
            where = f"{wanted} under {ROOTS_SETTING}"
        elif self.anywhere:
            where = wanted
        else:
            where = (
                f"{ROOTS_SETTING} is empty: only the operator's own CLI may name a checkpoint file"
            )
        return InputError(f"{field}: {_shown(path)} is not a checkpoint Arena may read ({where})")

    def admit(self, path: str, field: str = "sb3") -> str:
        """The file's real path (links followed), once `asker` may name it and it is a regular
        file within the size cap; InputError `field: ...` otherwise. Nothing is read."""
        if any(ord(c) < 32 or ord(c) == 127 for c in path):
            raise InputError(f"{field}: contains control characters")
        given = Path(path)
        if self.asker == "operator":
            given = given.expanduser()  # the operator's own shell would have expanded it
        elif not given.is_absolute():
            raise self.refusal(field, path)  # relative to the API's working directory? no
        try:
            resolved = given.resolve()
        except (OSError, RuntimeError):  # a loop of links
            raise self.refusal(field, path) from None
        if not self.anywhere and not any(resolved.is_relative_to(r) for r in self.roots):
            raise self.refusal(field, path)
        try:
            stat = resolved.stat()
        except OSError:
            raise self.refusal(field, path) from None
        if not S_ISREG(stat.st_mode) or stat.st_size > self.max_bytes:
            raise self.refusal(field, path)
        if not os.access(resolved, os.R_OK):
            raise self.refusal(field, path)
        return str(resolved)


def admit_checkpoints(data: dict[str, Any], asker: Asker) -> dict[str, Any]:
    """A spec's agents with each `sb3:` checkpoint as `asker` may name it, checked before
    anything reads or hashes it: from the API or a schedule, as its real path (what the
    workers will open); the operator's own path stays as given (a batch's identity)."""
    agents = data.get("agents")
    if asker == "worker" or not isinstance(agents, list):
        return data  # a stored spec: admitted when submitted (the worker checks its units)
    policy = CheckpointPolicy.of(load_settings(), asker)
    admitted = list(agents)
    for index, agent in enumerate(agents):
        if isinstance(agent, dict) and isinstance(agent.get("sb3"), str):
            path = policy.admit(agent["sb3"], f"agents[{index}].sb3")
            if asker != "operator":
                admitted[index] = {**agent, "sb3": path}
    return {**data, "agents": admitted}


def worker_checkpoint(path: str) -> str:
    """A stored unit's checkpoint as this worker's settings allow it (checked again where it
    is read: a spec in Redis is only as trusted as whoever could write it)."""
    return CheckpointPolicy.of(load_settings(), "worker").admit(path)
