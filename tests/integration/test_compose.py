"""The compose cluster end to end, on the real engine: `docker-compose up` (Redis and two CPU
worker containers from arena-worker-cpu), a small batch of every workload submitted from the
host with the plain CLI, the leaderboards read back, and `down` leaving nothing running.

The engine here has no bridge network (ENVIRONMENT.md), so the cluster runs from
deploy/compose/host-network.yaml: compose.yaml's workers on the host's network. Race checks
run in sibling containers through the Docker sandbox, as on any compose host.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.docker_support import (
    DOCKER_GROUP,
    WORKER_IMAGE,
    arena_containers,
    require_current_worker_image,
    require_engine,
)
from tests.integration.conftest import ROOT, arena
from tests.integration.test_agent_images import PIXELS
from tests.needs import unavailable
from tests.race.projects import agent_spec_entries, make_python_repo
from tests.workers.test_agent_image import build_agent_image, serve

pytestmark = [pytest.mark.integration, DOCKER_GROUP]
COMPOSE_FILE = ROOT / "deploy" / "compose" / "host-network.yaml"
RACE_BRANCHES = ["clean", "breaks-test", "broken-build"]
# Every race builds its environment (docs/race.md, "The race's environment"): the workers' pip
# downloads its wheels, here from the folder scripts/install-test-tools fills, never an index.
RACE_WHEELS = ROOT / ".test-tools" / "race-wheels"
WHEELS_INSIDE = "/srv/arena/race-wheels"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ComposeCluster:
    def __init__(self, folder: Path, project: str) -> None:
        self.folder, self.project = folder, project
        self.env_file = folder / "cluster.env"
        self.repos = folder / "repos"
        self.wheels_file = folder / "wheels.yaml"  # the test's own, over COMPOSE_FILE
        self.running = False

    def up(self) -> None:
        started = self.compose("up", "-d", "--scale", "worker-cpu=2")
        assert started.returncode == 0, started.stderr
        self.running = True

    def down(self) -> None:
        """Stop and remove the project's containers, network and volumes."""
        if self.running:
            print(self.compose("logs", "--no-color", "--tail", "40").stdout[-6000:])
            stopped = self.compose("down", "--volumes", "--timeout", "20")
            assert stopped.returncode == 0, stopped.stderr
            self.running = False

    def compose(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        command = [
            "docker-compose",
            "-p",
            self.project,
            "--env-file",
            str(self.env_file),
            "-f",
            str(COMPOSE_FILE),
            "-f",
            str(self.wheels_file),
            *args,
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)

    def settings(self) -> dict[str, str]:
        lines = self.env_file.read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line and line[0] != "#")

    def client_env(self) -> dict[str, str]:
        """The host's `arena` pointed at the cluster's Redis."""
        values = self.settings()
        url = f"redis://:{values['ARENA_REDIS_PASSWORD']}@127.0.0.1:{values['ARENA_REDIS_PORT']}/0"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
        return {**env, "ARENA_REDIS_URL": url}

    def containers(self, client: Any) -> list[str]:
        label = f"com.docker.compose.project={self.project}"
        return [c.name for c in client.containers.list(all=True, filters={"label": label})]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ComposeCluster]:
    if shutil.which("docker-compose") is None:
        unavailable("docker-compose is not installed (.ci/run installs it)")
    require_current_worker_image()
    made = ComposeCluster(tmp_path, f"arenatest{uuid.uuid4().hex[:8]}")
    socket_path = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    env = {
        **os.environ,
        "ARENA_HOST_WORK_DIR": str(tmp_path / "work"),
        "ARENA_REPOS_DIR": str(made.repos),
        "ARENA_REDIS_PORT": str(_free_port()),
        "ARENA_API_PORT": str(_free_port()),
        "ARENA_DOCKER_SOCKET": socket_path.removeprefix("unix://"),
    }
    written = subprocess.run(
        [str(ROOT / "scripts" / "compose-env"), str(made.env_file)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert written.returncode == 0, written.stderr
    with made.env_file.open("a") as extra:  # no registry here: Redis from the worker image
        extra.write(f"ARENA_REDIS_IMAGE={WORKER_IMAGE}\nARENA_WORKER_CONCURRENCY=1\n")
    if not (RACE_WHEELS / ".complete").is_file():
        unavailable(f"no wheels in {RACE_WHEELS} for a race's environment (install-test-tools)")
    # The workers' pip takes the wheels from the folder, mounted read-only, and no index.
    worker = {
        "environment": {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELS_INSIDE},
        "volumes": [f"{RACE_WHEELS}:{WHEELS_INSIDE}:ro"],
    }
    made.wheels_file.write_text(yaml.safe_dump({"services": {"worker-cpu": worker}}))
    try:
        made.up()
        yield made
    finally:
        made.down()
        subprocess.run(["rm", "-rf", str(tmp_path / "work")], check=False)


def _run(spec: dict[str, Any], folder: Path, env: dict[str, str], *command: str) -> Any:
    path = folder / f"{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = arena(*command, str(path), "--json", env=env, timeout=600, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _board(name: str, env: dict[str, str], folder: Path) -> Any:
    shown = arena("leaderboard", name, "--json", env=env, cwd=folder)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_every_workload_on_the_compose_cluster(cluster: ComposeCluster, tmp_path: Path):
    client = require_engine()
    before = set(arena_containers(client, not_of_pid=os.getpid()))
    env = cluster.client_env()
    assert len([n for n in cluster.containers(client) if "worker-cpu" in n]) == 2

    # Mario, with an agent packaged as an image: a worker in a container starts it as a sibling
    # container, the socket's folder on the work dir the engine's host shares.
    tag = f"arena-compose-agent-{uuid.uuid4().hex[:8]}:v0"
    files = {"pixels.py": PIXELS.replace("OFFSET", "0")}
    image = build_agent_image(client, tmp_path / "agent", files, serve("pixels:make"), tag)
    try:
        params = {"frame_skip": 4, "action_set": "right_only", "max_steps": 200}
        mario = {
            "workload": "mario",
            "items": ["1-1"],
            "protocol": {"episodes": 2, "seed": 0},
            "agents": ["right", "jump-right", {"name": "boxed", "image": tag}],
            "params": params,
        }
        ran = _run(mario, tmp_path, env, "run")
    finally:
        client.images.remove(image.id, force=True)
    assert ran["counts"]["errors"] == 0, ran
    boxed = ran["versions"]["agents"]["boxed"]
    assert (boxed["kind"], boxed["digest"]) == ("image", image.id)
    board = _board("mario-1-1", env, tmp_path)
    assert {e["agent"] for e in board["entries"]} == {"right", "jump-right", "boxed"}
    assert all(e["stats"]["episodes"] == 2 for e in board["entries"])

    games = {
        "workload": "alympics",
        "leaderboard": "alympics-compose",
        "agents": ["builtin"],
        "items": ["prisoners_dilemma", "public_goods", "auction", "colonel_blotto", "congestion"],
        "protocol": {"seed": 0},
        "params": {"suite": "alympics_lite"},
    }
    ran = _run(games, tmp_path, env, "run")
    assert ran["counts"]["errors"] == 0, ran
    board = _board("alympics-compose", env, tmp_path)
    (entry,) = board["entries"]
    assert entry["agent"] == "builtin"

    # The API container serves the same board, and refuses a submission without its token.
    api = f"http://127.0.0.1:{cluster.settings()['ARENA_API_PORT']}"
    _wait_for_api(api)
    assert httpx.get(f"{api}/leaderboards/alympics-compose").json() == board
    refused = httpx.post(f"{api}/batches", json=games)
    assert refused.status_code == 401

    # A race: the repository under the shared repos folder; checks in sandbox containers.
    repo = make_python_repo(cluster.repos / "calc")
    race = {
        "workload": "race",
        "task": "add a feature",
        "repo": str(repo.path),
        "agents": agent_spec_entries(repo, RACE_BRANCHES),
        "scoring": {**repo.commands, "timeout_per_check_seconds": 60},
    }
    result = _run(race, tmp_path, env, "race", "run")
    got = {a["name"]: a for a in result["agents"]}
    assert set(got) == set(RACE_BRANCHES) and result["winner"] == "clean"
    assert got["breaks-test"]["measures"]["tests"]["counts"]["passed"] == 5
    assert got["broken-build"]["scores"]["build"] == 0
    assert result["baseline"]["tests"]["counts"]["passed"] == 6
    race_boards = [b for b in _board_names(env, tmp_path) if b.startswith("race-")]
    assert race_boards, "the race wrote no board"
    # Its checks ran in an environment of the image's interpreter, under the shared work dir.
    (ready,) = (tmp_path / "work" / "arena-race-envs").glob("*/.arena-ready")
    made = (ready.parent / "pyvenv.cfg").read_text()  # the base interpreter's, not Arena's
    assert "/opt/arena" not in made and "include-system-site-packages = false" in made
    assert (ready.parent / "bin" / "pytest").is_file() and (ready.parent / "bin" / "ruff").is_file()

    # Sandbox containers were made and removed: none is left.
    assert _only(before, client) == set()

    # Down: no container, volume or network of the project is left running or stored.
    cluster.down()
    label = f"com.docker.compose.project={cluster.project}"
    assert client.containers.list(all=True, filters={"label": label}) == []
    assert client.volumes.list(filters={"label": label}) == []
    assert [n.name for n in client.networks.list() if n.name.startswith(cluster.project)] == []
    assert _only(before, client) == set()


def _only(before: set[str], client: Any, wait_s: float = 10.0) -> set[str]:
    """Arena containers that were not there `before` (this process's own aside, and those of
    the tests running beside this one on this host: the cluster's workers are containers, with
    host names of their own), after giving any that their owners are removing right now a few
    seconds to go."""
    deadline = time.monotonic() + wait_s
    while True:
        found = arena_containers(client, not_of_pid=os.getpid(), not_of_host=socket.gethostname())
        extra = set(found) - before
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.2)


def _wait_for_api(api: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{api}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"the API at {api} did not answer")


def _board_names(env: dict[str, str], folder: Path) -> list[str]:
    shown = arena("leaderboard", env=env, cwd=folder)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.split()


def test_compose_yaml_is_the_cluster_the_docs_describe(tmp_path: Path):
    """compose.yaml itself (the bridge-network file operators use; the end-to-end test above
    runs its workers through deploy/compose/host-network.yaml), as compose resolves it."""
    if shutil.which("docker-compose") is None:
        unavailable("docker-compose is not installed (.ci/run installs it)")
    env_file = tmp_path / "cluster.env"
    env_file.write_text(
        "ARENA_REDIS_PASSWORD=0123abcd\nARENA_DOCKER_GID=999\nARENA_API_TOKENS=t0ken\n"
    )
    resolved = subprocess.run(
        [
            "docker-compose",
            "--env-file",
            str(env_file),
            "-f",
            str(ROOT / "compose.yaml"),
            "--profile",
            "gpu",
            "--profile",
            "monitoring",
            "config",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert resolved.returncode == 0, resolved.stderr
    services = yaml.safe_load(resolved.stdout)["services"]
    assert set(services) == {"redis", "worker-cpu", "worker-gpu", "beat", "api", "prometheus"}
    api = services["api"]
    assert api["environment"]["ARENA_API_TOKENS"] == "t0ken"
    assert api["ports"] == ["127.0.0.1:8000:8000/tcp"]
    beat = services["beat"]
    assert beat["command"] == "arena beat" and beat["cap_drop"] == ["ALL"]
    # Every service that validates or clones a race's repository takes local ones only from the
    # repos folder, which it mounts read-only (and nothing else: no socket, no work folder).
    for name in ("api", "beat", "worker-cpu", "worker-gpu"):
        assert services[name]["environment"]["ARENA_REPO_ROOTS"] == "/srv/arena/repos", name
        mounts = {v.split(":")[1]: v for v in services[name]["volumes"]}
        assert mounts["/srv/arena/repos"] == "/srv/arena/repos:/srv/arena/repos:ro", name
        if name in ("api", "beat"):
            assert set(mounts) == {"/srv/arena/repos"}, name
    redis = services["redis"]["command"]
    assert redis[redis.index("--requirepass") + 1] == "0123abcd"
    assert redis[redis.index("--appendonly") + 1] == "yes"
    assert services["redis"]["ports"] == ["127.0.0.1:6379:6379/tcp"]  # loopback only
    for name in ("worker-cpu", "worker-gpu"):
        worker = services[name]
        assert worker["read_only"] and worker["cap_drop"] == ["ALL"]
        assert worker["environment"]["ARENA_SANDBOX"] == "docker"
        assert worker["environment"]["ARENA_REDIS_URL"] == "redis://:0123abcd@redis:6379/0"
        assert worker["group_add"] == ["999"] and "depends_on" not in worker
        # Arena's seccomp profile, so the worker can make the jails of untrusted agents.
        options = {o.replace(":", "=", 1) for o in worker["security_opt"]}
        assert "seccomp=./deploy/seccomp/arena-worker.json" in options
        assert "no-new-privileges=true" in options
    assert "--queues gpu" in services["worker-gpu"]["command"]
    (device,) = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["capabilities"] == ["gpu"] and device["driver"] == "nvidia"
    missing = subprocess.run(
        ["docker-compose", "-f", str(ROOT / "compose.yaml"), "config"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        env={**os.environ, "ARENA_REDIS_PASSWORD": ""},
    )
    assert missing.returncode != 0 and "scripts/compose-env" in missing.stderr


def test_the_ha_file_puts_redis_behind_sentinels(tmp_path: Path):
    """deploy/compose/ha.yaml over compose.yaml (docs/deploy.md, "A Redis that fails over"): two
    replicas of the primary, three Sentinels, and every Arena service on the Sentinels with
    WAIT 1, as compose resolves it."""
    if shutil.which("docker-compose") is None:
        unavailable("docker-compose is not installed (.ci/run installs it)")
    env_file = tmp_path / "cluster.env"
    env_file.write_text(
        "ARENA_REDIS_PASSWORD=0123abcd\nARENA_DOCKER_GID=999\nARENA_API_TOKENS=t0ken\n"
    )
    files = ["-f", str(ROOT / "compose.yaml"), "-f", str(ROOT / "deploy/compose/ha.yaml")]
    resolved = subprocess.run(
        ["docker-compose", "--env-file", str(env_file), *files, "--profile", "gpu", "config"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert resolved.returncode == 0, resolved.stderr
    services = yaml.safe_load(resolved.stdout)["services"]
    sentinels = {f"sentinel-{n}" for n in (1, 2, 3)}
    assert {"redis", "redis-replica-1", "redis-replica-2"} | sentinels <= set(services)
    for name in ("redis-replica-1", "redis-replica-2"):
        command = services[name]["command"]
        assert command[command.index("--replicaof") + 1 :] == ["redis", "6379"], name
        assert command[command.index("--masterauth") + 1] == "0123abcd", name
    for name in sentinels:
        script = services[name]["command"][-1]
        assert "sentinel monitor arena redis 6379 2" in script and "--sentinel" in script
    url = ";".join(f"sentinel://:0123abcd@sentinel-{n}:26379/0" for n in (1, 2, 3))
    for name in ("worker-cpu", "worker-gpu", "beat", "api"):
        environment = services[name]["environment"]
        assert environment["ARENA_REDIS_URL"] == url, name
        assert environment["ARENA_REDIS_MASTER"] == "arena", name
        assert environment["ARENA_REDIS_WAIT_REPLICAS"] == "1", name
        assert "ARENA_REPO_ROOTS" in environment, name  # compose.yaml's settings kept
    assert services["worker-cpu"]["environment"]["ARENA_SANDBOX"] == "docker"
