"""The real Docker engine for tests: skipped with a message where none answers, except under
CI=true, where a missing engine or a missing image fails the test instead (a CI machine that
lost its engine must not pass by skipping).

The engine is the one DOCKER_HOST names (default: the local socket); `.ci/run` starts one and
`scripts/test` builds the images (scripts/build-images) before pytest runs.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.needs import unavailable
from workers.sandbox.containers import LABEL, EngineUnavailable, docker_client

ROOT = Path(__file__).resolve().parents[1]
WORKER_IMAGE = "arena-worker-cpu:latest"
# Tests that start containers run one after the other on one xdist worker (scripts/test runs
# `--dist loadgroup`): they count the engine's Arena containers, and share its two cores.
DOCKER_GROUP = pytest.mark.xdist_group("docker")
# An image with sh and python3 and nothing of Arena's: the offline base, else the worker image.
BASE_IMAGES = ("arena-base:bookworm", "python:3.11-slim-bookworm", WORKER_IMAGE)


@functools.cache
def _engine() -> object:
    try:
        return docker_client()
    except EngineUnavailable as exc:
        return str(exc)


def require_engine() -> Any:
    """The docker.DockerClient of the test engine, or skip (fail under CI=true)."""
    client = _engine()
    if isinstance(client, str):
        unavailable(f"{client} (.ci/run starts one: scripts/start-docker-engine)")
    return client


def require_image(*names: str) -> str:
    """The first of `names` the engine has, or skip (fail under CI=true) naming the script."""
    import docker.errors

    client = require_engine()
    for name in names:
        try:
            client.images.get(name)
            return name
        except docker.errors.ImageNotFound:
            continue
    unavailable(f"none of the images {', '.join(names)} is built (run scripts/build-images)")
    raise AssertionError("unreachable")


def require_current_worker_image() -> str:
    """The worker image, holding this tree's Arena code (workers refuse units of other code,
    and agent images are built FROM it), or skip (fail under CI=true)."""
    from workers.fingerprint import engine_fingerprint

    client = require_engine()
    require_image(WORKER_IMAGE)
    script = "from workers.fingerprint import engine_fingerprint as f; print(f())"
    inside = client.containers.run(
        WORKER_IMAGE, ["python", "-c", script], network_mode="none", remove=True
    )
    if inside.decode().split()[-1] != engine_fingerprint():
        unavailable(f"{WORKER_IMAGE} holds other Arena code than this tree (scripts/build-images)")
    return WORKER_IMAGE


def arena_containers(
    client: Any,
    not_of_pid: int | None = None,
    of_pids: set[int] | None = None,
    not_of_host: str | None = None,
) -> list[str]:
    """Every container Arena labelled, running or not (its name, kind and creation time), but
    those of the process `not_of_pid` (a test's own, which its own checks account for); with
    `of_pids`, only those of these processes (a test's workers, not another test's); with
    `not_of_host`, none made by a process of that host (the tests running beside a cluster
    whose workers are containers, each with a host name of its own)."""
    found = client.containers.list(all=True, filters={"label": f"{LABEL}=1"}, ignore_removed=True)
    return sorted(
        f"{c.name} ({c.labels.get('arena.kind')}, created {c.attrs.get('Created')})"
        for c in found
        if (not_of_pid is None or c.labels.get("arena.pid") != str(not_of_pid))
        and (of_pids is None or c.labels.get("arena.pid") in {str(p) for p in of_pids})
        and (not_of_host is None or c.labels.get("arena.host") != not_of_host)
    )


@pytest.fixture
def docker_engine() -> Any:
    return require_engine()


@pytest.fixture
def base_image() -> str:
    return require_image(*BASE_IMAGES)


@pytest.fixture
def worker_image() -> str:
    return require_image(WORKER_IMAGE)


@pytest.fixture
def docker_workdir(tmp_path: Path) -> Iterator[Path]:
    """A work dir a container's user may write (its files are removed even if root made them)."""
    folder = tmp_path / "work"
    folder.mkdir()
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)
