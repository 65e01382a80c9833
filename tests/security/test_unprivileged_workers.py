"""The security tests attack workers that are not root (issue 33: "worker as an unprivileged
user"). On c3f317a tests/security/cluster.py fell back to root workers without a word whenever
uid 65534 could not run the venv's interpreter (pyenv's, under /root, mode 0700): every attack
then hit a root worker. Now a root run drops the workers to uid 65534, says why when it cannot,
and fails under CI=true rather than fall back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.security.cluster import NOBODY, secure_cluster

pytestmark = pytest.mark.integration


def _uids(pid: int) -> set[int]:
    """Real, effective, saved and filesystem uids of a process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return {int(u) for u in line.split()[1:]}
    raise AssertionError(f"no Uid line for {pid}")


def test_the_workers_run_unprivileged(tmp_path: Path) -> None:
    with secure_cluster(tmp_path, concurrency=1) as cluster:
        if not cluster.unprivileged:  # a developer's root run that cannot drop: warned
            pytest.skip("the workers run as root here (see the warning for why)")
        pids = [cluster.pool.pid, *cluster.worker_pids()]
        assert len(pids) == 2
        expected = {NOBODY} if os.getuid() == 0 else {os.getuid()}
        assert all(_uids(pid) == expected for pid in pids), [_uids(p) for p in pids]
