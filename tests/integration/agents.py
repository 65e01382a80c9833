"""Agents given to workers as entry points (tests.integration.agents:NAME) to exercise faults."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from typing import Any

from workers.bandit import GreedyAgent


class CrashingAgent(GreedyAgent):
    def act(self, observation: dict[str, Any]) -> int:
        arm = super().act(observation)
        if self.t == 10:
            raise RuntimeError("agent bug at pull 10")
        return arm


class SleepyAgent(GreedyAgent):
    def act(self, observation: dict[str, Any]) -> int:
        time.sleep(3600)
        return 0


class ExitingAgent(GreedyAgent):
    def act(self, observation: dict[str, Any]) -> int:
        raise SystemExit(3)


class BadArmAgent(GreedyAgent):
    def act(self, observation: dict[str, Any]) -> int:
        return 99


def crashing() -> CrashingAgent:
    return CrashingAgent()


def sleepy() -> SleepyAgent:
    return SleepyAgent()


def exiting() -> ExitingAgent:
    return ExitingAgent()


def bad_arm() -> BadArmAgent:
    return BadArmAgent()


class ProcessKiller(GreedyAgent):
    """Takes the whole worker process down (as a segfaulting extension would)."""

    def act(self, observation: dict[str, Any]) -> int:
        os._exit(1)


def process_killer() -> ProcessKiller:
    return ProcessKiller()


class SelfSigkiller(GreedyAgent):
    """Sends its own process SIGKILL (a worker's process, where trusted agents run unjailed)."""

    def act(self, observation: dict[str, Any]) -> int:
        os.kill(os.getpid(), signal.SIGKILL)
        return 0


class Segfaulter(GreedyAgent):
    """Reads address 0: the interpreter dies of SIGSEGV, as a broken C extension makes it."""

    def act(self, observation: dict[str, Any]) -> int:
        ctypes.string_at(0)
        return 0


def self_sigkiller() -> SelfSigkiller:
    return SelfSigkiller()


def segfaulter() -> Segfaulter:
    return Segfaulter()


# Alympics (game-theory benchmark) agents: a fault earns nothing, and a match set with more than
# half of its moves faulted is forfeit. Annotated with `object` so as to need no new imports.


class AlympicsRaiser:
    """Raises on every move."""

    def reset(self, game: str = "", player: int = 0, seed: int = 0, **context: object) -> None:
        self.game = game or str(context.get("game", ""))

    def act(self, observation: dict[str, object]) -> object:
        raise RuntimeError("agent bug: no move")


class AlympicsGarbage(AlympicsRaiser):
    """Answers with something no game accepts."""

    def act(self, observation: dict[str, object]) -> object:
        return {"garbage": [1, 2, 3]}


# The moves of AlympicsSometimes's match set: a unit's own in its sandbox (every unit child
# starts afresh); in one process, the count goes on from unit to unit, which changes nothing as
# long as each match set is a multiple of 5 moves.
SOMETIMES_MOVES = [0]


class AlympicsSometimes(AlympicsRaiser):
    """The builtin agent, except that 2 of every 5 of its moves in a match set (40%) raise:
    counted across the match set's episodes, each played by an agent of its own (a block of
    episodes round by round: with 5 episodes, those of episodes 1 and 2). The builtin still
    chooses every move first, so its own state runs exactly as without faults."""

    def reset(self, game: str = "", player: int = 0, seed: int = 0, **context: object) -> None:
        from workers.games import BUILTIN

        super().reset(game, player, seed, **context)
        self.inner = BUILTIN[self.game]()
        self.inner.reset(game=self.game, player=player, seed=seed, **context)

    def act(self, observation: dict[str, object]) -> object:
        action = self.inner.act(observation)
        SOMETIMES_MOVES[0] += 1
        if SOMETIMES_MOVES[0] % 5 in (1, 2):
            raise RuntimeError(f"agent bug at move {SOMETIMES_MOVES[0]}")
        return action


def alympics_raiser() -> AlympicsRaiser:
    return AlympicsRaiser()


def alympics_garbage() -> AlympicsGarbage:
    return AlympicsGarbage()


def alympics_sometimes() -> AlympicsSometimes:
    return AlympicsSometimes()


class ChattyAgent(GreedyAgent):
    """Prints on every channel an agent may use: Python's stdout and stderr, and the C level."""

    def reset(self, *, seed: int, n_arms: int) -> None:
        super().reset(seed=seed, n_arms=n_arms)
        print(f"chatty: reset with {n_arms} arms")
        print("chatty: a warning on stderr", file=sys.stderr)
        os.write(1, b"chatty: straight to file descriptor 1\n")


def chatty() -> ChattyAgent:
    return ChattyAgent()


class MemoryEater(GreedyAgent):
    """Asks for 8 GiB at its first move (run under ARENA_UNIT_MEMORY_MB, it gets a MemoryError)."""

    def act(self, observation: dict[str, Any]) -> int:
        hoard = bytearray(8 << 30)
        return len(hoard) % 2


def memory_eater() -> MemoryEater:
    return MemoryEater()


class SilentMemoryError(GreedyAgent):
    """Raises MemoryError() with no message, as an allocation in native code does."""

    def act(self, observation: dict[str, Any]) -> int:
        raise MemoryError()


def silent_memory_error() -> SilentMemoryError:
    return SilentMemoryError()


class AlympicsSleeper:
    """The builtin agent, except that its Prisoner's Dilemma moves never come back (it sleeps):
    the unit's time limit must end those match sets, and only those."""

    def reset(self, *, game: str, player: int, seed: int) -> None:
        from workers.games import BUILTIN

        self.game = game
        self.inner = BUILTIN[game]()
        self.inner.reset(game=game, player=player, seed=seed)

    def act(self, observation: dict[str, Any]) -> Any:
        if self.game == "prisoners_dilemma":
            time.sleep(3600)
        return self.inner.act(observation)


def alympics_sleeper() -> AlympicsSleeper:
    return AlympicsSleeper()


class SwallowingSleeper(GreedyAgent):
    """Catches everything it can, BaseException included, and sleeps forever: only a deadline
    enforced from outside its code ends it."""

    def act(self, observation: dict[str, Any]) -> int:
        while True:
            with contextlib.suppress(BaseException):
                time.sleep(3600)


def swallowing_sleeper() -> SwallowingSleeper:
    return SwallowingSleeper()


def unloadable() -> GreedyAgent:
    """A factory that fails, as an agent whose own imports are missing does."""
    raise ImportError("this agent needs a package that is not installed")


class KillsOnce(GreedyAgent):
    """Ends its worker's process the first time any of its units runs (a flag file in
    $ARENA_TEST_KILL_ONCE_DIR), then plays as GreedyAgent: a death by chance."""

    def act(self, observation: dict[str, Any]) -> int:
        flag = os.path.join(os.environ["ARENA_TEST_KILL_ONCE_DIR"], "killed")
        with contextlib.suppress(FileExistsError):
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os._exit(1)
        return super().act(observation)


def kills_once() -> KillsOnce:
    return KillsOnce()
