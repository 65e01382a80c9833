"""Full disks, told by their reason (issue 34, finding 4): the embedded data folder full before
a run, full mid-run (its private Redis exits), and a cluster's Redis whose folder is on a full
disk. Real disks: a small tmpfs mounted for the test (root only: CI runs as root), real
redis-server processes, real `arena` commands and workers."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from arena.embedded.host import read_state
from arena.web.app import create_app
from tasks.settings import ArenaSettings
from tasks.store import Store
from tests.integration.conftest import ARENA, ROOT, arena, bandit_spec
from tests.integration.test_cluster import submit
from tests.integration.test_embedded import embedded_env, no_leftovers
from tests.needs import unavailable

pytestmark = pytest.mark.integration


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs: a disk the test can fill."""
    if os.geteuid() != 0:
        unavailable("mounting a small tmpfs (a disk to fill) needs root; CI runs as root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        unavailable(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Write to `disk` until it is full."""
    with open(disk / "filler", "ab", buffering=0) as out:
        try:
            while True:
                out.write(bytes(64 * 1024))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    with open(disk / "filler", "ab", buffering=0) as out:  # the last partial block too
        try:
            while True:
                out.write(b"\0")
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_full_data_folder_before_a_run_is_one_line(small_disk: Path, write_spec) -> None:
    """Before (c3f317a): a 53-line traceback ending in `OSError: [Errno 28]`; here (8ad7377)
    `RuntimeError: the embedded cluster did not start:  (see …/host.log)` with a traceback,
    its host.log empty (the host could not write it either)."""
    fill(small_disk)
    data = small_disk / "data"
    done = arena("run", str(write_spec(bandit_spec())), env=embedded_env(data), timeout=120)
    line = one_line(done.stderr)
    assert done.returncode == 1, (done.returncode, line)  # the machine cannot run it (not 2)
    assert str(data) in line and "0 B free of 4.0 MiB" in line and "disk is full" in line, line
    no_leftovers(data)


def test_a_data_folder_that_fills_mid_run_is_said_at_once(small_disk: Path, write_spec) -> None:
    """The private Redis exits ("Short write" to its append-only file) once the disk fills
    under a running batch. Before: `arena run` said "lost Redis … reconnecting", waited 300 s
    (ARENA_REDIS_RETRY_S) for a Redis nothing restarts, then "the batch goes on where Redis
    is" with no worker left."""
    data = small_disk / "data"
    spec = bandit_spec(params={"pulls": 3000}, protocol={"episodes": 200, "seed": 3})
    run = subprocess.Popen(
        [ARENA, "run", str(write_spec(spec))],
        env={**embedded_env(data), "ARENA_WORKERS": "1"},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_stored(data, run, 20)
        fill(small_disk)
        filled = time.monotonic()
        _, err = run.communicate(timeout=60)
    finally:
        run.kill()
    took = time.monotonic() - filled
    line = one_line(err.split("\r")[-1])  # the progress bar's last redraw, then the error
    assert run.returncode == 1, (run.returncode, err)
    assert took < 10, took  # not ARENA_REDIS_RETRY_S (300 s)
    assert line.startswith("arena: the embedded Redis exited (") and "AOF" in line, line
    assert str(data) in line and "free of 4.0 MiB: its disk is full" in line, line
    no_leftovers(data)  # its host and workers end with it


def wait_stored(data: Path, run: subprocess.Popen[str], units: int) -> None:
    """Until the embedded cluster's running batch has `units` results stored."""
    deadline = time.monotonic() + 60
    while True:
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        state = read_state(data)
        if state is not None:
            with suppress(redis.RedisError):
                db = Store(redis.Redis.from_url(state.url, decode_responses=True))
                running = db.running_batch_ids()
                if running and db.progress(running.pop())[0] >= units:
                    db.r.close()
                    return
                db.r.close()
        time.sleep(0.05)


@pytest.fixture
def redis_on_small_disk(redis_url: str, small_disk: Path) -> Iterator[Store]:
    """The test's Redis (append-only, fsync always) with its folder moved to the full disk,
    as an operator's CONFIG SET dir (or a volume filling up) would."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    fill(small_disk)
    client.config_set("dir", str(small_disk))
    yield Store(client)
    client.config_set("save", "")
    client.close()


def persistence(db: Store, field: str, value: str) -> None:
    deadline = time.monotonic() + 20
    while db.r.info("persistence")[field] != value:
        assert time.monotonic() < deadline, db.r.info("persistence")
        time.sleep(0.05)


def test_a_cluster_redis_that_cannot_save_is_named_by_status_and_the_api(
    cluster_env, redis_url, redis_on_small_disk: Store, small_disk: Path, write_spec, tmp_path
) -> None:
    """An external Redis whose folder is on a full disk: its rewrite of the append-only file
    fails and it goes on accepting writes it does not keep; with a snapshot (`save`) failing,
    it refuses writes (MISCONF). Before: `arena status` and the API's GET /batches/ID said
    nothing of the first (running, as if fine); the API nothing of the second either."""
    db = redis_on_small_disk
    batch_id = submit(cluster_env, write_spec, bandit_spec())  # no workers: it stays running
    db.r.bgrewriteaof()
    persistence(db, "aof_last_bgrewrite_status", "err")
    shown = arena("status", batch_id, env=cluster_env)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    note = shown.stdout.strip().splitlines()[-1]
    assert note.startswith("Redis is not saving to disk: its last rewrite of the append-only"), note
    assert f"(in {small_disk}, 0 B free of 4.0 MiB)" in note, note
    with TestClient(create_app(ArenaSettings(redis_url=redis_url, data_dir=tmp_path))) as api:
        got = api.get(f"/batches/{batch_id}")
    assert got.status_code == 200 and got.json()["notes"] == [note], got.text

    db.r.config_set("save", "1 1")
    db.r.bgsave()
    persistence(db, "rdb_last_bgsave_status", "err")
    with TestClient(create_app(ArenaSettings(redis_url=redis_url, data_dir=tmp_path))) as api:
        (note,) = api.get(f"/batches/{batch_id}").json()["notes"]
    assert note.startswith("Redis refuses writes (MISCONF "), note
    assert f"(in {small_disk}, 0 B free of 4.0 MiB)" in note, note
    # Redis refuses even PING under MISCONF: the command ends at once with the reason.
    shown = arena("status", batch_id, env=cluster_env)
    assert shown.returncode == 1, shown
    assert one_line(shown.stderr).startswith("arena: Redis refuses writes (MISCONF "), shown
