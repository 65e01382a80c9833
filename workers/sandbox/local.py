"""The local-process sandbox: a command runs as the worker's user, on the worker's filesystem,
in its own session with rlimits and a deadline. It contains accidents (a hung test, a runaway
build, a stray background server), not attacks: see docs/sandbox.md for what it does not stop.

Each command runs under a helper process (`_reaper.py`) that owns the deadline and the kill. It
is a child subreaper, so even descendants that started their own session or double-forked
reparent to it and are killed; and it enforces the deadline and cleans up on its own should the
worker die meanwhile (it gets SIGTERM when its parent exits).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, ClassVar

from workers.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    CommandResult,
    Sandbox,
    SandboxLimits,
    scrubbed_environment,
)

REAPER = str(Path(__file__).with_name("_reaper.py"))
# How long past the deadline the worker waits for the helper before killing it: the helper's
# own grace and kill loop (at most ~6 s) fit well inside.
HELPER_SLACK_S = 30.0


class LocalSandbox(Sandbox):
    """Runs `shell -c command` locally. `grace_s`: between SIGTERM and SIGKILL at the kill."""

    kind: ClassVar[str] = "local"

    def __init__(self, shell: str = "/bin/sh", grace_s: float = 1.0) -> None:
        self.shell = shell
        self.grace_s = grace_s

    def run(
        self, command: str, workdir: Path, timeout_s: float, env: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> CommandResult:  # fmt: skip
        limits = limits or SandboxLimits()
        started, ended = time.monotonic(), 0.0

        def result(status: dict[str, str], output: str = "", size: int = 0) -> CommandResult:
            code = status.get("exit_code", "")
            return CommandResult(
                command=command, exit_code=int(code) if code else None,
                timed_out=status.get("timed_out") == "1",
                duration_s=(ended or time.monotonic()) - started, output=output, output_bytes=size,
                error=status.get("error") or None,
            )  # fmt: skip

        if not Path(workdir).is_dir():
            return result({"error": f"workdir {workdir} does not exist or is not a directory"})
        if "\0" in command or math.isnan(timeout_s):
            return result({"error": "a NUL byte in the command or a timeout_s of NaN"})
        bounds = [limits.memory_mb, limits.cpu_s, limits.file_size_mb, limits.open_files]
        argv = [
            sys.executable, "-I", "-S", REAPER, self.shell, repr(float(timeout_s)),
            repr(self.grace_s), str(os.getpid()),
            *("" if v is None else str(v) for v in [*bounds, limits.processes]), command,
        ]  # fmt: skip
        with tempfile.TemporaryFile() as out:
            try:
                helper = subprocess.Popen(
                    argv, cwd=workdir, env=scrubbed_environment(env), stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=out, start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                return result({"error": f"could not start the sandbox helper: {exc}"})
            status = self._wait(helper, timeout_s)
            ended = time.monotonic()
            size = os.fstat(out.fileno()).st_size
            if "exit_code" not in status:  # the helper failed: say so, its traceback is in out
                status["error"] = status.get("error") or "the sandbox helper failed"
            return result(status, read_capped(out, size, max_output_bytes), size)

    def _wait(self, helper: subprocess.Popen[bytes], timeout_s: float) -> dict[str, str]:
        limit = timeout_s + self.grace_s + HELPER_SLACK_S if math.isfinite(timeout_s) else None
        try:
            text, _ = helper.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.communicate()
            return {"error": f"the sandbox helper did not finish within {limit:g} s; killed"}
        except BaseException:  # KeyboardInterrupt, SystemExit: the helper kills the command
            helper.terminate()
            helper.communicate()
            raise
        lines = text.decode(errors="replace").splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)


def read_capped(file: IO[bytes], size: int, max_bytes: int) -> str:
    """The file's text, or its head and tail around a marker line when over `max_bytes`."""
    file.seek(0)
    if size <= max_bytes:
        return file.read(size).decode(errors="replace")
    head_bytes = max(max_bytes, 0) // 2
    tail_bytes = max(max_bytes, 0) - head_bytes
    head = file.read(head_bytes)
    file.seek(size - tail_bytes)
    tail = file.read(tail_bytes)
    cut = size - head_bytes - tail_bytes
    marker = f"\n[... {cut} bytes of output cut by the sandbox ...]\n"
    return head.decode(errors="replace") + marker + tail.decode(errors="replace")
