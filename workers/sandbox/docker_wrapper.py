"""What runs inside a Docker sandbox's container and what comes out of it: the wrapper that
runs each `exec`ed command and kills whatever it left, the report it writes on its own stderr
(exit code, out-of-memory kills), the capped output, the container's environment and ulimits.
workers/sandbox/docker.py drives the container; this module knows what runs in it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from workers.sandbox.base import SandboxLimits, is_scrubbed, scrubbed_environment

# Variables that describe the worker's machine, not the image: never passed in.
HOST_VARIABLES = frozenset(
    {"PATH", "HOME", "PWD", "OLDPWD", "HOSTNAME", "SHLVL", "_", "LD_PRELOAD", "LD_LIBRARY_PATH"}
)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KEEPER_UID = 65534  # nobody: the session container's init and keeper (see `keeper_uid`)
KEEPER_MAX_S = 10**8  # the keeper's sleep when the session has no deadline (about 3 years)
START_MARK, STATUS_MARK = "arena-sandbox-start", "arena-sandbox-status"  # the wrapper's reports
STATUS_BYTES = 4096  # of the wrapper's stderr kept
OOM_READ_WAIT_S = 3.0  # for the OOM count of a container whose wrapper could not report it


class OutputCap:
    """A command's output, held within `max_bytes`: its head and its tail, and its full size."""

    def __init__(self, max_bytes: int) -> None:
        self.head_limit = max(max_bytes, 0) // 2
        self.tail_limit = max(max_bytes, 0) - self.head_limit
        self.head, self.tail = bytearray(), bytearray()
        self.size = 0
        self.failure: BaseException | None = None  # the stream broke off

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.tail_limit:  # trimmed now and then: amortised O(1)
            del self.tail[: len(self.tail) - self.tail_limit]

    def text(self) -> str:
        """As `read_capped` (local.py): whole, or head and tail around a marker line."""
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        if self.size <= self.head_limit + self.tail_limit:
            return (bytes(self.head) + bytes(self.tail)).decode(errors="replace")
        cut = self.size - len(self.head) - len(tail)
        marker = f"\n[... {cut} bytes of output cut by the sandbox ...]\n"
        return self.head.decode(errors="replace") + marker + tail.decode(errors="replace")


def container_environment(env: Mapping[str, str] | None, path: str) -> dict[str, str]:
    """The scrubbed environment, less what describes the worker's machine, with the image's PATH
    and a HOME the command can write (/tmp: the root is read-only)."""
    scrubbed = scrubbed_environment(env)
    kept = {k: v for k, v in scrubbed.items() if k.upper() not in HOST_VARIABLES}
    return {**kept, "PATH": path, "HOME": "/tmp"}


def image_scrubbed(image: Any) -> list[str]:
    """The variables the image's own ENV sets that the scrub would drop (the worker image's
    ARENA_WORK_DIR, say): the engine cannot unset them, the command's shell does."""
    names = (item.split("=", 1)[0] for item in image.attrs.get("Config", {}).get("Env") or [])
    return sorted({name for name in names if NAME.fullmatch(name) and is_scrubbed(name)})


# The session's commands run by `exec` as the worker's uid, under this script: it kills what an
# earlier command left, runs the command (stderr joined to stdout: one stream, interleaved
# exactly as written; the engine reads two pipes and could reorder them. Joined in the child:
# what sh says of a killed child, "Killed", stays on the script's stderr), SIGKILLs everything
# it left (every process of that uid but the script: the container's init and keeper run as
# another uid), and reports the command's status and the memory cgroup's OOM kills meanwhile on
# its own stderr (a channel the command's output never reaches). Only shell builtins after the
# command: a fork bomb may have used up the pids limit. Variables, not `$(...)`: no subshell.
REAP_SCRIPT = """\
arena_reap() {
  while :; do
    kill -9 -1 2>/dev/null
    arena_left=
    for arena_p in /proc/[0-9]*; do
      case ${arena_p#/proc/} in 1|$$) continue ;; esac
      if [ -O "$arena_p" ]; then arena_left=1; break; fi
    done
    [ -z "$arena_left" ] && return 0
  done
}
"""
OOM_SCRIPT = """\
arena_ooms() {
  arena_n=0
  for arena_f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
    if [ -r "$arena_f" ]; then
      while read -r arena_k arena_v; do
        if [ "$arena_k" = oom_kill ]; then arena_n=$arena_v; fi
      done < "$arena_f"
      return 0
    fi
  done
}
"""
MAIN_SCRIPT = f"""\
arena_reap
arena_ooms; arena_before=$arena_n
echo "{START_MARK} $arena_before" >&2
/bin/sh -c 'exec 2>&1; exec /bin/sh -c "$1"' /bin/sh "$1" </dev/null
arena_code=$?
arena_reap
arena_ooms
echo "{STATUS_MARK} $arena_code $((arena_n - arena_before))" >&2
exit 0
"""


def wrapper(unset: list[str]) -> str:
    """The script a command runs under (`/bin/sh -c SCRIPT /bin/sh COMMAND`): first drop
    `unset`, the variables the image's ENV sets that the scrub would drop."""
    drop = f"unset {' '.join(unset)}\n" if unset else ""
    return drop + REAP_SCRIPT + OOM_SCRIPT + MAIN_SCRIPT


class WrapperStatus:
    """What the wrapper reported on its stderr: the OOM-kill count before the command, and the
    command's exit code and the OOM kills meanwhile (None: not reported, the wrapper died)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > STATUS_BYTES:  # only the wrapper writes here: a little at most
            del self.data[: len(self.data) - STATUS_BYTES]

    def _last(self, mark: str) -> list[int] | None:
        found = None
        for line in self.data.decode(errors="replace").splitlines():
            words = line.split()
            if words[:1] == [mark] and all(w.isdigit() for w in words[1:]) and len(words) > 1:
                found = [int(w) for w in words[1:]]
        return found

    def before(self) -> int | None:
        found = self._last(START_MARK)
        return found[0] if found else None

    def outcome(self) -> tuple[int, int] | None:
        found = self._last(STATUS_MARK)
        return (found[0], found[1]) if found and len(found) == 2 else None


def drain_demuxed(stream: Iterable[Any], cap: OutputCap, status: WrapperStatus) -> None:
    """An exec's demultiplexed stream: stdout (the command's output) to `cap`, stderr (the
    wrapper's reports) to `status`."""
    try:
        for out, err in stream:
            if out:
                cap.feed(out)
            if err:
                status.feed(err)
    except Exception as exc:  # the engine went away: the output so far is kept
        cap.failure = exc


def keeper_uid() -> int:
    """The uid of the session container's init and keeper: not the worker's, so the wrapper's
    `kill -9 -1` (as the worker's uid, without CAP_KILL) cannot end them."""
    return KEEPER_UID if os.getuid() != KEEPER_UID else KEEPER_UID - 1


def ulimits(limits: SandboxLimits) -> list[Any]:
    """The per-process limits a cgroup does not cover, as `docker.types.Ulimit`s."""
    from docker.types import Ulimit  # here: only workers that use Docker need the engine

    found = [Ulimit(name="core", soft=0, hard=0)]  # no core files in the work dir
    if limits.file_size_mb is not None:
        size = limits.file_size_mb << 20
        found.append(Ulimit(name="fsize", soft=size, hard=size))
    if limits.open_files is not None:
        found.append(Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files))
    if limits.cpu_s is not None:  # SIGXCPU at the limit, SIGKILL a second later
        found.append(Ulimit(name="cpu", soft=limits.cpu_s, hard=limits.cpu_s + 1))
    return found


def out_of_memory(limits: SandboxLimits) -> str:
    if limits.memory_mb is None:
        return "killed: out of memory"
    return f"killed: out of memory (limit {limits.memory_mb} MiB)"
