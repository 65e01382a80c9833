"""The Docker sandbox on the real engine, no mocks: no network, no writes outside the work dir,
the pids, memory and deadline limits, the environment, and no container left behind, not even
by a worker killed with SIGKILL (the next worker's reap). Skipped without an engine, except
under CI=true (tests/docker_support.py)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tests.docker_support import (
    BASE_IMAGES,
    DOCKER_GROUP,
    WORKER_IMAGE,
    arena_containers,
    require_image,
)
from tests.race.projects import git
from workers.race.check import CheckCommands, CheckError, run_check
from workers.sandbox import SandboxLimits, SandboxUnavailable, get_sandbox
from workers.sandbox.containers import (
    LABEL,
    LABEL_DEADLINE,
    LABEL_HOST,
    LABEL_PID,
    is_orphan,
    reap_orphans,
    remove_quietly,
)
from workers.sandbox.docker import DEFAULT_PATH, DockerSandbox, OutputCap
from workers.sandbox.local import read_capped

pytestmark = [pytest.mark.integration, DOCKER_GROUP]
ROOT = Path(__file__).resolve().parents[2]
# Tries each address:port of argv; prints "ADDRESS open" or "ADDRESS blocked: why" for each.
PROBE = """\
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        print(target, "open")
    except OSError as exc:
        print(target, "blocked:", exc)
"""
# Forks children that sleep until none more can be made; prints how many it made.
FORK_LOOP = """\
import os, time
made = 0
try:
    while made < 5000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
except OSError as exc:
    print("fork failed after", made, exc.errno)
"""


@pytest.fixture
def image(docker_engine: Any) -> str:
    """The worker image when built (what a cluster runs), else the plain base image."""
    return require_image(WORKER_IMAGE, *BASE_IMAGES)


@pytest.fixture
def no_leftovers(docker_engine: Any) -> Iterator[None]:
    """After the test, no Arena container this process started is left (others' containers,
    being removed meanwhile by tests before this one, are not this test's)."""
    mine = {"label": [f"{LABEL}=1", f"{LABEL_PID}={os.getpid()}"]}
    yield
    assert [c.name for c in docker_engine.containers.list(all=True, filters=mine)] == []


@pytest.fixture
def sandbox(image: str, docker_engine: Any, no_leftovers: None) -> DockerSandbox:
    return DockerSandbox(image, client=docker_engine)


def env_of(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


@pytest.mark.parametrize(
    ("command", "code"),
    [("true", 0), ("exit 3", 3), ("nosuchcmd", 127), ("kill -9 $$", 137)],
)
def test_exit_codes_pass_through(sandbox, docker_workdir: Path, command: str, code: int):
    result = sandbox.run(command, docker_workdir, timeout_s=30)
    assert (result.exit_code, result.timed_out, result.error) == (code, False, None), result


def test_output_interleaved_and_capped(sandbox, docker_workdir: Path):
    result = sandbox.run("echo out; echo err >&2; echo out2", docker_workdir, timeout_s=30)
    assert result.output == "out\nerr\nout2\n"
    chatty = "head -c 300000 /dev/zero | tr '\\0' a; echo; echo END"
    result = sandbox.run(chatty, docker_workdir, timeout_s=30, max_output_bytes=1000)
    assert result.output_bytes == 300_000 + len("\nEND\n")
    assert result.output.startswith("a" * 500 + "\n[... 299005 bytes of output cut")
    assert result.output.endswith("a" * 495 + "\nEND\n")


def test_output_cap_matches_the_local_sandbox(tmp_path: Path):
    """The in-memory cap keeps exactly what `read_capped` keeps of a file, for any chunking."""
    rng = random.Random(7)
    for size, cap in [(0, 10), (10, 10), (11, 10), (5000, 999), (5000, 0), (70_000, 4096)]:
        data = bytes(rng.randrange(32, 127) for _ in range(size))
        held = OutputCap(cap)
        position = 0
        while position < size:
            step = rng.randrange(1, 3000)
            held.feed(data[position : position + step])
            position += step
        with tempfile.TemporaryFile(dir=tmp_path) as file:
            file.write(data)
            assert (held.text(), held.size) == (read_capped(file, size, cap), size)


def test_environment_is_scrubbed_with_the_images_path(
    sandbox, docker_workdir: Path, monkeypatch: pytest.MonkeyPatch
):
    secrets = ["ARENA_REDIS_URL", "REDIS_URL", "MY_API_TOKEN", "AWS_SECRET_ACCESS_KEY"]
    for name in secrets:
        monkeypatch.setenv(name, "s3cr3t-for-the-sandbox-test")
    monkeypatch.setenv("HOME", "/root/somewhere")
    monkeypatch.setenv("CHECK_SETTING", "kept")
    result = sandbox.run("env", docker_workdir, timeout_s=30)
    env = env_of(result.output)
    assert "s3cr3t-for-the-sandbox-test" not in result.output
    # Nor any ARENA_ variable of the image itself (the worker image sets ARENA_WORK_DIR).
    assert not [name for name in env if name.startswith(("ARENA_", "REDIS_"))]
    assert (env["PATH"], env["HOME"]) == (DEFAULT_PATH, "/tmp")  # the image's, not the host's
    assert (env["CI"], env["TERM"]) == ("true", "dumb")
    assert env["CHECK_SETTING"] == "kept"
    given = sandbox.run("env", docker_workdir, timeout_s=30, env={"A": "1", "GH_TOKEN": "x"})
    assert env_of(given.output)["A"] == "1" and "GH_TOKEN" not in env_of(given.output)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP server on every address of this host (connections are never accepted)."""
    server = socket.create_server(("0.0.0.0", 0))
    yield server
    server.close()


def outward_address() -> str:
    """This host's address on its default route (a UDP connect sends nothing), else loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return "127.0.0.1"
        return str(probe.getsockname()[0])


def test_no_network(sandbox, docker_workdir: Path, listener: socket.socket):
    port = listener.getsockname()[1]
    (docker_workdir / "probe.py").write_text(PROBE)
    servers = [f"127.0.0.1:{port}", f"{outward_address()}:{port}", f"172.17.0.1:{port}"]
    targets = [*servers, "1.1.1.1:53"]
    # The probe reaches the server from the host: it would tell an open network.
    here = subprocess.run([sys.executable, "probe.py", *servers[:2]], cwd=docker_workdir,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert here.stdout.split() == [servers[0], "open", servers[1], "open"]
    command = f"python3 probe.py {' '.join(targets)}; ls /sys/class/net"
    result = sandbox.run(command, docker_workdir, timeout_s=30)
    lines = result.output.splitlines()
    assert [line.split()[:2] for line in lines[:4]] == [[t, "blocked:"] for t in targets]
    assert lines[4:] == ["lo"], result.output  # no interface but loopback


def test_network_when_the_limits_allow_it(
    image, docker_engine, no_leftovers, docker_workdir, listener
):
    """`limits.network` takes the sandbox's network_mode ("host" here: the test's listener)."""
    port = listener.getsockname()[1]
    (docker_workdir / "probe.py").write_text(PROBE)
    sandbox = DockerSandbox(image, client=docker_engine, network_mode="host")
    result = sandbox.run(f"python3 probe.py 127.0.0.1:{port}", docker_workdir, timeout_s=30,
                         limits=SandboxLimits(network=True))  # fmt: skip
    assert result.output.split()[1:] == ["open"], result.output


def files_under(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*")}


def test_no_writes_outside_the_workdir(sandbox, docker_workdir: Path, tmp_path: Path):
    (tmp_path / "secret.txt").write_text("next to the work dir")
    probe = f"/tmp/arena-probe-{os.getpid()}"
    command = textwrap.dedent(f"""\
        for d in / /etc /usr /home /opt /var /root; do
            touch $d/arena-probe 2>/dev/null && echo "wrote $d" || echo "refused $d"
        done
        test -e {tmp_path}/secret.txt && echo "sees the secret" || echo "no secret"
        echo tmp > {probe} && echo "wrote /tmp"
        echo beside > {tmp_path}/beside.txt && echo "wrote beside (the container's /tmp)"
        mkdir sub && echo made > sub/made.txt && id -u && id -g""")
    before = files_under(tmp_path)
    result = sandbox.run(command, docker_workdir, timeout_s=30)
    lines = result.output.splitlines()
    for folder in ["/", "/etc", "/usr", "/home", "/opt", "/var", "/root"]:
        assert f"refused {folder}" in lines
    assert "no secret" in lines and "wrote /tmp" in lines
    assert lines[-2:] == [str(os.getuid()), str(os.getgid())]  # the worker's uid and gid
    assert not Path(probe).exists()
    made = docker_workdir / "sub" / "made.txt"
    assert files_under(tmp_path) - before == {made.parent, made}
    assert (made.stat().st_uid, made.stat().st_gid) == (os.getuid(), os.getgid())


def test_a_fork_bomb_is_stopped_by_the_pids_limit(sandbox, docker_workdir: Path):
    (docker_workdir / "forks.py").write_text(FORK_LOOP)
    limits = SandboxLimits(processes=50)
    result = sandbox.run("python3 forks.py", docker_workdir, timeout_s=20, limits=limits)
    assert result.exit_code == 0 and not result.timed_out, result.output
    made = int(result.output.split()[3])
    assert 30 < made < 50  # init, sh and python count too
    # The classic: its processes end with the container (no_leftovers), at the deadline at last.
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 2"
    started = time.monotonic()
    result = sandbox.run(bomb, docker_workdir, timeout_s=3, limits=limits)
    assert result.exit_code is not None and time.monotonic() - started < 3 + 5, result


def test_a_memory_hog_is_killed_and_reported(sandbox, docker_workdir: Path):
    limits = SandboxLimits(memory_mb=64)
    hog = "python3 -c 'x = bytearray(1 << 30)'"
    for command in [hog, f"{hog} || true"]:  # killed, even where sh then exits 0
        result = sandbox.run(command, docker_workdir, timeout_s=30, limits=limits)
        assert result.exit_code == 137 and not result.timed_out, result
        assert result.error == "killed: out of memory (limit 64 MiB)"


def test_a_race_check_whose_build_runs_out_of_memory(sandbox, docker_workdir: Path, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "hog.py").write_text("x = bytearray(1 << 30)\n")
    git(repo, "add", "hog.py")
    git(repo, "commit", "-q", "-m", "a build that needs 1 GiB")
    commands = CheckCommands(build="python3 hog.py", tests="true", timeout_s=30)
    with pytest.raises(CheckError) as raised:
        run_check(str(repo), "main", "main", commands, sandbox, role="baseline",
                  limits=SandboxLimits(memory_mb=64), workdir_root=docker_workdir,
                  echo=lambda line: None)  # fmt: skip
    # The unit's error result reads "CheckError: " and this (tasks/execute.py).
    assert str(raised.value) == "build command failed: killed: out of memory (limit 64 MiB)"


def test_the_deadline_kills(sandbox, docker_workdir: Path):
    result = sandbox.run("echo started; sleep 300", docker_workdir, timeout_s=1.5)
    assert (result.timed_out, result.exit_code, result.output) == (True, 137, "started\n")
    assert 1.5 <= result.duration_s < 1.5 + 3
    # A background job does not hold the run: the container ends with its shell.
    result = sandbox.run("sleep 300 & echo left", docker_workdir, timeout_s=30)
    assert (result.exit_code, result.timed_out) == (0, False) and result.duration_s < 5


def test_the_engine_mounts_its_own_path_of_the_workdir(sandbox, image, docker_engine, tmp_path):
    """A worker in a container sees the work dir at `work_dir`; the engine's host has it at
    `host_work_dir`. The command sees the engine's folder at the worker's path."""
    seen, real = tmp_path / "worker-view", tmp_path / "host-view"
    (seen / "unit").mkdir(parents=True)
    (real / "unit").mkdir(parents=True)
    (real / "unit" / "marker.txt").write_text("from the host's folder\n")
    mapped = DockerSandbox(image, client=docker_engine, work_dir=seen, host_work_dir=real)
    result = mapped.run("cat marker.txt; pwd; echo out > out.txt", seen / "unit", timeout_s=30)
    assert result.output == f"from the host's folder\n{seen / 'unit'}\n", result
    assert (real / "unit" / "out.txt").read_text() == "out\n"
    outside = mapped.run("true", tmp_path, timeout_s=30)
    assert outside.exit_code is None and "not under the work dir" in (outside.error or "")
    (seen / "not-on-the-host").mkdir()  # a wrong host_work_dir: an error, not an empty folder
    unshared = mapped.run("true", seen / "not-on-the-host", timeout_s=30)
    assert "bind source path does not exist" in (unshared.error or ""), unshared
    assert not (real / "not-on-the-host").exists()


def test_errors_are_results(docker_engine, docker_workdir, no_leftovers, monkeypatch):
    missing = DockerSandbox("arena-no-such-image:0", client=docker_engine)
    result = missing.run("true", docker_workdir, timeout_s=30)
    assert result.exit_code is None and "arena-no-such-image:0 not found" in (result.error or "")
    assert result.infrastructure  # the sandbox's doing, not the command's
    result = get_sandbox("docker").run("true", docker_workdir / "nope", timeout_s=30)
    assert result.exit_code is None and "does not exist" in (result.error or "")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    result = get_sandbox("docker").run("true", docker_workdir, timeout_s=30)
    assert result.exit_code is None and result.infrastructure
    assert "no Docker engine answers at unix:///nonexistent/docker.sock" in (result.error or "")


def test_a_missing_image_is_not_the_agents_fault(docker_engine, no_leftovers, tmp_path: Path):
    """A race unit whose sandbox cannot run is an infrastructure error (retried when the spec
    is submitted again), not an agent's failed build."""
    from tasks.execute import kind_of
    from tests.race.projects import make_python_repo

    repo = make_python_repo(tmp_path / "repo")
    commands = CheckCommands(build="true", tests=None, lint=None, timeout_s=30)
    with pytest.raises(SandboxUnavailable, match="arena-no-such-image:0 not found") as raised:
        sandbox = DockerSandbox("arena-no-such-image:0", client=docker_engine)
        run_check(str(repo.path), "clean", repo.base, commands, sandbox, echo=lambda _: None)
    assert kind_of(raised.value) == "infrastructure"


@pytest.fixture
def worker(image: str, docker_engine: Any, docker_workdir: Path) -> Iterator[Worker]:
    """A worker process in the middle of a unit: `DockerSandbox().run("sleep 300")`, returned
    once its container runs; killed, and its container removed, at teardown."""
    script = f"""
        from pathlib import Path
        from workers.sandbox.docker import DockerSandbox
        DockerSandbox({image!r}).run("sleep 300", Path({str(docker_workdir)!r}), timeout_s=300)
    """
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)},
                               stderr=subprocess.PIPE)  # fmt: skip
    mine = {"label": f"{LABEL_PID}={process.pid}"}
    try:
        deadline = time.monotonic() + 20
        while not docker_engine.containers.list(filters=mine) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield Worker(process, mine)
    finally:
        process.kill()
        process.communicate()
        for container in docker_engine.containers.list(all=True, filters=mine):
            remove_quietly(container)


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    labelled: dict[str, str]  # a containers.list filter for its containers


def test_a_killed_workers_container_is_reaped_by_the_next(docker_engine, no_leftovers, worker):
    worker.process.send_signal(signal.SIGKILL)
    worker.process.wait()
    (left,) = docker_engine.containers.list(filters=worker.labelled)  # nobody removed it
    assert left.name in reap_orphans(docker_engine)  # what a restarted worker does first
    assert docker_engine.containers.list(all=True, filters=worker.labelled) == []
    assert left.name not in arena_containers(docker_engine)


def test_an_interrupted_run_removes_its_container(docker_engine, no_leftovers, worker):
    assert docker_engine.containers.list(filters=worker.labelled)
    worker.process.send_signal(signal.SIGINT)  # KeyboardInterrupt in run(), as Ctrl-C would
    _, stderr = worker.process.communicate(timeout=20)
    assert b"KeyboardInterrupt" in stderr
    assert docker_engine.containers.list(all=True, filters=worker.labelled) == []


def test_get_sandbox_and_the_limits_model():
    box = get_sandbox("docker", image="some-image:1", network_mode="host")
    assert isinstance(box, DockerSandbox) and box.kind == "docker"
    assert (box.image, box.network_mode) == ("some-image:1", "host")
    with pytest.raises(ValueError, match="'local' and 'docker'"):
        get_sandbox("vm")
    assert SandboxLimits().network is False and SandboxLimits().cpus is None
    with pytest.raises(ValidationError):
        SandboxLimits(cpus=0)


def test_is_orphan_by_deadline_and_by_owner():
    now, here = time.time(), socket.gethostname()
    elsewhere = {LABEL_HOST: "another-host", LABEL_PID: "1"}
    assert is_orphan({**elsewhere, LABEL_DEADLINE: f"{now - 61:.0f}"}, here, now)
    assert not is_orphan({**elsewhere, LABEL_DEADLINE: f"{now - 30:.0f}"}, here, now)
    assert not is_orphan({**elsewhere, LABEL_DEADLINE: "inf"}, here, now)
    live = {LABEL_HOST: here, LABEL_PID: str(os.getppid()), LABEL_DEADLINE: f"{now + 100:.0f}"}
    assert not is_orphan(live, here, now)
    ended = subprocess.Popen(["true"])
    ended.wait()
    assert is_orphan({**live, LABEL_PID: str(ended.pid)}, here, now)  # its owner is gone
    assert is_orphan({LABEL_DEADLINE: "soon"}, here, now)  # labels we did not write


def test_a_worker_in_the_worker_image(docker_engine, no_leftovers, tmp_path: Path):
    """The deployed shape: the worker runs in its image as uid 10001 with ARENA_WORK_DIR a bind
    mount, and starts the command's container through the engine's socket; the files the
    command writes belong to uid 10001 on the engine's host."""
    image = require_image(WORKER_IMAGE)
    shared = tmp_path / "work"
    (shared / "unit").mkdir(parents=True)
    for folder in [shared, shared / "unit"]:
        try:
            os.chown(folder, 10001, 10001)  # as the worker image's user owns ARENA_WORK_DIR
        except PermissionError:  # tests not run as root: writable by anyone will do
            folder.chmod(0o777)
    engine = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not engine.startswith("unix://"):
        pytest.skip(f"the engine at {engine} is not a local socket to mount")
    engine_socket = engine.removeprefix("unix://")
    script = textwrap.dedent(f"""\
        import json, os
        from pathlib import Path
        from workers.sandbox.docker import DockerSandbox
        box = DockerSandbox({image!r}, work_dir=Path("/var/lib/arena/work"),
                            host_work_dir=Path({str(shared)!r}))
        done = box.run("id -u; pwd; echo hi > made.txt", Path("/var/lib/arena/work/unit"), 30)
        print(json.dumps(done.model_dump()))""")
    out = docker_engine.containers.run(
        image, ["python", "-c", script], entrypoint=[], remove=True, network_mode="none",
        user="10001:10001", group_add=[str(os.stat(engine_socket).st_gid)],
        environment={"PYTHONPATH": "/src", "DOCKER_HOST": "unix:///run/engine.sock"},
        volumes={str(ROOT): {"bind": "/src", "mode": "ro"},
                 str(shared): {"bind": "/var/lib/arena/work", "mode": "rw"},
                 engine_socket: {"bind": "/run/engine.sock", "mode": "rw"}},
    )  # fmt: skip
    done = json.loads(out.decode().splitlines()[-1])
    assert done["output"] == "10001\n/var/lib/arena/work/unit\n", done
    made = shared / "unit" / "made.txt"
    assert made.read_text() == "hi\n" and made.stat().st_uid == 10001
