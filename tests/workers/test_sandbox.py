"""The local sandbox on real processes: exit codes, output, environment, limits, and the kill
of everything a command starts (setsid, double forks, background jobs, a dead worker)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from workers.sandbox import CommandResult, SandboxLimits, get_sandbox, scrubbed_environment
from workers.sandbox.local import LocalSandbox

ROOT = Path(__file__).resolve().parents[2]
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="child subreaper: Linux only")
# Forks twice and leaves a `sleep 300` orphan in a new session ("setsid") or in a new process
# group ("group"); returns once the orphan has written its pid.
ESCAPE = """\
import os, sys, time
mode, pidfile = sys.argv[1:]
if os.fork() == 0:
    os.setsid() if mode == "setsid" else os.setpgid(0, 0)
    if os.fork() == 0:
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        os.execvp("sleep", ["sleep", "300"])
    os._exit(0)
while not os.path.exists(pidfile):
    time.sleep(0.01)
"""


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def sandbox() -> LocalSandbox:
    return LocalSandbox(grace_s=0.5)


@pytest.fixture
def pids(tmp_path: Path) -> Iterator[list[int]]:
    """The pids the commands wrote to *.pid files; killed at teardown should a test fail."""
    (tmp_path / "escape.py").write_text(ESCAPE)
    found: list[int] = []
    yield found
    for pid in found + [int(p.read_text()) for p in tmp_path.glob("*.pid")]:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def read_pids(tmp_path: Path, pids: list[int]) -> list[int]:
    pids += [int(p.read_text()) for p in sorted(tmp_path.glob("*.pid"))]
    return pids


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
    assert env["HOME"] == "/home/checker"
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


def test_deadline_kills_and_reports_a_timeout(sandbox, tmp_path: Path):
    result = sandbox.run("sleep 60", tmp_path, timeout_s=1)
    assert result.timed_out and result.exit_code == 128 + signal.SIGTERM
    assert 1 <= result.duration_s < 3


def test_a_command_ignoring_sigterm_gets_sigkill_after_the_grace(sandbox, tmp_path: Path):
    result = sandbox.run("trap '' TERM; sleep 60; sleep 60", tmp_path, timeout_s=0.5)
    assert result.timed_out and result.exit_code == 128 + signal.SIGKILL
    assert 1 <= result.duration_s < 3


@linux_only
def test_deadline_kills_setsid_and_double_forked_orphans(sandbox, tmp_path: Path, pids):
    command = "python escape.py setsid a.pid && python escape.py group b.pid && sleep 60"
    result = sandbox.run(command, tmp_path, timeout_s=3)
    assert result.timed_out, result.output
    assert len(read_pids(tmp_path, pids)) == 2
    assert not [pid for pid in pids if alive(pid)]


@linux_only
def test_a_normal_exit_leaves_nothing_behind(sandbox, tmp_path: Path, pids):
    command = "sleep 300 & echo $! > bg.pid; python escape.py setsid orphan.pid"
    result = sandbox.run(command, tmp_path, timeout_s=10)
    assert (result.exit_code, result.timed_out) == (0, False), result.output
    assert len(read_pids(tmp_path, pids)) == 2
    assert not [pid for pid in pids if alive(pid)]
    assert result.duration_s < 2  # SIGTERM sufficed: no grace spent


@linux_only
def test_a_killed_worker_takes_the_command_tree_with_it(tmp_path: Path, pids):
    script = """
        from pathlib import Path
        from workers.sandbox.local import LocalSandbox
        LocalSandbox().run("python escape.py setsid a.pid; sleep 300", Path("."), timeout_s=60)
    """
    worker = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "a.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        (pid,) = read_pids(tmp_path, pids)
    finally:
        worker.kill()
        worker.wait()
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)


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


def test_unstartable_shell_is_an_error_not_an_exception(tmp_path: Path):
    result = LocalSandbox(shell="/no/such/sh").run("true", tmp_path, timeout_s=10)
    assert isinstance(result, CommandResult) and result.exit_code is None
    assert result.error and "/no/such/sh" in result.error


def test_get_sandbox_and_limits_model():
    assert isinstance(get_sandbox(), LocalSandbox) and get_sandbox("local").kind == "local"
    with pytest.raises(ValueError, match="'vm'"):
        get_sandbox("vm")
    with pytest.raises(ValidationError):
        SandboxLimits(memory=1)  # type: ignore[call-arg]


@linux_only
def test_a_session_runs_each_command_as_run_does(sandbox, tmp_path: Path, pids):
    """The local sandbox sets nothing up for a session: each command is a `run` in the
    session's work dir under its limits, and leaves nothing behind."""
    limits = SandboxLimits(file_size_mb=1)
    with sandbox.session(tmp_path, limits, budget_s=30) as session:
        first = session.run("sleep 300 & echo $! > bg.pid; pwd -P", timeout_s=10)
        second = session.run("head -c 2097152 /dev/zero > big", timeout_s=10)
        third = session.run("echo $CHOSEN", timeout_s=10, env={"CHOSEN": "yes"})
    assert (first.exit_code, first.output) == (0, f"{tmp_path.resolve()}\n")
    assert not [pid for pid in read_pids(tmp_path, pids) if alive(pid)]
    assert second.exit_code not in (0, None) and (tmp_path / "big").stat().st_size <= 1 << 20
    assert third.output == "yes\n"
    session.close()  # idempotent
