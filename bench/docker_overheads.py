"""What Docker costs Arena, measured side by side in one run on one engine (DOCKER_HOST):

1. a race command: the bare command, through the local sandbox, through the Docker sandbox
   (`run`: a session of one command, its own container: create, start, exec, remove);
2. a race check's three commands (build, tests, lint; `true` each, so that only the sandbox's
   cost shows): bare, through a local sandbox session, through a Docker sandbox session (one
   container for the check, each command `exec`ed in it), with the Docker session's parts;
3. a Mario agent: steps/s of the same agent in the worker's process and as an image (its own
   container, the contract over a unix socket), alternating episodes on World 1-1.

Needs the engine and arena-worker-cpu:latest (scripts/build-images). About a minute on 2 cores;
`--episodes 0` leaves out the agent part.
    .venv/bin/python bench/docker_overheads.py [--commands 20] [--checks 20] [--episodes 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from workers.agent_image import image_agent
from workers.mario.protocol import MarioProtocol
from workers.mario.runner import run_episode
from workers.sandbox.containers import docker_client
from workers.sandbox.docker import DockerSandbox
from workers.sandbox.local import LocalSandbox

IMAGE = "arena-worker-cpu:latest"
CHECK = ("true", "true", "true")  # a check's build, tests and lint: the sandbox's cost alone
AGENT = """
class PixelAgent:  # reads the frame and the info every step, as a real agent would
    def reset(self, *, seed, **context):
        self.size, self.steps = len(context["actions"]), 0

    def act(self, observation):
        self.steps += 1
        frame, info = observation["frame"], observation["info"]
        return (int(frame[::16, ::16].sum()) + info["x_pos"] + self.steps // 8) % self.size


def make():
    return PixelAgent()
"""


def command_overheads(count: int, folder: Path) -> None:
    def bare() -> None:
        subprocess.run(["sh", "-c", "true"], check=True)

    local, docker = LocalSandbox(), DockerSandbox(IMAGE)
    runs = {
        "bare sh -c true": bare,
        "local sandbox": lambda: local.run("true", folder, 30),
        "docker sandbox": lambda: docker.run("true", folder, 30),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(count):  # alternated, so load from elsewhere falls on all three alike
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(t) for name, t in times.items()}
    print(f"race command `true`, medians of {count}:")
    for name, median in medians.items():
        print(f"  {name:16} {median * 1000:8.1f} ms")
    extra = medians["docker sandbox"] - medians["local sandbox"]
    print(f"  docker over local: +{extra * 1000:.1f} ms a command (its own container)")


def check_overheads(count: int, folder: Path) -> None:
    """A check's three commands, as run_check runs them: in one session of the sandbox."""
    parts: dict[str, list[float]] = {"first": [], "next": [], "close": []}

    def bare() -> None:
        for command in CHECK:
            subprocess.run(["sh", "-c", command], check=True)

    def local_check() -> None:
        with local.session(folder, budget_s=90) as session:
            for command in CHECK:
                session.run(command, 30)

    def docker_check() -> None:
        mark = time.perf_counter()
        session = docker.session(folder, budget_s=90)
        try:
            for index, command in enumerate(CHECK):
                done = session.run(command, 30)
                assert done.exit_code == 0, done
                now = time.perf_counter()
                parts["first" if index == 0 else "next"].append(now - mark)
                mark = now
        finally:
            session.close()
            parts["close"].append(time.perf_counter() - mark)

    local, docker = LocalSandbox(), DockerSandbox(IMAGE)
    runs: dict[str, Callable[[], None]] = {
        "bare sh -c": bare,
        "local sandbox": local_check,
        "docker sandbox": docker_check,
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(count):  # alternated, as above
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(t) for name, t in times.items()}
    first, after, close = (statistics.median(parts[p]) * 1000 for p in ("first", "next", "close"))
    print(f"race check of {len(CHECK)} commands (`true` each), one session, medians of {count}:")
    for name, median in medians.items():
        print(f"  {name:16} {median * 1000:8.1f} ms")
    print(
        f"  docker session's parts: first command {first:.1f} ms (create, start, exec), "
        f"each next {after:.1f} ms (exec), close {close:.1f} ms (remove)"
    )
    docker_s = medians["docker sandbox"]
    print(
        f"  docker overhead a check: +{(docker_s - medians['bare sh -c']) * 1000:.0f} ms over "
        f"bare, +{(docker_s - medians['local sandbox']) * 1000:.0f} ms over local "
        "(issue 13's target: at most 500 ms)"
    )


def agent_overheads(episodes: int, folder: Path) -> None:
    (folder / "pixels.py").write_text(AGENT)
    (folder / "Dockerfile").write_text(
        f"FROM {IMAGE}\nCOPY pixels.py /home/arena/pixels.py\n"
        'CMD ["python", "-m", "workers.agent_server", "pixels:make", '
        '"--socket", "/run/arena/agent.sock"]\n'
    )
    client = docker_client()
    tag = f"arena-bench-agent-{uuid.uuid4().hex[:8]}:v0"
    image, _ = client.images.build(path=str(folder), tag=tag, rm=True, network_mode="none")
    sys.path.insert(0, str(folder))
    import pixels  # type: ignore[import-not-found]

    try:
        for skip, max_steps in ((4, 400), (1, 1200)):
            protocol = MarioProtocol(frame_skip=skip, max_steps=max_steps)
            rates: dict[str, list[float]] = {"in process": [], "image": []}
            with image_agent(image.id) as boxed:
                for episode in range(episodes):
                    for name, agent in (("in process", pixels.make()), ("image", boxed)):
                        started = time.perf_counter()
                        out = run_episode("1-1", agent, protocol, env_seed=episode, agent_seed=0)
                        rates[name].append(out.steps / (time.perf_counter() - started))
            native, boxed_rate = (statistics.median(rates[n]) for n in ("in process", "image"))
            print(
                f"Mario agent, frame_skip {skip} ({out.steps} steps), medians of {episodes}: "
                f"in process {native:.0f} steps/s, image {boxed_rate:.0f} steps/s, "
                f"ratio {boxed_rate / native:.2f}, "
                f"+{(1 / boxed_rate - 1 / native) * 1000:.2f} ms a step"
            )
    finally:
        client.images.remove(image.id, force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=20)
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as folder:
        (Path(folder) / "work").mkdir()
        if args.commands:
            command_overheads(args.commands, Path(folder) / "work")
        if args.checks:
            check_overheads(args.checks, Path(folder) / "work")
        if args.episodes:
            (Path(folder) / "agent").mkdir()
            agent_overheads(args.episodes, Path(folder) / "agent")


if __name__ == "__main__":
    main()
