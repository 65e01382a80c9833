"""The local sandbox on real processes: exit codes, output, environment, limits, and the kill
of everything a command starts (setsid, double forks, background jobs, a dead worker), jailed
(bubblewrap, the default) and unjailed (`jail=False`, trusted code); then what only the jail
gives: no view of the worker, only the work dir writable, no network, and the caps on processes,
memory and disk that hold for a root worker too."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.needs import require_bwrap
from workers.sandbox import CommandResult, SandboxLimits, scrubbed_environment
from workers.sandbox.choose import get_sandbox
from workers.sandbox.local import LocalSandbox, jail_environment, local_sandbox

ROOT = Path(__file__).resolve().parents[2]
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="child subreaper: Linux only")
# Forks twice and leaves a `sleep SECONDS` orphan in a new session ("setsid") or in a new
# process group ("group"); returns once the orphan has written its pid. SECONDS carries the
# test's mark: in a jail the pids are the jail's own, so what is left is found by that mark.
ESCAPE = """\
import os, sys, time
mode, pidfile, seconds = sys.argv[1:]
if os.fork() == 0:
    os.setsid() if mode == "setsid" else os.setpgid(0, 0)
    if os.fork() == 0:
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        os.execvp("sleep", ["sleep", seconds])
    os._exit(0)
while not os.path.exists(pidfile):
    time.sleep(0.01)
"""


@pytest.fixture(params=["jail", "plain"])
def mode(request: pytest.FixtureRequest) -> str:
    if request.param == "jail":
        require_bwrap()
    return str(request.param)


@pytest.fixture
def sandbox(mode: str) -> LocalSandbox:
    return LocalSandbox(grace_s=0.5, jail=mode == "jail")


@pytest.fixture
def jail() -> LocalSandbox:
    require_bwrap()
    return LocalSandbox(grace_s=0.5)


class Marked:
    """Processes a test starts, found by a mark in their command line (`sleep 300.NNNNNNNNN`,
    or the mark in a comment of the command): a jail's pids mean nothing outside it. Whatever
    is left is killed at teardown."""

    def __init__(self) -> None:
        self.seconds = f"300.{secrets.randbelow(10**9):09d}"

    def live(self) -> list[int]:
        found = []
        for name in os.listdir("/proc"):
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, ValueError, IndexError):
                continue
            if self.seconds.encode() in cmdline and state != "Z":
                found.append(int(name))
        return found


@pytest.fixture
def marked(tmp_path: Path) -> Iterator[Marked]:
    (tmp_path / "escape.py").write_text(ESCAPE)
    found = Marked()
    yield found
    for pid in found.live():
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("command", "code"),
    [("true", 0), ("exit 3", 3), ("no-such-command-x", 127), ("kill -9 $$", 137)],
)
def test_exit_codes(sandbox: LocalSandbox, tmp_path: Path, command: str, code: int):
    result = sandbox.run(command, tmp_path, timeout_s=10)
    assert (result.exit_code, result.timed_out, result.error) == (code, False, None)


def test_output_of_stdout_stderr_and_a_grandchild_interleaved(sandbox, tmp_path: Path):
    command = "echo out; echo err >&2; sh -c 'echo grandchild >&2'; printf '\\377\\n'"
    result = sandbox.run(command, tmp_path, timeout_s=10)
    assert result.output == "out\nerr\ngrandchild\n\ufffd\n"
    assert result.output_bytes == len(result.output.encode()) - 2  # \ufffd is 3 bytes, was 1


def test_output_cap_keeps_head_and_tail(sandbox, tmp_path: Path):
    command = "python -c \"import sys; sys.stdout.write('A' * 5000 + 'B' * 5000)\""
    result = sandbox.run(command, tmp_path, timeout_s=10, max_output_bytes=1000)
    assert result.output_bytes == 10_000
    assert result.output.startswith("A" * 500 + "\n[")
    assert result.output.endswith("]\n" + "B" * 500)
    assert "9000 bytes" in result.output


def test_runs_in_the_workdir(sandbox, tmp_path: Path):
    result = sandbox.run("pwd -P", tmp_path, timeout_s=10)
    assert result.output.strip() == str(tmp_path.resolve())


def test_environment_is_scrubbed(sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ["ARENA_REDIS_URL", "MY_API_TOKEN", "AWS_SECRET_ACCESS_KEY", "PYTHONPATH"]:
        monkeypatch.setenv(name, "s3cr3t-for-the-sandbox-test")
    monkeypatch.setenv("HOME", "/home/checker")
    result = sandbox.run("env", tmp_path, timeout_s=10)
    env = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert not {"ARENA_REDIS_URL", "MY_API_TOKEN", "AWS_SECRET_ACCESS_KEY", "PYTHONPATH"} & set(env)
    # Unjailed, HOME passes through; a jail has its own, private (adapted: it asserted the
    # worker's HOME in every mode).
    assert env["HOME"] == ("/tmp" if sandbox.jail else "/home/checker")
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert (env["CI"], env["TERM"]) == ("true", "dumb")
    assert "s3cr3t-for-the-sandbox-test" not in result.output


def test_a_given_environment_is_scrubbed_too():
    env = scrubbed_environment({"PATH": "/bin", "FOO": "1", "github_token": "x", "DB_PASSWD": "y"})
    assert env == {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/bin"]),
        "FOO": "1",
        "CI": "true",
        "TERM": "dumb",
    }


def test_the_scrub_drops_agents_sockets_and_urls_with_credentials():
    """Issue 19, finding 9: what acts for the worker's user (its ssh and gpg agents, the Docker
    engine, a Kubernetes config, netrc) and any URL with a user or password in it."""
    dropped = {
        "SSH_AUTH_SOCK": "/run/user/0/ssh-agent.sock",
        "SSH_AGENT_PID": "12",
        "REDISCLI_AUTH": "hunter2",
        "DATABASE_URL": "postgres://db/arena",
        "DOCKER_HOST": "unix:///var/run/docker.sock",
        "DOCKER_CONFIG": "/root/.docker",
        "KUBECONFIG": "/root/.kube/config",
        "NETRC": "/root/.netrc",
        "GPG_AGENT_INFO": "x",
        "PGPASSFILE": "/root/.pgpass",
        "GIT_ASKPASS": "/bin/echo",
        "SENTRY_DSN": "https://k@s/1",
        "GIT_CONFIG_PARAMETERS": "'http.extraheader'='Authorization: x'",
        "NPM_CONFIG__AUTH": "dXNlcjpwYXNz",
        "VAULT_ADDR": "https://vault",
        "PIP_INDEX_URL": "https://user:s3cret@pypi.internal/simple",
        "UPSTREAM": "https://ghp_abc123@github.com/org/repo.git",
    }
    kept = {
        "GIT_AUTHOR_NAME": "A",
        "LANG": "C.UTF-8",
        "HTTP_PROXY": "http://proxy:3128",
        "DOCS_URL": "https://example.org/docs",
        "SOURCE": "git@github.com:org/repo.git",
    }
    env = scrubbed_environment({**dropped, **kept, "PATH": "/bin"})
    assert not set(dropped) & set(env)
    assert {n: env[n] for n in kept} == kept


def test_deadline_kills_and_reports_a_timeout(sandbox, tmp_path: Path):
    result = sandbox.run("sleep 60", tmp_path, timeout_s=1)
    assert result.timed_out and result.exit_code == 128 + signal.SIGTERM
    assert 1 <= result.duration_s < 3


def test_a_command_ignoring_sigterm_gets_sigkill_after_the_grace(sandbox, tmp_path: Path):
    result = sandbox.run("trap '' TERM; sleep 60; sleep 60", tmp_path, timeout_s=0.5)
    assert result.timed_out and result.exit_code == 128 + signal.SIGKILL
    assert 1 <= result.duration_s < 3


@linux_only
def test_deadline_kills_setsid_and_double_forked_orphans(sandbox, tmp_path: Path, marked):
    s = marked.seconds
    command = f"python escape.py setsid a.pid {s} && python escape.py group b.pid {s} && sleep 60"
    result = sandbox.run(command, tmp_path, timeout_s=3)
    assert result.timed_out, result.output
    assert (tmp_path / "a.pid").exists() and (tmp_path / "b.pid").exists()
    assert marked.live() == []


@linux_only
def test_a_normal_exit_leaves_nothing_behind(sandbox, tmp_path: Path, marked):
    command = f"sleep {marked.seconds} & python escape.py setsid orphan.pid {marked.seconds}"
    result = sandbox.run(command, tmp_path, timeout_s=10)
    assert (result.exit_code, result.timed_out) == (0, False), result.output
    assert (tmp_path / "orphan.pid").exists()
    assert marked.live() == []
    assert result.duration_s < 2  # no grace spent


@linux_only
def test_a_killed_worker_takes_the_command_tree_with_it(mode: str, tmp_path: Path, marked):
    script = f"""
        from pathlib import Path
        from workers.sandbox.local import LocalSandbox
        LocalSandbox(jail={mode == "jail"}).run(
            "python escape.py setsid a.pid {marked.seconds}; sleep 300", Path("."), timeout_s=60)
    """
    worker = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "a.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marked.live()  # the worker, the helper, bwrap, the jail, the orphan
    finally:
        worker.kill()
        worker.wait()
    deadline = time.monotonic() + 5
    while marked.live() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marked.live() == []


def test_memory_limit(sandbox, tmp_path: Path):
    command = 'python -c "x = bytearray(2 * 1024**3)"'
    result = sandbox.run(command, tmp_path, timeout_s=10, limits=SandboxLimits(memory_mb=256))
    assert result.exit_code not in (0, None)
    assert "MemoryError" in result.output


def test_file_size_limit(sandbox, tmp_path: Path):
    command = "head -c 10485760 /dev/zero > big"
    result = sandbox.run(command, tmp_path, timeout_s=10, limits=SandboxLimits(file_size_mb=1))
    assert result.exit_code not in (0, None)
    assert (tmp_path / "big").stat().st_size <= 1 << 20


def test_missing_workdir_is_an_error_not_an_exception(sandbox, tmp_path: Path):
    result = sandbox.run("true", tmp_path / "missing", timeout_s=10)
    assert result.exit_code is None and not result.timed_out
    assert result.error and "missing" in result.error


def test_unstartable_shell_is_an_error_not_an_exception(mode: str, tmp_path: Path):
    result = LocalSandbox(shell="/no/such/sh", jail=mode == "jail").run("true", tmp_path, 10)
    assert isinstance(result, CommandResult) and result.exit_code is None
    assert result.error and "/no/such/sh" in result.error


def test_get_sandbox_and_limits_model():
    assert isinstance(get_sandbox(), LocalSandbox) and get_sandbox("local").kind == "local"
    assert get_sandbox().jail and not get_sandbox("local", jail=False).jail
    with pytest.raises(ValueError, match="'vm'"):
        get_sandbox("vm")
    with pytest.raises(ValidationError):
        SandboxLimits(memory=1)  # type: ignore[call-arg]


@linux_only
def test_a_session_runs_each_command_as_run_does(sandbox, tmp_path: Path, marked):
    """The local sandbox sets nothing up for a session: each command is a `run` in the
    session's work dir under its limits, and leaves nothing behind."""
    limits = SandboxLimits(file_size_mb=1)
    with sandbox.session(tmp_path, limits, budget_s=30) as session:
        first = session.run(f"sleep {marked.seconds} & pwd -P", timeout_s=10)
        second = session.run("head -c 2097152 /dev/zero > big", timeout_s=10)
        third = session.run("echo $CHOSEN", timeout_s=10, env={"CHOSEN": "yes"})
    assert (first.exit_code, first.output) == (0, f"{tmp_path.resolve()}\n")
    assert marked.live() == []
    assert second.exit_code not in (0, None) and (tmp_path / "big").stat().st_size <= 1 << 20
    assert third.output == "yes\n"
    session.close()  # idempotent


# --- What only the jail gives ------------------------------------------------------------------


def test_a_jail_sees_none_of_the_worker(jail: LocalSandbox, tmp_path: Path):
    """Its own pids (the worker's, the helper's are not there), no environ of anything but
    itself and bwrap's init (whose environment is empty), nothing of Arena's settings."""
    env = {**os.environ, "ARENA_REDIS_URL": "redis://:hunter2-jail@127.0.0.1:1/0"}
    script = f"""
        import os
        from pathlib import Path
        from workers.sandbox.local import LocalSandbox
        r = LocalSandbox().run(
            "ls /proc | grep -E '^[0-9]+$' | tr '\\\\n' ' '; echo; "
            "cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\\\0' ' '; echo; "
            "cat /proc/{os.getpid()}/environ; echo; env",
            Path({str(tmp_path)!r}), timeout_s=20)
        print(r.output)
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    pids = done.stdout.splitlines()[0].split()
    assert pids and all(int(pid) < 20 for pid in pids), done.stdout  # the jail's own
    assert "hunter2-jail" not in done.stdout and "ARENA_" not in done.stdout, done.stdout


def test_only_the_work_dir_is_writable_and_home_is_private(jail: LocalSandbox, tmp_path: Path):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("not for the jail")
    command = (
        f"cat {outside}/secret; echo x > {outside}/written; echo x > /etc/x; echo x > /x; "
        "echo x > /dev/x; echo x > /usr/x; echo x > $HOME/mine && echo home-ok; "
        f"ls {Path.home()}/.ssh; echo x > here && echo work-ok"
    )
    result = jail.run(command, work, timeout_s=20)
    assert "not for the jail" not in result.output
    assert "home-ok" in result.output and "work-ok" in result.output
    assert not (outside / "written").exists() and not Path("/x").exists()
    assert not Path("/tmp/mine").exists()  # the jail's /tmp and HOME are its own
    written = work / "here"
    assert written.stat().st_uid == os.getuid()  # the worker's: it reads and removes them
    written.unlink()


def test_git_objects_stay_read_only_in_the_work_dir(jail: LocalSandbox, tmp_path: Path):
    """A local clone hard-links the source repository's objects: written through the
    checkout, they would change the source. `.git` is bound read-only."""
    source = tmp_path / "source-object"
    source.write_text("original")
    checkout = tmp_path / "checkout"
    (checkout / ".git" / "objects").mkdir(parents=True)
    os.link(source, checkout / ".git" / "objects" / "ab")
    command = "chmod u+w .git/objects/ab; echo changed > .git/objects/ab; echo x > .git/hooks"
    result = jail.run(command, checkout, timeout_s=20)
    assert "Read-only file system" in result.output
    assert source.read_text() == "original"


def test_no_network_not_even_the_workers_loopback(jail: LocalSandbox, tmp_path: Path):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0)
    port = listener.getsockname()[1]
    command = (
        'python -c "import socket\n'
        f"try: socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')\n"
        "except OSError as e: print('refused', e)\""
    )
    result = jail.run(command, tmp_path, timeout_s=20)
    assert "refused" in result.output, result.output
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()


def test_a_fork_bomb_is_killed_at_the_process_cap(jail: LocalSandbox, tmp_path: Path, marked):
    """The worker here is root, for whom the kernel enforces no RLIMIT_NPROC: the helper
    counts the jail's processes and kills them all past the cap."""
    command = f"f(){{ f|f& }}; f; sleep 30 # {marked.seconds}"
    result = jail.run(command, tmp_path, timeout_s=30, limits=SandboxLimits(processes=200))
    assert (result.exit_code, result.error) == (137, "killed: process limit 200 exceeded")
    assert result.duration_s < 5
    assert marked.live() == []


def test_threads_count_towards_the_process_cap(jail: LocalSandbox, tmp_path: Path):
    command = (
        'python -c "import threading, time\n'
        "for _ in range(300): threading.Thread(target=time.sleep, args=(30,), daemon=True)"
        '.start()\ntime.sleep(30)"'
    )
    limits = SandboxLimits(processes=100, memory_mb=None)
    result = jail.run(command, tmp_path, timeout_s=30, limits=limits)
    assert result.exit_code == 137 and result.duration_s < 5
    assert result.error and result.error.startswith("killed: process limit 100 exceeded")


def test_the_jails_total_memory_is_capped(jail: LocalSandbox, tmp_path: Path):
    """Each process under its address-space limit, all of them together over the cap."""
    command = (
        'python -c "import os, time\n'
        "for _ in range(12):\n"
        "    if os.fork() == 0:\n"
        "        x = bytearray(60 << 20); time.sleep(30)\n"
        'time.sleep(30)"'
    )
    result = jail.run(command, tmp_path, timeout_s=30, limits=SandboxLimits(memory_mb=400))
    assert (result.exit_code, result.error) == (137, "killed: out of memory (limit 400 MiB)")
    assert result.duration_s < 5


@pytest.mark.parametrize(
    "command",
    [
        # Files each under the per-file limit.
        "i=0; while true; do head -c 4194304 /dev/zero > f$i || exit 9; i=$((i+1)); done",
        # One file deleted while written: no folder walk sees it.
        "exec 3> hidden; rm hidden; while true; do head -c 4194304 /dev/zero >&3; done",
        # Empty files: no bytes, but an inode (a block) each.
        "mkdir d; i=0; while true; do : > d/$i; i=$((i+1)); done",
    ],
    ids=["files", "deleted-file", "inodes"],
)
def test_filling_the_disk_is_killed_at_the_disk_cap(jail, tmp_path: Path, command: str):
    limits = SandboxLimits(disk_mb=40, file_size_mb=None)
    result = jail.run(command, tmp_path, timeout_s=60, limits=limits)
    assert result.exit_code == 137, result.output[-500:]
    assert result.error and result.error.startswith("killed: disk limit 40 MiB exceeded")
    assert result.duration_s < 30


def test_the_jails_own_tmp_and_shm_are_bounded(jail: LocalSandbox, tmp_path: Path):
    """Memory-backed, so bounded: /tmp and /dev/shm; the root and /dev, which bwrap makes as
    tmpfs too, are read-only."""
    command = "df -B1 --output=size /tmp /dev/shm; echo x > /x; echo x > /dev/x"
    result = jail.run(command, tmp_path, timeout_s=30)
    sizes = [int(word) for word in result.output.split() if word.isdigit()]
    assert sizes == [512 << 20, 64 << 20], result.output
    assert result.output.count("Read-only file system") == 2


def test_the_jail_environment_is_an_allow_list(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SOME_WORKER_SETTING", "1")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = jail_environment()
    assert "SOME_WORKER_SETTING" not in env and env["LC_ALL"] == "C.UTF-8"
    assert (env["HOME"], env["CI"], env["TERM"]) == ("/tmp", "true", "dumb")
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    given = jail_environment({"CHOSEN": "1", "HOME": "/root", "DATABASE_URL": "x"})
    assert given["CHOSEN"] == "1" and given["HOME"] == "/tmp" and "DATABASE_URL" not in given


def test_without_bubblewrap_commands_are_refused_unless_agents_are_trusted(tmp_path: Path):
    """No jail can start (ARENA_BWRAP names no binary): every command is an infrastructure
    error naming the fix, until ARENA_TRUST_AGENTS is set; then it runs, unjailed."""
    script = f"""
        import json
        from pathlib import Path
        from workers.sandbox.local import local_sandbox
        refused = local_sandbox(trust_agents=False)
        trusted = local_sandbox(trust_agents=True)
        a = refused.run("echo ran", Path({str(tmp_path)!r}), timeout_s=10)
        b = trusted.run("echo ran", Path({str(tmp_path)!r}), timeout_s=10)
        print(json.dumps([refused.unavailable(), a.model_dump(), trusted.jail, b.output]))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={**os.environ, "ARENA_BWRAP": "/no/such/bwrap", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    why, refused, trusted_jail, trusted_output = json.loads(done.stdout.splitlines()[-1])
    assert why and "ARENA_TRUST_AGENTS" in why and "bubblewrap" in why
    assert refused["infrastructure"] and refused["exit_code"] is None and refused["output"] == ""
    assert refused["error"] == why
    assert trusted_jail is False and trusted_output == "ran\n"
    assert "run unjailed" in done.stderr  # said once in the worker's log


def test_local_sandbox_is_jailed_where_bubblewrap_starts():
    require_bwrap()
    assert local_sandbox(trust_agents=True).jail and local_sandbox().unavailable() is None
