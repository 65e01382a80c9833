"""The local sandbox's helper: runs one command, enforces its deadline and its limits, and kills
every process the command started. It stays outside the command's jail: the command never sees
it, its argv (which names the worker's pid) or its environment (empty in a jail).

A fresh interpreter (`python -I -S -c "import _reaper; _reaper.main(...)"`: cached bytecode),
not a fork of the worker (Python in a fork of a threaded process can deadlock); on every
command's critical path, so it imports only light modules (typing, signal, json or subprocess
would each add 10-15 ms of startup; ctypes 5 ms, which only the unjailed mode pays). It is
imported as the top-level package `_reaper` there (workers/sandbox/ on its path) and as
`workers.sandbox._reaper` by tools: its modules import each other relatively, which serves both.

argv: MODE TIMEOUT_S GRACE_S PARENT_PID, the five RLIMITS ("" unlimited), then PIDS MEMORY_MB
DISK_MB (the jail's caps, "" none) and WATCH (the work dir), then `--` and the argv to run.
MODE "jail": the argv is a bubblewrap command line (the reaper adds `--json-status-fd`); MODE
"plain": `shell -c command` run as the worker's user (trusted code only). fd 0: /dev/null;
fd 2: the output file, the command's stdout and stderr; fd 1: the status, `key=value` lines.

The modules: `common` (the child's start, its exit status, signals and the stop they raise),
`jail` (a jailed run: bwrap, its pid namespace, the kill), `caps` (the jail's limits the kernel
does not enforce, polled), `plain` (an unjailed run as a child subreaper).
"""

from __future__ import annotations

import os

from .caps import Watch
from .common import on_signal
from .jailed import run_jailed
from .plain import run_plain

TYPE_CHECKING = False  # the typing module alone costs ~15 ms of startup
if TYPE_CHECKING:
    import signal as _signal  # the same functions, without the enum module's startup cost
else:
    import _signal


def main(argv: list[str]) -> None:
    split = argv.index("--")
    mode, timeout_s, grace_s, parent, *limits, pids, memory_mb, disk_mb, folder = argv[:split]
    command = argv[split + 1 :]
    for signum in (_signal.SIGTERM, _signal.SIGALRM):
        _signal.signal(signum, on_signal)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])  # a worker thread's mask is inherited
    timeout, grace = float(timeout_s), float(grace_s)
    if mode == "jail":
        watch = Watch(pids, memory_mb, disk_mb, folder)
        status = run_jailed(command, timeout, grace, int(parent), limits, watch)
    else:
        status = run_plain(command, timeout, grace, int(parent), limits)
    lines = [f"{key}={' '.join(value.split())}\n" for key, value in status.items()]
    try:
        os.write(1, "".join(lines).encode())
    finally:  # (OSError: the worker is gone, nobody to tell)
        os._exit(0)  # the interpreter's own shutdown would cost ~4 ms of the command's time
