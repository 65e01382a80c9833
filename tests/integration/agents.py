"""Agents given to workers as entry points (tests.integration.agents:NAME) to exercise faults."""

from __future__ import annotations

import os
import time

from workers.bandit import GreedyAgent


class CrashingAgent(GreedyAgent):
    def act(self) -> int:
        if self.t == 10:
            raise RuntimeError("agent bug at pull 10")
        return super().act()


class SleepyAgent(GreedyAgent):
    def act(self) -> int:
        time.sleep(3600)
        return 0


class ExitingAgent(GreedyAgent):
    def act(self) -> int:
        raise SystemExit(3)


class BadArmAgent(GreedyAgent):
    def act(self) -> int:
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

    def act(self) -> int:
        os._exit(1)


def process_killer() -> ProcessKiller:
    return ProcessKiller()
