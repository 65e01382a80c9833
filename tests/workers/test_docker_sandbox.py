"""The Docker sandbox on the real engine, no mocks: no network, no writes outside the work dir,
the pids, memory and deadline limits, the environment, and no container left behind, not even
by a worker killed with SIGKILL (the next worker's reap). Skipped without an engine, except
under CI=true (tests/docker_support.py)."""

from __future__ import annotations

import json
import math
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
from workers.sandbox import SandboxLimits, SandboxUnavailable
from workers.sandbox.choose import get_sandbox
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
    being removed meanwhile by tests before this one, are not this test's). A closed session's
    container is removed by the engine a moment after `close` returns: given 5 s."""
    mine = {"label": [f"{LABEL}=1", f"{LABEL_PID}={os.getpid()}"]}
    yield
    deadline = time.monotonic() + 5
    while (
        docker_engine.containers.list(all=True, filters=mine, ignore_removed=True)
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert [
        c.name for c in docker_engine.containers.list(all=True, filters=mine, ignore_removed=True)
    ] == []


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
    here = subprocess.run(
        [sys.executable, "probe.py", *servers[:2]],
        cwd=docker_workdir,
        capture_output=True,
        text=True,
        check=True,
    )
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
    result = sandbox.run(
        f"python3 probe.py 127.0.0.1:{port}",
        docker_workdir,
        timeout_s=30,
        limits=SandboxLimits(network=True),
    )
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


def test_a_checkout_cannot_rewrite_the_repository_it_was_cloned_from(
    sandbox, docker_workdir: Path, tmp_path: Path
):
    """A local clone hard-links the source's object files: the checkout's .git is read-only in
    the container, so a command cannot reach the source through them."""
    import subprocess

    source = tmp_path / "source"
    source.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(source)], check=True)
    (source / "a.txt").write_text("the base\n")
    subprocess.run([*git, "-C", str(source), "add", "a.txt"], check=True)
    subprocess.run([*git, "-C", str(source), "commit", "-qm", "base"], check=True)
    checkout = docker_workdir / "checkout"
    subprocess.run(["git", "clone", "-q", str(source), str(checkout)], check=True)
    objects = sorted(p for p in (source / ".git" / "objects").rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in objects}
    assert any(
        (checkout / ".git" / "objects" / p.relative_to(source / ".git" / "objects")).stat().st_ino
        == p.stat().st_ino
        for p in objects
    )
    attack = (
        "for f in $(find .git/objects -type f); do chmod u+w $f; echo x > $f; done; "
        "echo hook > .git/hooks/post-merge; echo done"
    )
    result = sandbox.run(attack, checkout, timeout_s=30)
    assert "Read-only file system" in result.output
    assert {p: p.read_bytes() for p in objects} == before
    assert not (source / ".git" / "hooks" / "post-merge").exists()


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
        run_check(
            str(repo),
            "main",
            "main",
            commands,
            sandbox,
            role="baseline",
            limits=SandboxLimits(memory_mb=64),
            workdir_root=docker_workdir,
            echo=lambda line: None,
        )
    # The unit's error result reads "CheckError: " and this (tasks/execute.py).
    assert str(raised.value) == "build command failed: killed: out of memory (limit 64 MiB)"


def test_the_deadline_kills(sandbox, docker_workdir: Path):
    result = sandbox.run("echo started; sleep 300", docker_workdir, timeout_s=1.5)
    assert (result.timed_out, result.exit_code, result.output) == (True, 137, "started\n")
    assert 1.5 <= result.duration_s < 1.5 + 3
    # A background job does not hold the run: the container ends with its shell.
    result = sandbox.run("sleep 300 & echo left", docker_workdir, timeout_s=30)
    assert (result.exit_code, result.timed_out) == (0, False) and result.duration_s < 5


# Every process the command sees, one line each: its pid, whether its uid is the command's own,
# and its command line.
PROCESSES = (
    "for p in /proc/[0-9]*; do [ -O $p ] && m=mine || m=other; "
    "printf '%s %s ' ${p#/proc/} $m; tr '\\0' ' ' < $p/cmdline; echo; done"
)
# Leaves a `sleep 300` that double-forked into a new session; returns once it wrote its pid.
ESCAPE = """\
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sh", ["sh", "-c", "echo $$ > escaped.pid; exec sleep 300"])
    os._exit(0)
while not os.path.exists("escaped.pid"):
    time.sleep(0.01)
"""


def processes(output: str) -> list[list[str]]:
    """PROCESSES' lines as [pid, "mine" or "other", argv...]."""
    return [
        line.split() for line in output.splitlines() if line.split()[1:2] in (["mine"], ["other"])
    ]


def test_a_session_runs_its_commands_in_one_container(sandbox, docker_engine, docker_workdir):
    """A check's commands share one container, labelled for the session's budget: the work
    dir and /tmp carry over, the environment is each command's own."""
    mine = {"label": [f"{LABEL}=1", f"{LABEL_PID}={os.getpid()}"]}
    started = time.time()
    with sandbox.session(docker_workdir, budget_s=90) as session:
        first = session.run(
            "echo built > built.txt; echo kept > /tmp/cache; echo $ONLY", 30, env={"ONLY": "first"}
        )
        container = session.container
        second = session.run("cat built.txt /tmp/cache; echo ${ONLY:-unset}; id -u", 30)
        third = session.run(PROCESSES, 30)
        assert session.container is container
        (listed,) = docker_engine.containers.list(all=True, filters=mine, ignore_removed=True)
        assert listed.id == container.id
    assert (first.exit_code, first.output) == (0, "first\n"), first
    assert second.output == f"built\nkept\nunset\n{os.getuid()}\n", second
    # The init and the keeper (`sleep` until the label's deadline) run as another uid.
    others = [line[2:] for line in processes(third.output) if line[1] == "other"]
    assert [argv[0].rsplit("/", 1)[-1] for argv in others] == ["docker-init", "sleep"], others
    deadline = float(listed.labels[LABEL_DEADLINE])
    assert started + 90 + 40 - 1 <= deadline <= time.time() + 90 + 40 + 1
    assert abs(float(others[1][1]) - (deadline - started)) < 5
    with pytest.raises(RuntimeError, match="closed"):
        session.run("true", 30)


def test_a_command_leaves_nothing_running_for_the_next(sandbox, docker_workdir: Path):
    (docker_workdir / "escape.py").write_text(ESCAPE)
    with sandbox.session(docker_workdir, budget_s=90) as session:
        left = session.run("sleep 300 & python3 escape.py; echo left", 30)
        assert (left.exit_code, left.output) == (0, "left\n") and left.duration_s < 5, left
        seen = session.run(PROCESSES, 30)
    argvs = [" ".join(line[2:]) for line in processes(seen.output)]
    assert not [argv for argv in argvs if argv.startswith("sleep 300")], seen.output
    # Only the init, the keeper and this command's own shells and `tr` remain.
    assert len([line for line in processes(seen.output) if line[1] == "mine"]) <= 4, seen.output


def test_commands_in_a_session_are_confined_as_before(sandbox, docker_workdir: Path):
    """An exec'd command gets the container's confinement (capabilities, no-new-privileges,
    seccomp, ulimits, cgroup) and cannot end the container's init or keeper."""
    limits = SandboxLimits(open_files=123, processes=40)
    status = "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status"
    with sandbox.session(docker_workdir, limits, budget_s=90) as session:
        confined = session.run(
            f"{status}; ulimit -c; ulimit -n; cat /sys/fs/cgroup/pids/pids.max "
            "2>/dev/null || cat /sys/fs/cgroup/pids.max",
            30,
        )
        container = session.container
        others = [
            line[0] for line in processes(session.run(PROCESSES, 30).output) if line[1] == "other"
        ]
        kills = " ".join(
            f"kill -9 {pid} && echo killed {pid} || echo refused {pid};" for pid in others
        )
        refused = session.run(kills, 30)
        after = session.run("echo still", 30)
        assert session.container is container  # its init and keeper live on
    fields = dict(line.split(":\t") for line in confined.output.splitlines()[:4])
    assert fields == {
        "CapEff": "0000000000000000",
        "CapBnd": "0000000000000000",
        "NoNewPrivs": "1",
        "Seccomp": "2",
    }, confined.output
    assert confined.output.splitlines()[4:] == ["0", "123", "40"]
    assert "killed" not in refused.output and refused.output.count("refused") == 2, refused
    assert after.output == "still\n"


def test_a_memory_hog_or_a_fork_loop_does_not_break_the_next_command(sandbox, docker_workdir):
    (docker_workdir / "forks.py").write_text(FORK_LOOP)
    limits = SandboxLimits(memory_mb=64, processes=50)
    with sandbox.session(docker_workdir, limits, budget_s=200) as session:
        forks = [session.run("python3 forks.py", 20) for _ in range(2)]
        container = session.container
        hog = session.run("python3 -c 'x = bytearray(1 << 30)' || true", 30)
        assert session.container is None  # the OOM killer may have chosen more: a fresh one
        after = session.run("python3 forks.py", 20)
        assert session.container is not container
    for done in [*forks, after]:  # the children of the one before were killed: room for as many
        assert done.exit_code == 0 and 30 < int(done.output.split()[3]) < 50, done
    assert (hog.exit_code, hog.error) == (137, "killed: out of memory (limit 64 MiB)"), hog


def test_out_of_memory_where_the_wrapper_cannot_report_it(sandbox, docker_workdir: Path):
    """The OOM kill is still told when the command then runs into its deadline, or kills the
    script that would have reported it: the container's count is read before it goes."""
    hog = "python3 -c 'x = bytearray(1 << 30)'"
    with sandbox.session(docker_workdir, SandboxLimits(memory_mb=64), budget_s=90) as session:
        late = session.run(f"{hog}; sleep 300", 3)
        rogue = session.run(f"{hog}; kill -9 $PPID; sleep 1", 30)
        plain = session.run("kill -9 $PPID; sleep 1", 30)
    assert (late.timed_out, late.exit_code) == (True, 137), late
    assert late.error == "killed: out of memory (limit 64 MiB)"
    assert (rogue.timed_out, rogue.exit_code, rogue.error) == (
        False,
        137,
        "killed: out of memory (limit 64 MiB)",
    ), rogue
    assert (plain.exit_code, plain.error) == (137, None), plain


def test_the_deadline_in_a_session_and_the_command_after_it(sandbox, docker_workdir: Path):
    with sandbox.session(docker_workdir, budget_s=90) as session:
        session.run("true", 30)
        first = session.container
        late = session.run("echo started; sleep 300", 1.5)
        after = session.run("echo after; " + PROCESSES, 30)
        assert session.container is not first  # the timeout took the container with it
    assert (late.timed_out, late.exit_code, late.output) == (True, 137, "started\n"), late
    assert 1.5 <= late.duration_s < 1.5 + 3
    assert after.exit_code == 0 and after.output.startswith("after\n")
    assert "sleep 300" not in after.output


def test_a_command_that_kills_its_wrapper(sandbox, docker_workdir: Path):
    """What a command leaves once it killed the script that would have ended it goes with
    the container; the next command runs in a fresh one."""
    with sandbox.session(docker_workdir, budget_s=90) as session:
        session.run("true", 30)
        first = session.container
        rogue = session.run("sleep 300 & kill -9 $PPID; sleep 1", 30)
        after = session.run(PROCESSES, 30)
        assert session.container is not first
    assert (rogue.exit_code, rogue.timed_out, rogue.error) == (137, False, None), rogue
    assert "sleep 300" not in after.output


def test_a_command_longer_than_the_budget_gets_a_container_labelled_for_it(
    sandbox, docker_workdir: Path
):
    with sandbox.session(docker_workdir, budget_s=1) as session:
        session.run("true", 1)
        first, deadline = session.container, session.deadline
        session.run("true", 600)
        assert session.container is not first and session.deadline >= deadline + 590
        endless = session.run("echo no deadline", math.inf)
        assert (
            endless.output == "no deadline\n" and session.container.labels[LABEL_DEADLINE] == "inf"
        )


def test_a_container_gone_meanwhile_is_replaced(sandbox, docker_workdir: Path):
    """Its keeper ended (the OOM killer, say): the next command starts a fresh container."""
    with sandbox.session(docker_workdir, budget_s=90) as session:
        session.run("true", 30)
        first = session.container
        first.kill()  # stopped, then removed by the engine
        after = session.run("echo fresh", 30)
        assert session.container is not first
    assert (after.exit_code, after.output, after.error) == (0, "fresh\n", None), after


def test_a_race_check_starts_one_container(image, docker_engine, no_leftovers, tmp_path):
    """Build and tests of a check: one container, started once; the lint gets one of its own,
    whose mounts make the committed paths read-only (a container's mounts are fixed)."""
    from tests.race.projects import make_python_repo

    repo = make_python_repo(tmp_path / "repo")
    started: list[dict[str, Any]] = []

    class Counting(DockerSandbox):
        def container_options(self, *args: Any) -> dict[str, Any]:
            started.append(super().container_options(*args))
            return started[-1]

    commands = CheckCommands(
        build="python3 -m compileall -q calc",
        tests="true",
        lint="python3 -c 'print(1)'",
        timeout_s=30,
    )
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o777)
    result = run_check(
        str(repo.path),
        "clean",
        repo.base,
        commands,
        Counting(image, client=docker_engine),
        workdir_root=work,
        echo=lambda line: None,
    )
    assert result.build and result.build.exit_code == 0, result
    assert result.tests and result.lint and result.lint.output_tail == "1\n"
    assert len(started) == 2
    read_only = [m["Target"] for m in started[1]["mounts"] if m["ReadOnly"]]
    assert not any(m["ReadOnly"] for m in started[0]["mounts"][:1])
    assert {Path(t).name for t in read_only} >= {"calc", ".git"}


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
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
    )
    mine = {"label": f"{LABEL_PID}={process.pid}"}
    try:
        deadline = time.monotonic() + 20
        while not docker_engine.containers.list(filters=mine) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield Worker(process, mine)
    finally:
        process.kill()
        process.communicate()
        for container in docker_engine.containers.list(all=True, filters=mine, ignore_removed=True):
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
    assert (
        docker_engine.containers.list(all=True, filters=worker.labelled, ignore_removed=True) == []
    )
    assert left.name not in arena_containers(docker_engine)


def test_an_interrupted_run_removes_its_container(docker_engine, no_leftovers, worker):
    assert docker_engine.containers.list(filters=worker.labelled)
    worker.process.send_signal(signal.SIGINT)  # KeyboardInterrupt in run(), as Ctrl-C would
    _, stderr = worker.process.communicate(timeout=20)
    assert b"KeyboardInterrupt" in stderr
    assert (
        docker_engine.containers.list(all=True, filters=worker.labelled, ignore_removed=True) == []
    )


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
        image,
        ["python", "-c", script],
        entrypoint=[],
        remove=True,
        network_mode="none",
        user="10001:10001",
        group_add=[str(os.stat(engine_socket).st_gid)],
        environment={"PYTHONPATH": "/src", "DOCKER_HOST": "unix:///run/engine.sock"},
        volumes={
            str(ROOT): {"bind": "/src", "mode": "ro"},
            str(shared): {"bind": "/var/lib/arena/work", "mode": "rw"},
            engine_socket: {"bind": "/run/engine.sock", "mode": "rw"},
        },
    )
    done = json.loads(out.decode().splitlines()[-1])
    assert done["output"] == "10001\n/var/lib/arena/work/unit\n", done
    made = shared / "unit" / "made.txt"
    assert made.read_text() == "hi\n" and made.stat().st_uid == 10001
