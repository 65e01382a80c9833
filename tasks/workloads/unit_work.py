"""The work inside one unit, bounded: a ceiling on each count a spec sets that multiplies it
(checked at submission, the numbers in the error; ARENA_MAX_UNITS caps how many units), and the
memory a worker process may use while it runs one (tasks/execute.py, unit_memory).

Each figure below was measured on the reference machine (docs/performance.md, "The work in one
unit"); a ceiling admits every example and test spec with room to spare, and a unit at its
ceiling stays far below its workload's memory limit. A stored batch keeps the counts it was
accepted with: the ceilings apply to new submissions only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tasks.validation import InputError
from tasks.workloads.alympics_suites import load_suite

# Alympics. A unit is a match set: one game against one baseline for all of the game's episodes.
# Records are kept per move (~290 bytes), so memory grows with the moves all players make:
# 100,000 episodes of the Prisoner's Dilemma (10M agent moves) peaked at 2.8 GB in a worker.
# 1,000 episodes is 50 × the lite suite's 20 (auction: 50); at it, a match set of the Prisoner's
# Dilemma or the Public Goods game (200,000 moves) takes ~1 s and adds ~60 MB.
ALYMPICS_EPISODES = 1_000
ALYMPICS_MOVES = 200_000  # episodes × rounds × players, all players' moves in one match set
# Bandit. A unit is one episode. Each arm holds its own random stream (~3 KB: 100,000 arms took
# 350 MB), and every built-in strategy looks at each arm on each pull (ucb1 ~0.4 µs, thompson
# ~1.8 µs an arm a pull here): 1,000 × 100,000 pulls of thompson took 175 s. At the ceilings a
# unit takes ~4 s (ucb1) to ~18 s (thompson) and adds under 10 MB. The tests' largest episode is
# 30,000 pulls, the example's 2,000.
BANDIT_PULLS = 1_000_000
BANDIT_ARMS = 1_000
BANDIT_ARM_PULLS = 10_000_000  # pulls × arms
# Mario. A unit is one episode, or under `inference_batch: K` (a checkpoint) the K episodes of
# its lockstep group. Memory does not grow with steps (the action log is a byte a step; an
# emulator ~0.7 MB); time does: ~730 frames/s here. 576,000 frames is 32 × the default episode
# (4,500 steps × frame_skip 4 = 18,000 frames: the largest lockstep group at the default
# protocol), 2 h 40 min of game time, ~13 minutes of emulation.
MARIO_FRAMES = 576_000  # max_steps × frame_skip × inference_batch

# The address space (MiB, RLIMIT_AS) a worker process may use while it runs one unit; a Celery
# pool process is ~155 MB of address space idle, ~300 MB after its threads' first allocations.
# Bandit: 306 MB at its ceilings. Alympics: ~400 MB at its ceilings. Mario: ~300 MB with the
# emulators of all 33 levels; a trusted checkpoint loads torch into the worker (~800 MB of
# address space on 2 cores, more with more threads). Race: the worker waits on commands that set
# their own limits (ARENA_SANDBOX_MEMORY_MB), but git runs under this one and maps its packs.
UNIT_MEMORY_MB: Mapping[str, int] = {"bandit": 1024, "alympics": 2048, "mario": 4096, "race": 4096}
DEFAULT_UNIT_MEMORY_MB = 4096


def memory_limit_mb(workload: str, payload: Mapping[str, Any]) -> int:
    """A unit's address-space limit in a worker process (0: none). No limit for `device: cuda`: the
    CUDA driver reserves tens of GB of address space it never uses, which RLIMIT_AS cannot tell
    from real use (an agent's jail limits its data segment instead)."""
    agent = payload.get("agent")
    if isinstance(agent, Mapping) and agent.get("device") == "cuda":
        return 0
    return UNIT_MEMORY_MB.get(workload, DEFAULT_UNIT_MEMORY_MB)


def check(workload: str, items: list[Any], params: Any) -> None:
    """InputError naming the first count over its ceiling (for a workload that has counts)."""
    if workload == "alympics":
        check_alympics(items, params)
    elif workload == "bandit":
        check_bandit(items, params)
    elif workload == "mario":
        check_mario(params)


def _over(field: str, amount: str, ceiling: int, unit: str, why: str) -> InputError:
    return InputError(f"{field}: {amount} is over the ceiling of {ceiling:,} {unit} ({why})")


def check_alympics(items: list[Any], params: Any) -> None:
    field = "params.episodes" if params.episodes else "params.suite"
    if params.episodes and params.episodes > ALYMPICS_EPISODES:
        why = "a match set plays every episode in one worker process; the lite suite plays 20"
        raise _over(field, f"{params.episodes:,}", ALYMPICS_EPISODES, "episodes per unit", why)
    suite = load_suite(params.suite)
    for item in items:
        game = suite.games[item.name]
        episodes = params.episodes or game.episodes
        moves = episodes * game.rounds * game.players
        if moves > ALYMPICS_MOVES:
            amount = (
                f"{episodes:,} episodes × {game.rounds:,} rounds × {game.players} players of "
                f"{item.name} = {moves:,} moves"
            )
            raise _over(field, amount, ALYMPICS_MOVES, "moves per unit", "fewer episodes")


def check_bandit(items: list[Any], params: Any) -> None:
    if params.pulls > BANDIT_PULLS:
        why = "an episode is one unit, played in one worker process"
        raise _over("params.pulls", f"{params.pulls:,}", BANDIT_PULLS, "pulls per unit", why)
    for index, item in enumerate(items):
        arms = len(item.arms)
        if arms > BANDIT_ARMS:
            why = "each arm keeps its own random stream in the worker"
            raise _over(f"items[{index}].arms", f"{arms:,} arms", BANDIT_ARMS, "per bandit", why)
        if params.pulls * arms > BANDIT_ARM_PULLS:
            product = params.pulls * arms
            amount = f"{params.pulls:,} pulls × {arms:,} arms of items[{index}] = {product:,}"
            why = "strategies look at every arm on every pull: fewer pulls or arms"
            raise _over("params.pulls", amount, BANDIT_ARM_PULLS, "arm-pulls per unit", why)


def check_mario(params: Any) -> None:
    frames = params.max_steps * params.frame_skip * params.inference_batch
    if frames > MARIO_FRAMES:
        amount = f"{params.max_steps:,} steps × frame_skip {params.frame_skip}"
        if params.inference_batch > 1:
            amount += f" × inference_batch {params.inference_batch}"
        why = "2 h 40 min of game time, ~13 minutes of emulation in one worker process"
        raise _over(
            "params.max_steps",
            f"{amount} = {frames:,} frames",
            MARIO_FRAMES,
            "frames per unit",
            why,
        )
