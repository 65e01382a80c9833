"""One process per checkpoint per host that answers every worker process's lockstep batches, so
that a GPU host holds one CUDA context per checkpoint, not one per worker process (issue 25;
docs/mario.md, "Batching"). The client half is workers/sandbox/shared_agent.py.

The host is Arena's own code, started by the first worker process that needs it with an
environment of Arena's making (no cluster credentials), listening on a unix socket in a folder
only this user can enter (`run_dir`; a jail has a /tmp of its own and never sees it). The
checkpoint itself runs where it always does: in its jailed child (AgentProcess), made once. The
host asks the child one request at a time, in the order they came (FIFO), each group's batch as
one forward pass, so the batches the policy sees are exactly those of a worker that runs the
child itself: sharing changes where the pass runs, not what it computes. Each batch carries its
own seed (batched.agent_policy), so groups interleaved on one model draw what they would alone.

Queueing is the host's time, not the agent's (issue 33): the child's per-step timeout starts
when the host starts a request, and while a request waits behind others' the host tells its
client every KEEPALIVE_S that it lives and works (a thread asks the child while the main loop
reads and queues requests). A client hears nothing only from a host that is gone or stuck.

A child that dies, times out or fails the contract ends its host's service: the host unlinks
its socket (the next group starts a new host), tells the clients it has, and exits when the last
one leaves. A host with no client for `idle_s` exits too.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import signal
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from workers.sandbox.agent_process import (
    AgentFault,
    AgentOutOfMemory,
    AgentProcess,
    AgentProcessDied,
    AgentRaised,
    AgentTimedOut,
    ProcessPlan,
)
from workers.sandbox.agent_sandbox import AgentLimits, AgentSource, plan_for
from workers.sandbox.base import SandboxUnavailable
from workers.sandbox.host_wire import (
    KEEPALIVE_S,
    PRINTED_MAX,
    Answering,
    Client,
    Queued,
    receive,
    request_timeout,
    send,
)

MARK = "arena-inference-host"  # in the host's command line: `ps` shows what it is
READ_TIMEOUT_S = 30.0  # the rest of a request, once its header came
BOOT = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from workers.sandbox.inference_host import main; main()"
)
FAULTS: dict[str, type[AgentFault]] = {
    c.__name__: c for c in (AgentFault, AgentProcessDied, AgentOutOfMemory, AgentTimedOut)
}


class HostBroken(SandboxUnavailable):
    """The host could not serve (not the agent's doing: an infrastructure error)."""


def run_dir() -> Path:
    """The folder of the hosts' sockets: this user's, private, on the host's own /tmp."""
    path = Path(tempfile.gettempdir()) / f"arena-inference-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    found = path.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        # Another user's folder could hold a socket that answers the actions it likes.
        raise HostBroken(f"{path} is not a folder private to this user: remove it")
    return path


class HostedProcess(AgentProcess):
    """The child, whose printing goes back with the answer to the client that asked (into
    that unit's log, as a worker's own child's does), not into the host's log."""

    def __init__(self, plan: ProcessPlan, start_timeout_s: float) -> None:
        self.printed = bytearray()
        super().__init__(plan, start_timeout_s)

    def _forward(self, data: bytes) -> None:
        self._tail = (self._tail + data)[-2000:]
        self.printed += data[: max(0, PRINTED_MAX - len(self.printed))]

    def take_printed(self) -> str:
        """What it printed since the last answer. All it printed before answering is in the
        pipe by now (a print is written before the answer is sent), though an answer that came
        at once was read before it: read it here, so that it goes with this answer, not with
        the next client's (or, the last, nowhere)."""
        for _ in range(16):  # at most 1 MiB: a child that never stops printing still answers
            if self.sock.fileno() < 0 or not select.select([self.output], [], [], 0)[0]:
                break  # closed (what was left was read then) or nothing waiting
            self._forward_output()
        text = self.printed.decode(errors="replace")
        self.printed.clear()
        return text


class InferenceHost:
    """The checkpoint's child and the clients it serves."""

    def __init__(self, source: AgentSource, limits: AgentLimits) -> None:
        self.source, self.limits = source, limits
        self.process: HostedProcess | None = None
        self.hello: dict[str, Any] = {}
        self.first_printed = ""

    def start(self) -> None:
        """The jailed child, and the checkpoint made in it (once, for every client)."""
        try:
            self.process = HostedProcess(plan_for(self.source, self.limits), self.start_s)
        except SandboxUnavailable as broken:
            self.hello = {"broken": str(broken)}
            return
        self.hello = self._ask("make", self.source.make_request(), self.start_s)
        # What it printed making the agent goes into the first client's log, made or not.
        self.first_printed = str(self.hello.pop("printed", ""))
        if "ok" in self.hello:
            made = self.hello["ok"] if isinstance(self.hello["ok"], dict) else {}
            self.hello = {"made": {**made, "host_pid": os.getpid()}}

    @property
    def start_s(self) -> float:
        return self.limits.start_timeout_s

    @property
    def serving(self) -> bool:
        """False once the child can answer nothing more (or never started)."""
        return self.process is not None and self.process.dead is None

    def retiring(self, clients: int, idle_for: float, idle_s: float) -> bool:
        """Whether to stop taking clients: the child made the agent and died since, or nobody
        asked for idle_s (2 s after a start that failed: its clients have their answer)."""
        made = "made" in self.hello
        if made and not self.serving:
            return True
        return not clients and idle_for > (idle_s if made else min(idle_s, 2.0))

    def answer(self, meta: dict[str, Any], payload: bytes) -> dict[str, Any]:
        op = meta.get("op")
        if op == "hello":
            if self.serving or "made" not in self.hello:
                printed, self.first_printed = self.first_printed, ""
                return {**self.hello, "printed": printed} if printed else self.hello
            return {"dead": self._why()}
        if self.process is None or "made" not in self.hello:
            return {"broken": "the host has no agent to ask"}
        if self.process.dead is not None:  # ended by the fault of a request before this one
            return {"fault": AgentProcessDied.__name__, "why": self._why()}
        timeout_s = float(meta.get("timeout_s", 10.0))
        if op == "reset":
            return self._ask("reset", meta.get("context", {}), timeout_s)
        if op == "act":
            import numpy  # here: only where batches are answered (the mario extra)

            from workers.mario.sb3 import BATCH_KEY, SEED_KEY

            batch = numpy.frombuffer(payload, numpy.uint8).reshape(meta["shape"])
            observation = {BATCH_KEY: batch, SEED_KEY: int(meta["seed"])}
            return self._ask("act", self.process.encode(observation), timeout_s)
        return {"broken": f"no such request {str(op)[:40]!r}"}

    def _ask(self, op: str, argument: Any, timeout_s: float) -> dict[str, Any]:
        assert self.process is not None
        answer: dict[str, Any]
        try:
            answer = {"ok": self.process.request(op, argument, timeout_s)}
        except AgentRaised as raised:
            answer = {"raised": [type(raised).__name__, str(raised)]}
        except AgentFault as fault:
            answer = {"fault": type(fault).__name__, "why": str(fault)}
        printed = self.process.take_printed()
        return {**answer, "printed": printed} if printed else answer

    def _why(self) -> str:
        return str(self.process.dead if self.process else "the agent's process did not start")

    def close(self) -> None:
        if self.process is not None:
            self.process.close()


def serve(host: InferenceHost, listener: socket.socket, path: Path, idle_s: float) -> None:
    """Take requests from every client until the child is gone (or none came for idle_s) and
    the last client has left; `hello` at once, the others in turn (Answering)."""
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    inode = path.stat().st_ino
    answering = Answering(host.answer)
    listening, clients, idle_since = True, 0, time.monotonic()
    try:
        while True:
            if listening and host.retiring(clients, time.monotonic() - idle_since, idle_s):
                _retire(selector, listener, path, inode)
                listening = False
            if not listening and not clients:
                return
            for key, _ in selector.select(timeout=KEEPALIVE_S / 4):
                if key.fileobj is listener:
                    connection, _ = listener.accept()
                    connection.settimeout(None)
                    selector.register(connection, selectors.EVENT_READ, Client(connection))
                    clients += 1
                elif not take(host, answering, key.data):  # it left, or spoke nonsense
                    selector.unregister(key.fileobj)
                    key.data.close()
                    clients -= 1
                    idle_since = time.monotonic()
            answering.keep_alive(time.monotonic())
    finally:
        answering.stop()


def take(host: InferenceHost, answering: Answering, client: Client) -> bool:
    """Read the client's request: `hello` answered here, the others queued for the child.
    False when it left or spoke nonsense."""
    try:
        meta, payload = receive_whole(client.sock)
        if meta.get("op") == "hello":
            client.tell(host.answer(meta, payload))
        else:
            request_timeout(meta)  # nonsense is refused here, not by the answering thread
            answering.put(Queued(client, meta, payload, time.monotonic()))
    except (OSError, ValueError, TypeError):
        return False
    return True


def receive_whole(sock: socket.socket) -> tuple[dict[str, Any], bytes]:
    """A request that has begun to arrive, read whole within READ_TIMEOUT_S."""
    sock.settimeout(READ_TIMEOUT_S)
    try:
        return receive(sock)
    finally:
        sock.settimeout(None)


def _retire(
    selector: selectors.BaseSelector, listener: socket.socket, path: Path, inode: int
) -> None:
    """Stop taking clients: the socket goes (unless a new host's is already there)."""
    selector.unregister(listener)
    with contextlib.suppress(OSError):
        if path.stat().st_ino == inode:
            path.unlink()
    listener.close()


def main() -> None:
    """`python -c BOOT CONFIG`: bind, say nothing, start the child, serve, end it."""
    config = json.loads(sys.argv[-1])
    path = Path(config["socket"])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead host's (the spawner holds the lock: no live one is there)
    listener.bind(str(path))
    listener.listen(64)
    host = InferenceHost(
        AgentSource.model_validate(config["source"]), AgentLimits.model_validate(config["limits"])
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # ended: the child goes with it
    try:
        host.start()
        serve(host, listener, path, float(config["idle_s"]))
    finally:
        host.close()
        log = path.with_suffix(".log")  # its stdout: kept only if something went wrong
        with contextlib.suppress(OSError):
            if log.stat().st_size == 0:
                log.unlink()


if __name__ == "__main__":
    main()

__all__ = ["BOOT", "FAULTS", "MARK", "HostBroken", "InferenceHost", "receive", "run_dir", "send"]
