"""A real cluster as a hostile user meets it (issue 33): a Redis with a password, an API token in
the workers' environment, and worker processes that run as an unprivileged user (uid 65534)
whenever the tests run as root, as a deployment's `user: 10001` does.

    with secure_cluster(tmp_path, extra_env={...}) as cluster:
        path = cluster.folder / "agents"      # readable by the workers: put agents here
        batch_id = cluster.submit(spec)       # `arena submit` with the cluster's environment
        cluster.wait(batch_id)                # the batch's final status
        cluster.worker_pids()                 # the pool's worker processes (to measure them)
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from arena.embedded import stop, worker_command
from tasks.store import Store
from tests.integration.conftest import ROOT, arena, wait_finished
from tests.needs import require_bwrap
from tests.security.servers import password_redis

PASSWORD = "hunter2-" + secrets.token_hex(8)
TOKEN = "arena-api-token-" + secrets.token_hex(8)
NOBODY = 65534


@dataclass
class SecureCluster:
    db: Store
    env: dict[str, str]  # for `arena` commands and the workers: the password URL, the token
    redis_url: str
    folder: Path  # world-readable, the workers' own: agents, checkpoints, data
    data_dir: Path
    pool: subprocess.Popen[bytes]
    unprivileged: bool  # the workers are not root (uid 65534 when the tests run as root)

    def submit(self, spec: dict[str, Any], *args: str) -> str:
        path = self.folder / f"spec-{secrets.token_hex(4)}.json"
        path.write_text(json.dumps(spec))
        submitted = arena("submit", str(path), *args, env=self.env)
        assert submitted.returncode == 0, submitted.stderr
        return submitted.stdout.strip()

    def wait(self, batch_id: str, timeout: float = 600) -> str:
        return wait_finished(self.db, batch_id, timeout=timeout)

    def worker_pids(self) -> list[int]:
        """The prefork pool's worker processes (children of Celery's main process)."""
        main = self.pool.pid  # setpriv execs Celery in place: the same pid
        path = Path(f"/proc/{main}/task/{main}/children")
        return [int(p) for p in path.read_text().split()] if path.exists() else []

    def log_tail(self, lines: int = 60) -> str:
        log = self.data_dir / "worker.log"
        text = log.read_text(errors="replace") if log.exists() else "(no worker.log)"
        return "\n".join(text.splitlines()[-lines:])


def _shared_folder() -> Path:
    """A folder the unprivileged workers can enter (pytest's tmp_path is root's, mode 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="arena-secure-"))
    folder.chmod(0o755)
    if os.getuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
    return folder


def give_to_workers(path: Path) -> None:
    """Make what a test wrote under `cluster.folder` the workers' (when they are uid 65534)."""
    if os.getuid() != 0:
        return
    for dirpath, dirnames, filenames in os.walk(path):
        os.chown(dirpath, NOBODY, NOBODY)
        for name in [*dirnames, *filenames]:
            os.chown(os.path.join(dirpath, name), NOBODY, NOBODY, follow_symlinks=False)


@contextmanager
def secure_cluster(
    tmp_path: Path,
    extra_env: dict[str, str] | None = None,
    *,
    paths: tuple[Path, ...] = (),
    concurrency: int = 2,
    queues: str = "cpu,gpu",
) -> Iterator[SecureCluster]:
    """The cluster; `paths` go on the workers' PYTHONPATH (agent packages)."""
    require_bwrap()
    folder = _shared_folder()
    data_dir = folder / "data"
    data_dir.mkdir()
    home = folder / "home"
    home.mkdir()
    give_to_workers(folder)
    try:
        with password_redis(tmp_path / "redis", PASSWORD) as server:
            url = f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0"
            env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
            env |= {
                "ARENA_REDIS_URL": url,
                "ARENA_API_TOKENS": TOKEN,
                "ARENA_DATA_DIR": str(data_dir),
                "HOME": str(home),
                "PYTHONPATH": os.pathsep.join([*(str(p) for p in paths), str(ROOT)]),
            }
            env |= extra_env or {}
            unprivileged = _unprivileged()
            prefix = (
                ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
                if unprivileged and os.getuid() == 0
                else []
            )
            hostname = f"secure-{os.getpid()}-{secrets.token_hex(3)}@%h"
            argv = [*prefix, *worker_command(concurrency, queues, hostname)]
            with open(data_dir / "worker.log", "ab") as log:
                pool = subprocess.Popen(
                    argv,
                    env=env,
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            try:
                _wait_for_workers(pool, concurrency)
                yield SecureCluster(
                    Store(server.client), env, url, folder, data_dir, pool, unprivileged
                )
            finally:
                stop(pool, timeout=10)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _why_not_nobody() -> str | None:
    """For a root run: None when uid 65534 can run this interpreter with the checkout on its
    path, else why not. A venv whose Python lives under /root (mode 0700, as pyenv puts it) is
    the usual reason: scripts/_venv.sh makes its venv from an interpreter any user can run."""
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    drop = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
    probe = subprocess.run(
        [*drop, sys.executable, "-c", "import sys, celery, tasks.units; print(sys.version)"],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if probe.returncode == 0 and probe.stdout.strip() == sys.version:
        return None
    closed = _closed_folder(Path(sys.executable).resolve(), ROOT, Path(sys.prefix))
    where = (
        f"{closed} (mode {closed.stat().st_mode & 0o777:04o}) is closed to other users; "
        if closed
        else ""
    )
    error = (probe.stderr.strip().splitlines() or ["no output"])[-1]
    return f"uid {NOBODY} cannot run {sys.executable}: {where}{error}"


def _closed_folder(*paths: Path) -> Path | None:
    """The first folder on the way to `paths` that others may not enter."""
    for path in paths:
        for folder in reversed(path.parents):
            if not folder.stat().st_mode & 0o001:
                return folder
    return None


def _unprivileged() -> bool:
    """Whether the workers can run as uid 65534 here. Under CI (CI=true) a root run that cannot
    drop to it fails: the security tests would otherwise attack a root worker and pass."""
    if os.getuid() != 0:
        return True  # the tests' own user, unprivileged already
    why = _why_not_nobody()
    if why is None:
        return True
    message = f"secure_cluster: the workers run as root: {why}"
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        fix = "as root, `rm -rf .venv` and run scripts/test: scripts/_venv.sh makes a new one"
        pytest.fail(f"{message}. Required under CI; {fix} from an interpreter others can run")
    warnings.warn(message, stacklevel=3)
    return False


def _wait_for_workers(pool: subprocess.Popen[bytes], concurrency: int) -> None:
    deadline = time.monotonic() + 60
    path = Path(f"/proc/{pool.pid}/task/{pool.pid}/children")
    while time.monotonic() < deadline:
        if pool.poll() is not None:
            raise AssertionError(f"the worker pool exited ({pool.returncode})")
        if path.exists() and len(path.read_text().split()) >= concurrency:
            return
        time.sleep(0.1)
    raise AssertionError("the worker pool did not start its processes within 60 s")


__all__ = ["NOBODY", "PASSWORD", "TOKEN", "SecureCluster", "give_to_workers", "secure_cluster"]
