"""Agents packaged as Docker images, on the real engine: images built here FROM the worker image,
served by workers.agent_server on a unix socket, in containers with no network, removed after
every case (workers/agent_image.py, docs/agents.md "Agents as images")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tasks.execute import execute_unit
from tasks.workloads import get_workload, validate_batch
from tests.docker_support import (
    DOCKER_GROUP,
    WORKER_IMAGE,
    arena_containers,
    require_current_worker_image,
    require_engine,
)
from workers.agent_image import (
    AgentImageError,
    ImageAgent,
    container_user,
    image_agent,
)
from workers.agent_server import encode_observation
from workers.sandbox.containers import LABEL_KIND, LABEL_PID
from workers.unix_http import UnixHttp

pytestmark = [pytest.mark.integration, DOCKER_GROUP]
ROOT = Path(__file__).resolve().parents[2]

AGENTS = '''
import os, socket, sys, time


class Echo:
    """Says what it saw: the frame's checksum and shape, the info, its reset context."""

    def reset(self, *, seed, **context):
        self.context = {"seed": seed, **context}

    def act(self, observation):
        if observation == {"raise": "please"}:
            raise ValueError("asked to")
        if isinstance(observation, dict) and "frame" in observation:
            frame = observation["frame"]
            return {"sum": int(frame.sum(dtype="uint64")), "shape": list(frame.shape),
                    "dtype": str(frame.dtype), "writeable": bool(frame.flags.writeable),
                    "info": observation["info"], "context": self.context, "uid": os.getuid()}
        return {"echo": observation, "context": self.context}


class Probe:
    """Tries the network from inside: the interfaces it has, and a TCP connection to the
    address the test gives it (one the test's own process can reach)."""

    def reset(self, *, seed, host, port, **context):
        self.host, self.port = host, port

    def act(self, observation):
        try:
            socket.create_connection((self.host, self.port), timeout=2).close()
            outcome = "connected"
        except OSError as exc:
            outcome = type(exc).__name__
        return {"interfaces": [name for _, name in socket.if_nameindex()], "connect": outcome}


class Crashing(Echo):
    def act(self, observation):
        print("agent: about to crash", file=sys.stderr, flush=True)
        os._exit(3)


class Hanging(Echo):
    def act(self, observation):
        time.sleep(3600)


class Mario(Echo):
    """Holds right in Mario; the faulty variants above cut the episode short."""

    def act(self, observation):
        return 1


class Builtin:
    """Arena's built-in strategy of each Alympics game, served from the image."""

    def reset(self, *, seed, game, player, **context):
        from workers.games import BUILTIN
        self.strategy = BUILTIN[game]()
        self.strategy.reset(game, player, seed)

    def act(self, observation):
        return self.strategy.act(observation)


def make(): return Echo()
def alympics(): return Builtin()
def probe(): return Probe()
def crashing(): return Crashing()
def hanging(): return Hanging()
def mario(): return Mario()
'''

# Answers every request with something that is not the contract (and closes).
GARBAGE = """
import os, socket
server = socket.socket(socket.AF_UNIX)
server.bind(os.environ["ARENA_AGENT_SOCKET"])
server.listen()
while True:
    connection, _ = server.accept()
    connection.recv(1 << 20)
    connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 6\\r\\n"
                       b"Connection: close\\r\\n\\r\\n<html>")
    connection.close()
"""


def build_agent_image(
    client: Any, folder: Path, files: dict[str, str], command: list[str], tag: str
) -> Any:
    """An agent image as a user builds one: FROM the worker image, the agent's code, a CMD."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    copies = "".join(f"COPY {name} /home/arena/{name}\n" for name in files)
    cmd = ", ".join(f'"{part}"' for part in command)
    (folder / "Dockerfile").write_text(f"FROM {WORKER_IMAGE}\n{copies}CMD [{cmd}]\n")
    image, _ = client.images.build(path=str(folder), tag=tag, rm=True, network_mode="none")
    return image


def serve(factory: str) -> list[str]:
    return ["python", "-m", "workers.agent_server", factory, "--socket", "/run/arena/agent.sock"]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One image per behaviour, tagged uniquely; removed at the end."""
    require_current_worker_image()  # agent images are built FROM it: its server is ours
    client = require_engine()
    stem = f"arena-test-agent-{uuid.uuid4().hex[:8]}"
    folder = tmp_path_factory.mktemp("agent-images")
    commands = {
        name: serve(f"agents:{name}")
        for name in ("make", "probe", "crashing", "hanging", "mario", "alympics")
    }
    commands |= {
        "missing": serve("no_such_module:make"),
        "silent": ["sleep", "3600"],
        "garbage": ["python", "garbage.py"],
    }
    built = {}
    try:
        for name, command in commands.items():
            files = {"agents.py": AGENTS, "garbage.py": GARBAGE}
            image = build_agent_image(client, folder / name, files, command, f"{stem}:{name}")
            built[name] = f"{stem}:{name}"
            assert image.id
        yield built
    finally:
        for tag in built.values():
            client.images.remove(tag, force=True)


def agent_containers(client: Any, owner: int | None = None) -> set[str]:
    """Arena's agent containers (of one owner process if given), running or not."""
    labels = [f"{LABEL_KIND}=agent"] + ([f"{LABEL_PID}={owner}"] if owner else [])
    found = client.containers.list(all=True, filters={"label": labels})
    return {c.name for c in found} & set(arena_containers(client))


@pytest.fixture
def leaves_no_container(docker_engine: Any) -> Iterator[None]:
    """Whatever the case did, no agent container this process started is left behind (tests
    running beside it in other processes own theirs)."""
    yield
    left = agent_containers(docker_engine, owner=os.getpid())
    assert not left, f"agent containers left behind: {left}"  # removed before the unit returned


def frame() -> np.ndarray:
    array = np.random.default_rng(7).integers(0, 256, (240, 256, 3), dtype=np.uint8)
    array.flags.writeable = False  # as the runner's live view
    return array


@pytest.mark.usefixtures("leaves_no_container")
def test_reset_and_act_round_trip_frames_and_json(images: dict[str, str]):
    screen = frame()
    with image_agent(images["make"]) as agent:
        agent.reset(seed=11, level="1-1", actions=[["NOOP"], ["right"]])
        answer = agent.act({"frame": screen, "info": {"x_pos": 40, "world": 1}})
        game = agent.act({"round": 3, "history": [["C", "D"]]})
    context = {"seed": 11, "level": "1-1", "actions": [["NOOP"], ["right"]]}
    assert answer == {
        "sum": int(screen.sum(dtype=np.uint64)),
        "shape": [240, 256, 3],
        "dtype": "uint8",
        "writeable": False,
        "info": {"x_pos": 40, "world": 1},
        "context": context,
        "uid": container_user()[0],  # the worker's own uid, or the image's user for root
    }
    assert answer["uid"] != 0
    assert game == {"echo": {"round": 3, "history": [["C", "D"]]}, "context": context}


def test_the_server_speaks_the_contract(tmp_path: Path):
    """workers.agent_server as a plain process (no engine needed), through Arena's client."""
    (tmp_path / "agents.py").write_text(AGENTS)
    path = tmp_path / "agent.sock"
    command = [sys.executable, "-m", "workers.agent_server", "agents:make", "--socket", str(path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(command, cwd=tmp_path, env=env)
    try:
        for _ in range(200):
            if path.exists():
                break
            time.sleep(0.05)
        http = UnixHttp(path, timeout_s=5)
        assert http.exchange("GET", "/health")[0] == 200
        agent = ImageAgent(http, container=None, image="local", timeout_s=5)
        agent.reset(seed=4, level="1-1")
        screen = frame()
        seen = agent.act({"frame": screen, "info": {"x_pos": 3}})
        assert seen["sum"] == int(screen.sum(dtype=np.uint64)) and seen["info"] == {"x_pos": 3}
        assert seen["context"] == {"seed": 4, "level": "1-1"} and not seen["writeable"]
        with pytest.raises(AgentImageError, match="the agent failed: ValueError: asked to"):
            agent.act({"raise": "please"})
        assert agent.act([1, 2])["echo"] == [1, 2]  # the server went on
        body, headers = encode_observation({"frame": screen, "info": {}})
        assert http.exchange("POST", "/act", body, {**headers, "Arena-Shape": "7,7"})[0] == 400
        assert (
            http.exchange("POST", "/reset", b"{}", {"Content-Type": "application/json"})[0] == 400
        )
    finally:
        server.kill()
        server.wait()


def test_a_frame_travels_as_raw_bytes():
    body, headers = encode_observation({"frame": frame(), "info": {"x_pos": 1}})
    assert len(body) == 240 * 256 * 3 and headers["Content-Type"] == "application/octet-stream"
    assert headers["Arena-Shape"] == "240,256,3" and headers["Arena-Array-Key"] == "frame"


@pytest.mark.usefixtures("leaves_no_container")
def test_the_container_has_no_network(images: dict[str, str]):
    accepted: list[object] = []
    server = socket.create_server(("0.0.0.0", 0))
    port = server.getsockname()[1]
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    host = _outward_address()
    socket.create_connection((host, port), timeout=2).close()  # reachable from this process
    time.sleep(0.1)
    assert len(accepted) == 1
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    with image_agent(images["probe"]) as agent:
        agent.reset(seed=0, host=host, port=port)
        seen = agent.act({})
    server.close()
    assert seen["interfaces"] == ["lo"]  # network_mode none: loopback only
    assert seen["connect"] != "connected" and len(accepted) == 1


def _outward_address() -> str:
    """This machine's address on its first non-loopback interface (else loopback, where the
    check still holds: the container's loopback is its own)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


def run_mario_unit(image: str, time_limit_s: float = 600, **agent: Any) -> Any:
    """One Mario unit of an image agent through the path a worker takes (execute_unit)."""
    spec = {
        "workload": "mario",
        "agents": [{"name": "boxed", "image": image, **agent}],
        "items": ["1-1"],
        "protocol": {"episodes": 1, "seed": 0, "unit_time_limit_s": time_limit_s},
        "params": {"max_steps": 40},
    }
    batch = validate_batch(spec)
    workload = get_workload("mario")
    return batch, execute_unit(workload, workload.expand(batch)[0]).result


@pytest.mark.usefixtures("leaves_no_container")
def test_a_mario_unit_of_an_image_agent_plays(images: dict[str, str], docker_engine: Any):
    batch, result = run_mario_unit(images["mario"])
    assert result.status == "ok", result.reason
    assert result.result["steps"] == 40 and result.result["max_x"] > 40
    fingerprint = batch.identity.agents["boxed"]
    assert fingerprint.kind == "image"
    assert fingerprint.digest == docker_engine.images.get(images["mario"]).id


@pytest.mark.usefixtures("leaves_no_container")
def test_a_crashing_agent_is_an_error_result_with_its_output(images: dict[str, str]):
    _, result = run_mario_unit(images["crashing"])
    assert result.status == "error" and result.error_kind == "agent"
    assert "exited with code 3" in result.reason and "agent: about to crash" in result.reason


@pytest.mark.usefixtures("leaves_no_container")
def test_a_hanging_agent_faults_at_the_per_step_timeout(images: dict[str, str]):
    started = time.monotonic()
    _, result = run_mario_unit(images["hanging"], timeout_s=1)
    assert result.status == "error" and result.error_kind == "agent"
    assert "no answer within 1s (per-step timeout)" in result.reason
    assert time.monotonic() - started < 15


@pytest.mark.usefixtures("leaves_no_container")
def test_the_units_deadline_ends_a_hanging_agent_and_its_container(images: dict[str, str]):
    started = time.monotonic()
    _, result = run_mario_unit(images["hanging"], time_limit_s=2, timeout_s=60)
    assert result.status == "error" and "time limit of 2s exceeded" in result.reason
    assert time.monotonic() - started < 15


@pytest.mark.usefixtures("leaves_no_container")
def test_an_alympics_image_agent_plays_as_the_same_code_in_process(images: dict[str, str]):
    from scoring.alympics import GAMES

    spec = {
        "workload": "alympics",
        "agents": [{"name": "builtin"}, {"name": "boxed", "image": images["alympics"]}],
        "items": list(GAMES),
        "protocol": {"episodes": 1},
        "params": {"episodes": 2},
    }
    batch = validate_batch(spec)
    workload = get_workload("alympics")
    units = {(u.agent, u.item): u for u in workload.expand(batch)}
    item = next(i for a, i in units if i.startswith("prisoners_dilemma@"))  # 100 rounds
    native, boxed = (execute_unit(workload, units[a, item]).result for a in ("builtin", "boxed"))
    assert boxed.status == "ok", boxed.reason
    assert boxed.result["measures"]["faults"] == 0
    assert boxed.result["measures"] == native.result["measures"]
    assert boxed.result["episode_payoffs"] == native.result["episode_payoffs"]
    assert batch.identity.agents["boxed"].kind == "image"


@pytest.mark.usefixtures("leaves_no_container")
def test_an_answer_that_is_not_the_contract_is_a_fault(images: dict[str, str]):
    with image_agent(images["garbage"]) as agent, pytest.raises(AgentImageError, match="not JSON"):
        agent.reset(seed=0)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing", "exited with code 1;.*ModuleNotFoundError: No module named 'no_such_module'"),
        ("silent", "did not answer on /run/arena/agent.sock within 1s"),
    ],
)
@pytest.mark.usefixtures("leaves_no_container")
def test_an_image_that_never_serves_is_named_with_its_output(
    images: dict[str, str], name: str, message: str
):
    with (
        pytest.raises(AgentImageError, match=message) as caught,
        image_agent(images[name], start_timeout_s=1),
    ):
        pass
    assert images[name] in str(caught.value)


def test_an_image_the_engine_lacks_is_refused_at_submission(docker_engine: Any):
    from tasks.validation import InputError

    spec = {
        "workload": "mario",
        "agents": [{"name": "x", "image": "arena-no-such-image:0"}],
        "items": ["1-1"],
        "protocol": {"episodes": 1},
    }
    with pytest.raises(InputError, match=r"agents\[0\]\.image: .*no image 'arena-no-such-image:0'"):
        validate_batch(spec)
