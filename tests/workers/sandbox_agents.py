"""Agents for tests/workers/test_agent_sandbox.py, run in the agent sandbox as entry points
(tests.workers.sandbox_agents:NAME, or a copy of this file as a package of its own). Standard
library and Arena's `workers` only."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

# A new one in every process that imports this module: tells processes apart.
PROCESS_TOKEN = uuid.uuid4().hex


class Facts:
    """Answers each observation {"ask": NAME, ...} with what it finds out about its process."""

    def reset(self, **context: Any) -> None:
        self.context = context

    def act(self, observation: dict[str, Any]) -> Any:
        return getattr(self, f"_{observation['ask']}")(observation)

    def _token(self, observation: dict[str, Any]) -> Any:
        return PROCESS_TOKEN

    def _environment(self, observation: dict[str, Any]) -> Any:
        return {
            "env": dict(os.environ),
            "uid": os.getuid(),
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "path": sys.path,
            "proc": sorted(p for p in os.listdir("/proc") if p.isdigit()),
        }

    def _listing(self, observation: dict[str, Any]) -> Any:
        path = observation["path"]
        return sorted(os.listdir(path)) if os.path.isdir(path) else None

    def _read(self, observation: dict[str, Any]) -> Any:
        try:
            with open(observation["path"], "rb") as handle:
                return handle.read(100).decode(errors="replace")
        except OSError as exc:
            return f"error: {type(exc).__name__}"

    def _write(self, observation: dict[str, Any]) -> Any:
        try:
            with open(observation["path"], "w") as handle:
                handle.write("written from the jail")
            return "written"
        except OSError as exc:
            return f"error: {type(exc).__name__}"

    def _connect(self, observation: dict[str, Any]) -> Any:
        try:
            with socket.create_connection(("127.0.0.1", observation["port"]), timeout=2):
                return "connected"
        except OSError as exc:
            return f"error: {type(exc).__name__}"

    def _fork(self, observation: dict[str, Any]) -> Any:
        outcomes = []
        for start in (os.fork, lambda: subprocess.run(["/bin/true"], check=False)):
            try:
                pid = start()
                if pid == 0:
                    os._exit(0)
                outcomes.append("started")
            except OSError as exc:
                outcomes.append(f"error: {type(exc).__name__}")
        thread = threading.Thread(target=outcomes.append, args=("thread ran",))
        thread.start()
        thread.join()
        return outcomes

    def _frame(self, observation: dict[str, Any]) -> Any:
        frame = observation["frame"]
        return {
            "sum": int(frame.sum()),
            "shape": list(frame.shape),
            "writeable": frame.flags.writeable,
            "keys": sorted(observation),
            "info": observation.get("info"),
            "strides": list(frame.strides),
            "corner": frame[0, 0].tolist(),
        }

    def _echo(self, observation: dict[str, Any]) -> Any:
        return observation

    def _allocate(self, observation: dict[str, Any]) -> Any:
        hoard = [bytearray(64 << 20) for _ in range(observation["times"])]
        return len(hoard)

    def _sleep(self, observation: dict[str, Any]) -> Any:
        time.sleep(observation["seconds"])
        return "slept"

    def _exit(self, observation: dict[str, Any]) -> Any:
        os._exit(observation["code"])

    def _kill(self, observation: dict[str, Any]) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)

    def _print(self, observation: dict[str, Any]) -> Any:
        print(observation["text"])
        return "printed"

    def _flood(self, observation: dict[str, Any]) -> Any:
        line = "x" * 1023 + "\n"
        for _ in range(observation["kib"]):
            sys.stdout.write(line)
        print("the flood's last line")
        return "flooded"

    def _spin(self, observation: dict[str, Any]) -> Any:
        end = time.process_time() + observation["seconds"]
        while time.process_time() < end:
            pass
        return "spun"

    def _leave(self, observation: dict[str, Any]) -> Any:
        """Leave traces a next unit could read: a file, a folder's mode, a SysV segment."""
        import ctypes

        os.makedirs("/tmp/left/deep", exist_ok=True)
        with open("/tmp/left/deep/note", "w") as handle:
            handle.write("from the last unit")
        os.chmod("/tmp/left", 0)
        os.chmod("/tmp", 0o700)
        libc = ctypes.CDLL(None, use_errno=True)
        made = libc.shmget(0x5EED, 4096, 0o1600)  # IPC_CREAT | 0600
        return {"shm": made, "errno": ctypes.get_errno()}

    def _traces(self, observation: dict[str, Any]) -> Any:
        return {"tmp": sorted(os.listdir("/tmp")), "mode": oct(os.stat("/tmp").st_mode & 0o777)}


def facts() -> Facts:
    return Facts()


class Mutator:
    """The built-in agent, which also prints a digest of every observation it gets, then
    mutates it and its history entries: what it gets next must be what it would get in the
    worker's own process. Every fifth move raises, every seventh answers garbage (faults)."""

    def reset(self, *, game: str, player: int, seed: int) -> None:
        from workers.games import BUILTIN

        self.inner, self.moves = BUILTIN[game](), 0
        self.inner.reset(game=game, player=player, seed=seed)

    def act(self, observation: dict[str, Any]) -> Any:
        self.moves += 1
        text = json.dumps(observation, sort_keys=True).encode()
        print(self.moves, hashlib.sha256(text).hexdigest()[:16])
        for entry in observation.get("history", []):
            entry[f"seen at move {self.moves}"] = True
        action = self.inner.act(observation)
        observation["round"] = -1
        if self.moves % 5 == 0:
            raise RuntimeError(f"agent bug at move {self.moves}")
        return {"garbage": self.moves} if self.moves % 7 == 0 else action


def mutator() -> Mutator:
    return Mutator()


class DiesAtMove:
    """The built-in Alympics agent until its third move, when its process exits."""

    def reset(self, *, game: str, player: int, seed: int) -> None:
        from workers.games import BUILTIN

        self.inner, self.moves = BUILTIN[game](), 0
        self.inner.reset(game=game, player=player, seed=seed)

    def act(self, observation: dict[str, Any]) -> Any:
        self.moves += 1
        if self.moves == 3:
            os._exit(3)
        return self.inner.act(observation)


def dies_at_move() -> DiesAtMove:
    return DiesAtMove()


class SwallowsEverything:
    """A bandit agent that catches everything it can, BaseException included, and sleeps."""

    def reset(self, **context: Any) -> None:
        pass

    def act(self, observation: Any) -> int:
        while True:
            with contextlib.suppress(BaseException):
                time.sleep(3600)


def swallows_everything() -> SwallowsEverything:
    return SwallowsEverything()


class OnlyFresh:
    """Prisoner's Dilemma: cooperates while it is a new agent playing its first episode, defects
    in every episode after its first (were it ever reused) or once it has been reset twice."""

    def __init__(self) -> None:
        self.resets = 0

    def reset(self, **context: Any) -> None:
        self.resets += 1

    def act(self, observation: dict[str, Any]) -> str:
        return "C" if self.resets == 1 else "D"


def only_fresh() -> OnlyFresh:
    return OnlyFresh()
