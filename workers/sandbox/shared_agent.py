"""A checkpoint's lockstep batches answered by its host-wide inference process
(workers/sandbox/inference_host.py), seen from a worker process as a sandboxed agent.

The first worker process that needs a checkpoint's host starts it (under a file lock, so two
never do) and every other process of the host connects to the same socket. A worker process
keeps its last few hosts' connections (CONNECTIONS, a WarmPool as for agents' processes). What the
host answers means what the jailed child's answer means in the worker: the agent's faults are
AgentFault and AgentRaised, raised here the same; a host that stops answering is the host's
(HostBroken: an infrastructure error).

Time waiting behind other groups' requests is the host's, not the agent's (issue 33): the host
starts the child's per-step timeout when it starts a request, and tells a request that waits
that it lives every KEEPALIVE_S. So a client waits for its answer as long as it hears from the
host at least every step timeout + `silence_s` (ARENA_INFERENCE_SILENCE_S); only a host silent
that long is broken. A checkpoint slow within its step timeout is never an infrastructure
error however many groups queue for it; what the queue costs counts against the unit's own
time limit (the agent's, as any slowness of its own).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workers.fingerprint import AgentFingerprint
from workers.sandbox.agent_process import AgentProcessDied, agent_exception, write_stdout
from workers.sandbox.agent_sandbox import (
    THREAD_VARIABLES,
    WARM_PROCESSES,
    AgentLimits,
    AgentSource,
    WarmPool,
    check_gpu_reached,
    gpu_devices,
    process_key,
)
from workers.sandbox.bwrap import DEFAULT_ENV_NAMES
from workers.sandbox.host_wire import receive, send
from workers.sandbox.inference_host import BOOT, FAULTS, MARK, HostBroken, run_dir

# How long past a request's own step timeout (which the host enforces itself) a client waits
# without a word from the host, by default: the child's end and the answer's way back.
SILENCE_S = 30.0
RETIRING_TRIES = 4  # hello to a retiring host, then to the one after it
RETIRING_WAIT_S = 0.3  # a retiring host unlinks its socket within its loop's 0.25 s tick
HOST_ENV = ("PATH", "ARENA_BWRAP", *DEFAULT_ENV_NAMES, *THREAD_VARIABLES)


class Connection:
    """One worker process's connection to one host."""

    def __init__(self, sock: socket.socket, label: str, started: bool = False) -> None:
        self.sock, self.label = sock, label
        self.started = started  # to a host this process started just now

    def ask(
        self,
        meta: dict[str, Any],
        payload: bytes = b"",
        timeout_s: float = 10.0,
        silence_s: float = SILENCE_S,
    ) -> Any:
        """The answer's value; the agent's faults raise as in the worker, the host's as
        HostBroken: no word from it (an answer, or that the request waits) for timeout_s +
        silence_s. A request cut short (the unit's deadline) leaves the connection closed."""
        bound = timeout_s + silence_s
        try:
            self.sock.settimeout(bound)
            send(self.sock, meta, payload)
            answer, _ = receive(self.sock)
            while "waiting" in answer:  # queued behind others' requests: the host's time
                answer, _ = receive(self.sock)
        except (OSError, ValueError) as lost:
            self.close()
            why = (
                f"the inference host of {self.label} stopped answering (silent {bound:g}s): {lost}"
            )
            raise HostBroken(why) from None
        except BaseException:
            self.close()
            raise
        return value(answer)

    @property
    def reusable(self) -> bool:
        """Still connected (a request cut short or a lost host closes it)."""
        return self.sock.fileno() >= 0

    def close(self) -> None:
        self.sock.close()


def value(answer: dict[str, Any]) -> Any:
    printed = answer.get("printed")
    if isinstance(printed, str) and printed:
        sys.stdout.flush()
        write_stdout(printed.encode())
    if "ok" in answer:
        return answer["ok"]
    if "made" in answer:
        return answer["made"]
    raised = answer.get("raised")
    if isinstance(raised, list) and len(raised) == 2:
        raise agent_exception(str(raised[0]))(str(raised[1])[:1000])
    if "fault" in answer:
        raise FAULTS.get(str(answer["fault"]), AgentProcessDied)(str(answer.get("why"))[:1000])
    if "dead" in answer:
        raise AgentProcessDied(str(answer["dead"])[:1000])
    raise HostBroken(str(answer.get("broken", answer))[:1000])


class SharedAgent:
    """The checkpoint as run_lockstep asks it: reset, act({BATCH_KEY, SEED_KEY}), runtime."""

    def __init__(
        self, connection: Connection, made: Any, step_timeout_s: float, silence_s: float
    ) -> None:
        self.connection, self.step_timeout_s = connection, step_timeout_s
        self.silence_s = silence_s
        made = made if isinstance(made, dict) else {}
        self.label = str(made.get("label"))
        runtime = made.get("runtime")
        self.runtime: dict[str, Any] | None = runtime if isinstance(runtime, dict) else None
        self.host_pid = made.get("host_pid")  # which host answered (its logs, the tests)

    def reset(self, **context: Any) -> None:
        request = {"op": "reset", "context": context, "timeout_s": self.step_timeout_s}
        self.connection.ask(request, timeout_s=self.step_timeout_s, silence_s=self.silence_s)

    def act(self, observation: dict[str, Any]) -> Any:
        from workers.mario.sb3 import BATCH_KEY, SEED_KEY  # the mario extra: where units run

        batch = observation[BATCH_KEY]
        meta = {
            "op": "act",
            "shape": list(batch.shape),
            "seed": int(observation.get(SEED_KEY, 0)),
            "timeout_s": self.step_timeout_s,
        }
        return self.connection.ask(meta, batch.tobytes(), self.step_timeout_s, self.silence_s)


CONNECTIONS = WarmPool[Connection](WARM_PROCESSES).kept_for_the_process()


@contextmanager
def shared_agent(
    source: AgentSource,
    expected: AgentFingerprint | None,
    limits: AgentLimits,
    *,
    step_timeout_s: float,
    idle_s: float,
    silence_s: float = SILENCE_S,
) -> Iterator[SharedAgent]:
    """The checkpoint's host-wide agent for one lockstep group. AgentChanged is raised here
    before anything runs; AgentSandboxUnavailable where no jail can start. A host silent for
    a request's timeout + silence_s is broken (HostBroken)."""
    if source.checkpoint is None:
        raise ValueError("only a checkpoint's batches are answered by a shared host")
    key = hashlib.sha256(process_key(source, expected, limits).encode()).hexdigest()[:32]
    made: Any = None
    connection = CONNECTIONS.take(key)
    # A host that is retiring (its child died: it answers "dead", or hangs up on a connection
    # its closing listener had queued) is asked again, once its socket is gone, by a new host;
    # what a host started just now for this group answers is final.
    for attempt in range(1, RETIRING_TRIES + 1):
        started = False  # a kept connection's host was started for an earlier group
        if connection is None or not connection.reusable:
            connection = connect(key, source, limits, idle_s)
            started = connection.started
        try:
            made = connection.ask({"op": "hello"}, b"", limits.start_timeout_s, silence_s)
            break
        except (AgentProcessDied, HostBroken):
            connection.close()
            if started or attempt == RETIRING_TRIES:
                raise
            if attempt > 1:
                time.sleep(RETIRING_WAIT_S)
        except BaseException:  # the make's own error (the agent's): this connection is done
            connection.close()
            raise
    assert connection is not None
    try:
        check_gpu_reached(source, made, gpu_devices())
        yield SharedAgent(connection, made, step_timeout_s, silence_s)
    finally:
        CONNECTIONS.give(key, connection)


def connect(key: str, source: AgentSource, limits: AgentLimits, idle_s: float) -> Connection:
    """A connection to the checkpoint's host, started here if none is listening."""
    folder = run_dir()
    path = folder / f"{key}.sock"
    label = Path(source.checkpoint or "").name
    sock = _try(path)
    if sock is not None:
        return Connection(sock, label)
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = _try(path)
        if sock is not None:
            return Connection(sock, label)
        return Connection(_start(path, source, limits, idle_s), label, started=True)


def _try(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _start(path: Path, source: AgentSource, limits: AgentLimits, idle_s: float) -> socket.socket:
    """Start the host (its own session: a worker's Ctrl-C is not its end) and connect."""
    config = {
        "socket": str(path),
        "source": source.model_dump(),
        "limits": limits.model_dump(mode="json"),
        "idle_s": idle_s,
    }
    arena_root = Path(__file__).resolve().parents[2]
    log = path.with_suffix(".log")
    with open(log, "wb") as out:
        boot = BOOT.format(root=str(arena_root))
        host = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", boot, MARK, json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={name: os.environ[name] for name in HOST_ENV if name in os.environ},
            start_new_session=True,
        )
    end = time.monotonic() + limits.start_timeout_s
    while time.monotonic() < end:
        sock = _try(path)
        if sock is not None:
            return sock
        if host.poll() is not None:
            said = " ".join(log.read_text(errors="replace").split())[-300:]
            raise HostBroken(f"the inference host did not start (exit {host.returncode}): {said}")
        time.sleep(0.02)
    host.kill()
    raise HostBroken(f"the inference host did not listen within {limits.start_timeout_s:g}s")


__all__ = ["CONNECTIONS", "SILENCE_S", "Connection", "SharedAgent", "connect", "shared_agent"]
