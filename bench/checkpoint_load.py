"""What loading a checkpoint once per process saves a worker (issue 25): the load against an
episode and a step, and K episodes of one checkpoint with the cache and without, side by side.

Run from the repository root:
    .venv/bin/python bench/checkpoint_load.py [--checkpoint PATH] [--device cpu|cuda]
        [--loads N] [--episodes K] [--repeat R] [--max-steps S] [--level L]

Without --checkpoint an untrained PPO CnnPolicy (84x84 grayscale, 4 frames: NatureCNN, the
architecture of a typical Mario PPO) is built on the spot; a trained one loads in the same time.

1. load: N loads of the file with `cache=False` (read, unpickle, policy built, weights moved to
   the device, spaces checked) against N calls that find it in the cache (the file's stat, a
   new CheckpointAgent); the median of each, in ms.
2. a worker: K episodes of the checkpoint as a worker process runs K units (a load, then
   `run_episode`, per unit), with the cache (one load, K-1 hits) and without (K loads),
   alternated R times in the same run; episodes/s of each, the median of paired ratios, the
   step's and the episode's cost, and a check that both arms played the same actions. The
   ratio the medians of 1. predict is printed beside it (on a busy machine it is the steadier).
3. sandboxed (where a bubblewrap jail starts, as the cluster runs untrusted checkpoints): K
   units through the agent sandbox, whose warm process serves each; the `make` of the first
   unit (the process started, torch imported, the file loaded) and of the next (a cache hit).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from workers.mario.checkpoints import CACHE
from workers.mario.protocol import MarioProtocol, action_names
from workers.mario.runner import run_episode
from workers.mario.sb3 import load_checkpoint_agent


class Timed:
    """The agent, with the time spent in `act` (preprocessing and the policy) added up."""

    def __init__(self, agent: Any) -> None:
        self.agent, self.act_s, self.acts = agent, 0.0, 0

    def reset(self, **context: Any) -> None:
        self.agent.reset(**context)

    def act(self, observation: Any) -> int:
        started = time.perf_counter()
        action = int(self.agent.act(observation))
        self.act_s += time.perf_counter() - started
        self.acts += 1
        return action


def ms(seconds: list[float]) -> float:
    return 1000 * statistics.median(seconds)


def worker(args: argparse.Namespace, path: str, cache: bool) -> tuple[float, list[Any], Timed]:
    """K units of one checkpoint in a fresh worker process (an empty cache): wall s, outcomes."""
    CACHE.clear()
    outcomes, timed = [], Timed(None)
    protocol = MarioProtocol(max_steps=args.max_steps)
    started = time.perf_counter()
    for k in range(args.episodes):
        timed.agent = load(args, path, cache)
        outcomes.append(run_episode(args.level, timed, protocol, env_seed=k, agent_seed=k))
    return time.perf_counter() - started, outcomes, timed


def load(args: argparse.Namespace, path: str, cache: bool) -> Any:
    return load_checkpoint_agent(
        path, grayscale=True, resize=84, frame_stack=4, device=args.device, cache=cache
    )


def sandboxed(args: argparse.Namespace, path: str) -> tuple[float, list[float]] | None:
    """(first make s, the next makes' s) through the agent sandbox; None where no jail starts."""
    from workers.sandbox import bwrap
    from workers.sandbox.agent_sandbox import POOL, AgentLimits, AgentSource, untrusted_agent

    why = bwrap.probe()
    if why is not None:
        print(f"sandboxed: skipped, no bubblewrap jail starts here ({why})")
        return None
    source = AgentSource(checkpoint=path, device=args.device)
    limits = AgentLimits(data_dir=Path(tempfile.mkdtemp()))
    makes = []
    for k in range(args.episodes):
        started = time.perf_counter()
        with untrusted_agent(source, None, limits, step_timeout_s=60) as agent:
            makes.append(time.perf_counter() - started)
            agent.reset(seed=k, actions=action_names("right_only"))
    POOL.clear()
    return makes[0], makes[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--loads", type=int, default=15)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--level", default="1-1")
    args = parser.parse_args()
    import torch

    path = args.checkpoint
    if path is None:
        from tests.mario.sb3_models import build_checkpoint

        path = build_checkpoint(Path(tempfile.mkdtemp()) / "ppo", seed=1)
    path = str(path)
    load(args, path, cache=False)  # warm-up: imports, the first load's one-off costs
    run_episode(args.level, load(args, path, cache=False), MarioProtocol(max_steps=5), 0, 0)

    cold, hit = [], []
    CACHE.clear()
    load(args, path, cache=True)
    for _ in range(args.loads):
        started = time.perf_counter()
        load(args, path, cache=False)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        load(args, path, cache=True)
        hit.append(time.perf_counter() - started)

    rates: dict[bool, list[float]] = {True: [], False: []}
    steps, act_s, episode_s = 0, 0.0, []
    for index in range(args.repeat):
        played = {}
        for cache in (False, True) if index % 2 == 0 else (True, False):
            wall_s, outcomes, timed = worker(args, path, cache)
            rates[cache].append(args.episodes / wall_s)
            played[cache] = [o.model_dump(exclude={"wall_s"}) for o in outcomes]
            steps += sum(o.steps for o in outcomes)
            act_s += timed.act_s
            episode_s += [o.wall_s for o in outcomes]
        assert played[True] == played[False], "the cache changed an episode"
        print(
            f"repeat {index + 1}: without cache {rates[False][-1]:.3f} episodes/s   "
            f"with cache {rates[True][-1]:.3f} episodes/s   "
            f"ratio {rates[True][-1] / rates[False][-1]:.3f}",
            flush=True,
        )
    step_ms = 1000 * sum(episode_s) / steps
    ratios = [c / n for c, n in zip(rates[True], rates[False], strict=True)]
    print(
        f"\n{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__} "
        f"(torch threads: {torch.get_num_threads()}), device {args.device}; "
        f"{Path(path).stat().st_size:,} byte checkpoint; {args.level}, max_steps "
        f"{args.max_steps}, {args.episodes} episodes "
        f"per worker, {args.repeat} repeats"
    )
    print(f"load (cache=False)      median {ms(cold):8.2f} ms   of {args.loads}")
    print(f"load (cache hit)        median {ms(hit):8.2f} ms")
    print(
        f"step                    mean   {step_ms:8.2f} ms   (policy and preprocessing "
        f"{1000 * act_s / steps:.2f} ms of it); the load = {ms(cold) / step_ms:.0f} steps"
    )
    print(
        f"episode                 median {ms(episode_s):8.1f} ms   ({steps / len(episode_s):.0f} "
        f"steps on average); the load = {ms(cold) / ms(episode_s):.1%} of it"
    )
    print(
        f"worker, {args.episodes} episodes: without cache median "
        f"{statistics.median(rates[False]):.3f} episodes/s, with cache "
        f"{statistics.median(rates[True]):.3f} episodes/s; median of paired ratios "
        f"{statistics.median(ratios):.3f}; same actions in both: yes"
    )
    expected = (ms(episode_s) + ms(cold)) / (ms(episode_s) + ms(cold) / args.episodes)
    print(
        f"expected from the medians: (episode + load) / (episode + load / {args.episodes}) = "
        f"{expected:.3f}"
    )
    jailed = sandboxed(args, path)
    if jailed is not None:
        first, rest = jailed
        print(
            f"sandboxed make: first unit {1000 * first:.0f} ms (the jail started, torch "
            f"imported, the file loaded); next {len(rest)} units median {ms(rest):.2f} ms "
            "(the warm process's cache)"
        )


if __name__ == "__main__":
    main()
