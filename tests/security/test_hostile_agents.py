"""Hostile agents (issue 19, findings 2 and 8): a Mario entry-point agent, an Alympics agent and
SB3 checkpoints carrying a pickle payload, run by real Celery workers whose environment holds the
Redis URL with its password, the API's token and a HOME with a private key, next to a real Redis
(password, TCP port, unix socket) and a loopback listener that stands for "outside".

Each tries what tests/security/agent_attacks.py lists (the board through Redis by every way it
could learn of it, the token and ~/.ssh, the network, writes outside its /tmp, a fork bomb, the
disk), or allocates without bound, or ends its own process (os._exit, kill -9). Every attempt
fails; a unit ends as play or as the agent's error, as the contract says; the worker processes
live on; the batch is `done`; and the other agents' rows on the board are byte for byte those of
a batch without the hostile agents.

The poisoned checkpoints run once more as lockstep batches (`inference_batch: 2`) on the host's
shared inference process (ARENA_SHARED_INFERENCE=always; workers/sandbox/inference_host.py),
whose jailed child answers both worker processes: the same attacks fail there, what the child
prints reaches the unit's log, its faults end the units as the agent's, and no checkpoint has
two hosts at once. A checkpoint's passes come back from the host as from its own child: its
longest answer is its own (not the host's failure), and what each pass prints comes with it.

On 784f9da (agents in the worker's own process) both tests fail: the probe wrote itself at
#1 on the reference board with the password from its environment, connected out, read the key,
and the agents that end their process took the worker with them (infrastructure errors, the
batch `incomplete`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tasks.store import Store
from tests.integration.conftest import ROOT, WorkerPools, arena, wait_finished
from tests.needs import require_bwrap
from tests.security.servers import password_redis
from workers.games import GAMES
from workers.sandbox.inference_host import MARK, run_dir

pytestmark = pytest.mark.integration

PASSWORD = "hunter2-" + secrets.token_hex(8)
TOKEN = "arena-api-token-" + secrets.token_hex(8)
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- fake-" + secrets.token_hex(8)
MEMORY_MB = 1024  # torch and an SB3 model need ~750 MB of address space
ATTACKS = Path(__file__).with_name("agent_attacks.py")
# The checkpoints' lockstep batches on the host's one inference process per checkpoint; an idle
# host goes soon (the test ends those left anyway).
SHARED_ENV = {"ARENA_SHARED_INFERENCE": "always", "ARENA_INFERENCE_IDLE_S": "5"}
# The reasons of the hog's and the quitter's units.
MEMORY = f"AgentOutOfMemory: memory limit {MEMORY_MB} MB exceeded (MemoryError)"
DIED = "AgentProcessDied: the agent's process "
# What each poisoned checkpoint does once its payload has attacked.
THEN = {
    "sb3-probe": "",
    "sb3-hog": "hoard = [bytearray(64 << 20) for _ in range(64)]",  # 4 GiB at most
    "sb3-quitter": "import os; os._exit(3)",
}

# The hostile package's agents: each attacks when it is made (the factory: what finding 2's
# agent did), then plays (Mario: right; Alympics: the built-in's moves), or does its one thing.
AGENTS = """
import json, os, signal
from pathlib import Path

from .agent_attacks import attack

CONFIG = json.loads((Path(__file__).parent / "config.json").read_text())
CAP = 4 << 30  # "without bound": at most 4 GiB, so that an unjailed run spares this machine


class Player:
    def reset(self, *, seed, **context):
        self.inner = None
        if "game" in context:
            from workers.games import BUILTIN

            self.inner = BUILTIN[context["game"]]()
            self.inner.reset(game=context["game"], player=context["player"], seed=seed)

    def act(self, observation):
        return self.inner.act(observation) if self.inner else 1


class Prober(Player):
    def __init__(self, name):
        attack({**CONFIG, "name": name})


class Hog(Player):
    hoard = []

    def act(self, observation):
        while len(self.hoard) < CAP >> 26:
            self.hoard.append(bytearray(64 << 20))
        raise MemoryError("the cap of this test, not a limit")


class Quitter(Player):
    def act(self, observation):
        os._exit(3)


class Killer(Player):
    def act(self, observation):
        os.kill(os.getpid(), signal.SIGKILL)


def mario_probe():
    return Prober("hostile-probe")


def alympics_probe():
    return Prober("hostile-probe")


hog, quitter, killer = Hog, Quitter, Killer
"""


@dataclass
class Cluster:
    db: Store
    env: dict[str, str]
    pool: subprocess.Popen[bytes]
    pools: WorkerPools
    listener: socket.socket
    config: dict[str, Any]
    tmp_path: Path


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as running:
        yield running


@pytest.fixture
def shared_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The cluster, its checkpoints' lockstep batches on shared inference hosts; the hosts left
    when its workers have stopped are ended (those of this test's checkpoints and data)."""
    try:
        with running_cluster(tmp_path, SHARED_ENV) as running:
            yield running
    finally:
        kill_hosts(tmp_path / "data")


@contextmanager
def running_cluster(tmp_path: Path, extra_env: dict[str, str] | None = None) -> Iterator[Cluster]:
    """A Redis with a password (TCP and a unix socket), two worker processes holding the
    cluster's secrets (and `extra_env`), the hostile package on their path, a listener
    outside."""
    require_bwrap()
    with password_redis(tmp_path / "redis", PASSWORD) as server:
        client, port, sock = server.client, server.port, server.socket
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(0)
        home = tmp_path / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text(SSH_KEY)
        agents = tmp_path / "agents"
        config = _write_package(agents / "hostile_agents", tmp_path, port, sock, listener)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
        env |= {
            "ARENA_REDIS_URL": f"redis://:{PASSWORD}@127.0.0.1:{port}/0",
            "ARENA_API_TOKENS": TOKEN,
            "HOME": str(home),
            "PYTHONPATH": f"{agents}{os.pathsep}{ROOT}",
            "ARENA_AGENT_MEMORY_MB": str(MEMORY_MB),
            "ARENA_DATA_DIR": str(tmp_path / "data"),
        }
        env |= extra_env or {}
        pools = WorkerPools(tmp_path)
        try:
            pool = pools.start(env, concurrency=2)
            yield Cluster(Store(client), env, pool, pools, listener, config, tmp_path)
        finally:
            pools.stop_all()
            listener.close()


def _write_package(
    package: Path, tmp_path: Path, port: int, sock: Path, listener: socket.socket
) -> dict[str, Any]:
    """The hostile agents as the worker finds them; `config` is all an attacker could know."""
    package.mkdir(parents=True)
    shutil.copy(ATTACKS, package / "agent_attacks.py")
    (package / "__init__.py").write_text(AGENTS)
    embedded = ROOT / ".arena-data" / "redis.sock"  # `arena run`'s, where one is running
    config = {
        "password": PASSWORD,
        "token": TOKEN,
        "ssh": SSH_KEY,
        "redis_port": port,
        "redis_sockets": [str(sock), str(embedded), str(tmp_path / "data" / "redis.sock")],
        "listener_port": listener.getsockname()[1],
        "ssh_path": str(tmp_path / "home" / ".ssh" / "id_ed25519"),
        "board_keys": ["arena:lb:ref", "arena:lb:ref-1-1", "arena:lb:stolen"],
        "name": "",
        "write_paths": [
            str(package / "owned"),
            str(ROOT / "owned-by-an-agent"),
            str(tmp_path / "home" / "owned"),
            "/owned-by-an-agent",
            str(tmp_path / "owned"),
        ],
        "fill_folders": [str(package), str(tmp_path)],
        "host_dirs": [str(run_dir())],  # the inference hosts' sockets
    }
    (package / "config.json").write_text(json.dumps(config))
    return config


def poisoned_checkpoint(path: Path, then: str, config: dict[str, Any], name: str) -> Path:
    """A real SB3 checkpoint whose `data` carries a pickle that runs the attacks (reporting as
    `name`), then `then`, when SB3 loads it (what any checkpoint may do: SB3's format is
    pickles)."""
    from tests.mario.sb3_models import build_checkpoint, with_pickle_payload

    checkpoint = build_checkpoint(path)
    code = (
        ATTACKS.read_text()
        + f"\nattack({{**json.loads({json.dumps(json.dumps(config))}), 'name': {name!r}}})\n"
        + then
    )
    return with_pickle_payload(checkpoint, checkpoint, code)


def poisoned_checkpoints(cluster: Cluster) -> dict[str, Path]:
    """THEN's checkpoints, each reporting its attacks under its agent's name."""
    return {
        name: poisoned_checkpoint(cluster.tmp_path / f"{name}.zip", code, cluster.config, name)
        for name, code in THEN.items()
    }


def inference_hosts(paths: list[Path]) -> dict[Path, list[int]]:
    """The live inference hosts (workers.sandbox.inference_host) whose command line names each
    path (a checkpoint, or the data folder of the limits it runs under)."""
    needles = {path: json.dumps(str(path))[1:-1] for path in paths}  # as in its JSON config
    found: dict[Path, list[int]] = {path: [] for path in paths}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if MARK in line:
            for path, needle in needles.items():
                if needle in line:
                    found[path].append(int(pid))
    return found


def kill_hosts(data_dir: Path) -> None:
    """End the inference hosts left of a test (its limits' data folder is the test's own)."""
    for pid in inference_hosts([data_dir])[data_dir]:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # its jail dies with it (--die-with-parent)


def host_socket(pid: int) -> str | None:
    """The socket a host was started to listen on (its command line's config)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        return str(json.loads([a for a in argv if a][-1])["socket"])
    except (OSError, ValueError, KeyError, IndexError):
        return None


def listening(paths: set[str]) -> int:
    """How many sockets listen on these paths now (/proc/net/unix, flag __SO_ACCEPTCON)."""
    count = 0
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        parts = line.split()
        count += len(parts) >= 8 and int(parts[3], 16) & 0x10000 != 0 and parts[7] in paths
    return count


@dataclass
class HostWatch:
    """The inference hosts of some checkpoints, looked for every 50 ms while it runs: every
    pid seen, and the most taking clients at once (listening on the checkpoint's socket). A
    host that retired (its child died, or it idled) may still be seeing its last clients out
    beside the next one: two processes, one taking clients."""

    paths: list[Path]
    seen: dict[Path, set[int]] = field(default_factory=dict)
    most: dict[Path, int] = field(default_factory=dict)
    stopped: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while True:
            for path, pids in inference_hosts(self.paths).items():
                self.seen.setdefault(path, set()).update(pids)
                sockets = {socket for pid in pids if (socket := host_socket(pid))}
                self.most[path] = max(self.most.get(path, 0), listening(sockets))
            if self.stopped.wait(0.05):
                return


@contextmanager
def watching_hosts(paths: list[Path]) -> Iterator[HostWatch]:
    watch = HostWatch(paths)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch.stopped.set()
        thread.join(10)


def run_batch(cluster: Cluster, spec: dict[str, Any], name: str) -> str:
    path = cluster.tmp_path / f"{name}.json"
    path.write_text(json.dumps(spec))
    submitted = arena("submit", str(path), env=cluster.env)
    assert submitted.returncode == 0, submitted.stderr
    batch_id = submitted.stdout.strip()
    assert wait_finished(cluster.db, batch_id, timeout=600) == "done", cluster.db.batch(batch_id)
    return batch_id


def board(db: Store, name: str) -> dict[str, Any]:
    """The board as stored: the sorted set and every row's hash, raw."""
    key = db.k_lb(name)
    rows = db.r.zrange(key, 0, -1, withscores=True)
    return {agent: (score, db.r.hgetall(f"{key}:entry:{agent}")) for agent, score in rows}


def same_rows(reference: dict[str, Any], hostile: dict[str, Any], agents: list[str]) -> None:
    """The other agents' rows, byte for byte: score, stats and protocol (what differs by
    construction: the batch, the time and the provenance naming them)."""
    for agent in agents:
        (score, row), (other_score, other) = reference[agent], hostile[agent]
        assert score == other_score, agent
        assert row["stats"] == other["stats"] and row["score"] == other["score"], agent


def check_attacks(cluster: Cluster, batch_id: str, names: set[str]) -> None:
    """Every attack failed, as each hostile process reported and as the world shows."""
    logs = cluster.db.logs(batch_id)
    stored = json.dumps([r.model_dump() for r in cluster.db.unit_results(batch_id).values()])
    for secret in (PASSWORD, TOKEN, SSH_KEY):
        assert secret not in stored and not any(secret in log for log in logs.values())
    reports = [
        json.loads(line.removeprefix("HOSTILE "))
        for log in logs.values()
        for line in log.splitlines()
        if line.startswith("HOSTILE ")
    ]
    assert {r["name"] for r in reports} == names, logs
    for report in reports:
        assert report["env_leaks"] == [] and report["proc_leaks"] == [], report
        # The jail's own processes only: bwrap's init, the fork server, the unit's own child
        # (whose pid grows with the units the jail served) and the next unit's, waiting.
        assert len(report["proc_seen"]) <= 4 and "1" in report["proc_seen"], report
        assert all(a.startswith("failed") for a in report["redis"].values()), report["redis"]
        assert all(a.startswith("failed") for a in report["ssh"]), report["ssh"]
        assert report["outside"].startswith("failed"), report
        # A path under /tmp (pytest's tmp_path) is in the jail's own /tmp there: the host's
        # file is checked below.
        writes = {p: w for p, w in report["writes"].items() if not p.startswith("/tmp/")}
        assert all(w.startswith("failed") for w in writes.values()), json.dumps(writes)
        assert report["forks"] == 0, report
        # The inference hosts' folder is the host's /tmp's, never in a jail's own.
        assert set(cluster.config["host_dirs"]) <= set(report["hosts"]), report["hosts"]
        assert all(t.startswith("failed") for t in report["hosts"].values()), report["hosts"]
        for folder, (written, how) in report["fill"].items():  # its /tmp holds 64 MiB
            in_tmp = folder == "/tmp" or folder.startswith("/tmp/")  # the jail's own /tmp
            assert how.startswith("stopped") and written <= (64 << 20 if in_tmp else 0)
    for path in cluster.config["write_paths"]:
        assert not Path(path).exists(), path
    assert not cluster.db.r.exists("arena:lb:stolen")
    try:
        cluster.listener.accept()[0].close()
        connected = True
    except BlockingIOError:
        connected = False
    assert not connected, "a hostile agent reached the listener"


def outcomes(db: Store, batch_id: str) -> dict[str, set[tuple[str, str | None, str]]]:
    found: dict[str, set[tuple[str, str | None, str]]] = {}
    for result in db.unit_results(batch_id).values():
        reason = (result.reason or "").split(";")[0]
        found.setdefault(result.agent, set()).add((result.status, result.error_kind, reason))
    return found


def test_hostile_mario_agents_and_checkpoints_cannot_touch_the_board(cluster: Cluster):
    pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")
    if not os.environ.get("CI"):
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    sb3 = poisoned_checkpoints(cluster)
    hostile = [{"name": "hostile-probe", "entry_point": "hostile_agents:mario_probe"}]
    hostile += [
        {"name": f"hostile-{n}", "entry_point": f"hostile_agents:{n}"}
        for n in ("hog", "quitter", "killer")
    ]
    hostile += [{"name": name, "sb3": str(path)} for name, path in sb3.items()]
    spec: dict[str, Any] = {
        "workload": "mario",
        "leaderboard": "ref",
        "agents": ["right", "jump-right"],
        "items": ["1-1"],
        "protocol": {"episodes": 2, "seed": 7, "unit_time_limit_s": 300},
        "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 120},
    }
    run_batch(cluster, spec, "reference")
    reference = board(cluster.db, "ref-1-1")
    children = cluster.pools.children(cluster.pool)
    batch_id = run_batch(
        cluster,
        {**spec, "leaderboard": "hostile", "agents": [*spec["agents"], *hostile]},
        "hostile",
    )
    assert board(cluster.db, "ref-1-1") == reference  # another batch's board: untouched
    after = board(cluster.db, "hostile-1-1")
    same_rows(reference, after, ["right", "jump-right"])
    assert max(score for score, _ in after.values()) < 1e9
    check_attacks(cluster, batch_id, {"hostile-probe", *sb3})
    assert outcomes(cluster.db, batch_id) == {
        "right": {("ok", None, "")},
        "jump-right": {("ok", None, "")},
        "hostile-probe": {("ok", None, "")},
        "sb3-probe": {("ok", None, "")},
        "hostile-hog": {("error", "agent", MEMORY)},
        "sb3-hog": {("error", "agent", MEMORY)},
        "hostile-quitter": {("error", "agent", DIED + "exited with code 3")},
        "sb3-quitter": {("error", "agent", DIED + "exited with code 3")},
        "hostile-killer": {("error", "agent", DIED + "was killed by signal 9 (SIGKILL)")},
    }
    assert cluster.pool.poll() is None and cluster.pools.children(cluster.pool) == children


def test_hostile_checkpoints_on_a_shared_inference_host_cannot_touch_the_board(
    shared_cluster: Cluster,
):
    """The poisoned checkpoints' lockstep batches, on the one inference process per checkpoint
    that serves both worker processes: as in the test above, every attack fails (in the host's
    jailed child, which prints its report into the log of the unit that asked), the hog and the
    quitter end as the agent's faults, the other boards and rows are untouched."""
    pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")
    if not os.environ.get("CI"):
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    cluster = shared_cluster
    sb3 = poisoned_checkpoints(cluster)
    spec: dict[str, Any] = {
        "workload": "mario",
        "leaderboard": "ref",
        "agents": ["right"],
        "items": ["1-1"],
        # Two lockstep groups per checkpoint: the two worker processes may ask one host at once.
        "protocol": {"episodes": 4, "seed": 7, "unit_time_limit_s": 300},
        "params": {
            "frame_skip": 4,
            "action_set": "right_only",
            "max_steps": 120,
            "inference_batch": 2,
        },
    }
    run_batch(cluster, spec, "reference")
    reference = board(cluster.db, "ref-1-1")
    children = cluster.pools.children(cluster.pool)
    hostile = [{"name": name, "sb3": str(path)} for name, path in sb3.items()]
    with watching_hosts(list(sb3.values())) as hosts:
        batch_id = run_batch(
            cluster, {**spec, "leaderboard": "hostile", "agents": ["right", *hostile]}, "hostile"
        )
    assert board(cluster.db, "ref-1-1") == reference
    after = board(cluster.db, "hostile-1-1")
    same_rows(reference, after, ["right"])
    assert max(score for score, _ in after.values()) < 1e9
    check_attacks(cluster, batch_id, set(sb3))
    assert outcomes(cluster.db, batch_id) == {
        "right": {("ok", None, "")},
        "sb3-probe": {("ok", None, "")},
        "sb3-hog": {("error", "agent", MEMORY)},
        "sb3-quitter": {("error", "agent", DIED + "exited with code 3")},
    }
    # Each checkpoint ran on its host (not in a worker's own child), never two taking clients.
    assert all(hosts.seen.get(path) for path in sb3.values()), hosts.seen
    assert all(n <= 1 for n in hosts.most.values()), hosts.most
    assert cluster.pool.poll() is None and cluster.pools.children(cluster.pool) == children


def test_a_hostile_alympics_agent_cannot_touch_the_board(cluster: Cluster):
    hostile = [{"name": "hostile-probe", "entry_point": "hostile_agents:alympics_probe"}]
    hostile += [
        {"name": f"hostile-{n}", "entry_point": f"hostile_agents:{n}"}
        for n in ("hog", "quitter", "killer")
    ]
    spec: dict[str, Any] = {
        "workload": "alympics",
        "leaderboard": "ref",
        "agents": ["builtin"],
        "items": list(GAMES),
        "protocol": {"seed": 7},
        "params": {"episodes": 2},
    }
    run_batch(cluster, spec, "reference")
    reference = board(cluster.db, "ref")
    children = cluster.pools.children(cluster.pool)
    batch_id = run_batch(
        cluster, {**spec, "leaderboard": "hostile", "agents": ["builtin", *hostile]}, "hostile"
    )
    assert board(cluster.db, "ref") == reference
    after = board(cluster.db, "hostile")
    same_rows(reference, after, ["builtin"])
    assert after["hostile-probe"][0] == reference["builtin"][0]  # it played the built-in's moves
    check_attacks(cluster, batch_id, {"hostile-probe"})
    found = outcomes(cluster.db, batch_id)
    assert found["builtin"] == found["hostile-probe"] == {("ok", None, "")}
    expected = {
        "hostile-hog": f"memory limit {MEMORY_MB} MB exceeded",
        "hostile-quitter": "the agent's process exited with code 3",
        "hostile-killer": "the agent's process was killed by signal 9",
    }
    for agent, why in expected.items():
        results = [r for r in cluster.db.unit_results(batch_id).values() if r.agent == agent]
        assert len(results) == 13 and {(r.status, r.error_kind) for r in results} == {
            ("error", "agent")
        }
        assert all("AgentForfeit" in (r.reason or "") and why in (r.reason or "") for r in results)
    assert cluster.pool.poll() is None and cluster.pools.children(cluster.pool) == children


def test_a_checkpoints_passes_come_back_from_the_shared_host_as_from_its_own_child(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
):
    """A checkpoint whose payload replaces its passes: a batch of one answers a string as long
    as a child may send (MAX_ANSWER bytes of control characters, each 6 in JSON), others print
    a line and answer. Its own child in the worker hands the long answer over (the batch policy
    then fails it: the agent's error), and so does the shared host; each pass's line comes back
    with its answer, into the log of the unit that asked. Before, the host's message outgrew
    what its client reads (the agent's answer became HostBroken: an infrastructure error), and
    a line printed by a pass that answered at once was left in the pipe, for the next client's
    answer or for nobody."""
    pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")
    if not os.environ.get("CI"):
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    import numpy as np

    from tests.mario.sb3_models import build_checkpoint, with_pickle_payload
    from workers.agent_wire import MAX_ANSWER
    from workers.mario.protocol import action_names
    from workers.mario.sb3 import BATCH_KEY, SEED_KEY
    from workers.sandbox.agent_sandbox import AgentLimits, AgentSource, untrusted_agent
    from workers.sandbox.shared_agent import CONNECTIONS, shared_agent

    require_bwrap()
    length = MAX_ANSWER - 1  # and its frame's tag
    code = f"""
from workers.mario import sb3

def act_batch(self, batch):
    if len(batch) == 1:
        return chr(1) * {length}
    print("PASS", flush=True)
    return [0] * len(batch)

sb3.CheckpointAgent.act_batch = act_batch
"""
    checkpoint = build_checkpoint(tmp_path / "ppo")
    checkpoint = with_pickle_payload(checkpoint, tmp_path / "passes.zip", code)
    source = AgentSource(checkpoint=str(checkpoint))
    limits = AgentLimits(data_dir=tmp_path / "data", memory_mb=MEMORY_MB)

    def batch(n: int) -> dict[str, Any]:
        return {BATCH_KEY: np.zeros((n, 84, 84, 4), np.uint8), SEED_KEY: 0}

    try:
        with untrusted_agent(source, None, limits, step_timeout_s=30) as agent:
            agent.reset(seed=0, actions=action_names("right_only"))
            assert agent.act(batch(1)) == "\x01" * length
        with shared_agent(source, None, limits, step_timeout_s=30, idle_s=1) as agent:
            agent.reset(seed=0, actions=action_names("right_only"))
            assert agent.act(batch(1)) == "\x01" * length
            capfd.readouterr()
            for _ in range(20):
                assert agent.act(batch(2)) == [0, 0]
                assert capfd.readouterr().out == "PASS\n"
    finally:
        CONNECTIONS.clear()
        kill_hosts(tmp_path / "data")
