"""A Mario agent packaged as a Docker image plays a batch through the real cluster path
(`arena run` on the embedded default), with no network, and lands on the leaderboard with the
stats the same code earns in-process; its fingerprint is the image's content id."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tasks.execute import execute_unit
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch
from tests.docker_support import DOCKER_GROUP, require_current_worker_image
from tests.integration.conftest import arena
from tests.integration.test_mario import embedded_env
from tests.workers.test_agent_image import agent_containers, build_agent_image, serve
from workers.sandbox.containers import LABEL_KIND, LABEL_PID

pytestmark = [pytest.mark.integration, DOCKER_GROUP]

# Plays from the pixels and the info, so a frame garbled on the way would change the episode.
PIXELS = """
class PixelAgent:
    def reset(self, *, seed, **context):
        self.size, self.steps = len(context["actions"]), 0

    def act(self, observation):
        self.steps += 1
        frame, info = observation["frame"], observation["info"]
        value = int(frame[::16, ::16].sum()) + info["x_pos"] + self.steps // 8 + OFFSET
        return value % self.size


def make():
    return PixelAgent()
"""


@pytest.fixture
def agent_image(docker_engine: Any, tmp_path: Path) -> Iterator[Any]:
    """Builds `pixels:make` as an image (offset 0, or another for a changed agent); removes
    every image it built at the end."""
    require_current_worker_image()
    built: list[str] = []

    def build(offset: int) -> Any:
        tag = f"arena-it-agent-{uuid.uuid4().hex[:8]}:v{offset}"
        files = {"pixels.py": PIXELS.replace("OFFSET", str(offset))}
        image = build_agent_image(
            docker_engine, tmp_path / f"image-{offset}", files, serve("pixels:make"), tag
        )
        built.append(image.id)
        return image, tag

    yield build
    for image_id in built:
        docker_engine.images.remove(image_id, force=True)


def test_an_image_agent_plays_a_batch_and_lands_on_the_leaderboard(
    tmp_path: Path, agent_image: Any, docker_engine: Any, monkeypatch: pytest.MonkeyPatch
):
    image, tag = agent_image(0)
    (tmp_path / "pixels.py").write_text(PIXELS.replace("OFFSET", "0"))  # the same code, native
    spec = {
        "workload": "mario",
        "agents": [
            {"name": "boxed", "image": tag},
            {"name": "native", "entry_point": "pixels:make"},
            "right",
        ],
        "items": ["1-1"],
        "protocol": {"episodes": 2, "seed": 3},
        "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 150},
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    env = embedded_env(tmp_path / "data")  # DOCKER_HOST, if set, goes to the workers too
    before = agent_containers(docker_engine)
    ran = arena("run", str(path), "--json", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["counts"] == {"total": 6, "completed": 6, "errors": 0}
    rows = report["results"]["mario-1-1"]
    # The emulator is deterministic and the agent ignores its seed: in a container or in
    # process, the same code plays the same episodes.
    assert rows["boxed"]["stats"] == rows["native"]["stats"]
    assert rows["boxed"]["stats"]["avg_steps"] > 20  # it played, not one step and out
    fingerprint = report["versions"]["agents"]["boxed"]
    assert (fingerprint["kind"], fingerprint["digest"]) == ("image", image.id)
    board = arena("leaderboard", "mario-1-1", "--json", env=env, cwd=tmp_path)
    assert {e["agent"] for e in json.loads(board.stdout)["entries"]} == {"boxed", "native", "right"}
    assert not leaked_agents(docker_engine, before)

    # Other code under the same tag is another agent: a new batch, never a resume.
    monkeypatch.chdir(tmp_path)  # where the native entry point is found
    submitted = validate_batch(spec)
    assert submitted.batch_id == report["batch_id"]  # nothing changed: the same batch
    changed, _ = agent_image(1)
    docker_engine.images.get(changed.id).tag(*tag.split(":"))  # the tag moves to it
    again = validate_batch(spec)
    assert again.identity.agents["boxed"].digest == changed.id != image.id
    assert again.batch_id != report["batch_id"]
    # A unit of the batch submitted before still runs the image submitted, not the tag's.
    workload = get_workload("mario")
    units = {(u.agent, u.episode): u for u in workload.expand(submitted)}
    boxed, native = (execute_unit(workload, units[a, 0]).result for a in ("boxed", "native"))
    assert boxed.status == "ok" and boxed.result["actions"] == native.result["actions"]


def test_an_image_the_engine_lacks_is_refused_with_exit_2(tmp_path: Path, docker_engine: Any):
    spec = {
        "workload": "mario",
        "agents": [{"name": "ghost", "image": "arena-no-such:1"}],
        "items": ["1-1"],
        "protocol": {"episodes": 1},
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    env = embedded_env(tmp_path / "data")  # DOCKER_HOST, if set, goes to the workers too
    ran = arena("run", str(path), env=env, cwd=tmp_path)
    assert ran.returncode == 2
    assert "agents[0].image" in ran.stderr and "arena-no-such:1" in ran.stderr
    with pytest.raises(InputError, match="no image 'arena-no-such:1'"):
        validate_batch(spec)


def leaked_agents(client: Any, before: set[str]) -> list[str]:
    """Agent containers new since `before` whose owner process is gone (the embedded workers
    have stopped; other tests' live processes own theirs)."""
    found = client.containers.list(all=True, filters={"label": f"{LABEL_KIND}=agent"})
    return [c.name for c in found if c.name not in before and not _alive(c.labels)]


def _alive(labels: dict[str, str]) -> bool:
    try:
        os.kill(int(labels.get(LABEL_PID, "0")), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True
