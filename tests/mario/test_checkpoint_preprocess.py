"""A checkpoint's preprocessing is read from its own observation space at submission
(tasks/checkpoint_space.py; issue 35, item 4): left out of the spec it is filled in, declared
against the checkpoint it is refused in one line (CLI exit 2, API 422), nothing stored.

On c3f317a a spec had to declare the preprocessing (defaults: grayscale, 84, 4 frames); a
checkpoint trained on other frames was accepted, every episode failed at evaluation ("expects
observations of shape (2, 48, 48)") and the agent still got a board row with score 0."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")

from fastapi.testclient import TestClient

from tasks.checkpoint_space import ObservedSpace, checkpoint_preprocess, observation_space
from tasks.store import Store
from tasks.validation import InputError
from tasks.workloads import validate_batch
from tasks.workloads.mario_spec import Preprocess
from tests.api.conftest import AUTH, api_settings, client  # noqa: F401 (fixtures)
from tests.integration.conftest import ROOT, arena, db, redis_url  # noqa: F401 (fixtures)
from tests.mario.sb3_models import build_checkpoint


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Trained on 48x48 grayscale frames, two stacked: observes (2, 48, 48)."""
    return build_checkpoint(tmp_path_factory.mktemp("sb3") / "small", resize=48, frame_stack=2)


def spec_of(path: Path, preprocess: dict[str, Any] | None = None) -> dict[str, Any]:
    agent: dict[str, Any] = {"name": "small", "sb3": str(path)}
    if preprocess is not None:
        agent["preprocess"] = preprocess
    return {"workload": "mario", "agents": [agent], "items": ["1-1"], "protocol": {"episodes": 1}}


def test_the_space_is_read_without_unpickling(small: Path) -> None:
    assert observation_space(small) == ObservedSpace("Box", (2, 48, 48), "uint8")
    assert observation_space(small.with_name("missing.zip")) is None


def test_left_out_the_preprocessing_is_the_checkpoints(small: Path) -> None:
    batch = validate_batch(spec_of(small), asker="operator")
    assert batch.agents[0].preprocess == Preprocess(grayscale=True, resize=48, frame_stack=2)
    partly = validate_batch(spec_of(small, {"resize": 48}), asker="operator")
    assert partly.agents[0].preprocess == batch.agents[0].preprocess


def test_a_contradicting_preprocessing_is_one_line_at_the_cli(small: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(spec_of(small, {"resize": 84, "frame_stack": 4})))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env |= {"ARENA_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    ran = arena("run", str(spec), env=env, timeout=120)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    error = ran.stderr.strip()
    assert len(error.splitlines()) == 1, error
    assert "agents[0].preprocess: resize 84, frame_stack 4" in error
    assert "(2, 48, 48) (grayscale true, resize 48, frame_stack 2)" in error
    assert not (tmp_path / "data" / "host.json").exists()  # no cluster started, nothing ran


def test_a_contradicting_preprocessing_is_a_422_and_nothing_is_stored(
    small: Path,
    client: TestClient,  # noqa: F811 (the fixture)
    db: Store,  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARENA_CHECKPOINT_ROOTS", str(small.parent))
    answer = client.post("/batches", json=spec_of(small, {"grayscale": False}), headers=AUTH)
    assert answer.status_code == 422, answer.text
    assert "agents[0].preprocess: grayscale false" in answer.text
    assert db.r.keys("*batch*") == []
    accepted = client.post("/batches", json=spec_of(small), headers=AUTH)
    assert accepted.status_code in (200, 201, 202), accepted.text
    assert db.r.keys("*batch*") != []  # what an accepted one stores


def test_colour_or_grayscale_is_asked_for_when_the_shape_allows_both(tmp_path: Path) -> None:
    colour = build_checkpoint(tmp_path / "colour", resize=48, frame_stack=1, grayscale=False)
    with pytest.raises(InputError, match=r"grayscale true, resize 48, frame_stack 3 or "):
        validate_batch(spec_of(colour), asker="operator")
    batch = validate_batch(spec_of(colour, {"grayscale": False}), asker="operator")
    assert batch.agents[0].preprocess == Preprocess(grayscale=False, resize=48, frame_stack=1)


def test_a_space_that_is_no_mario_frames_is_refused() -> None:
    vector = ObservedSpace("Box", (4,), "float32")
    with pytest.raises(InputError, match=r"^agents\[0\]\.sb3: 'm.zip' observes Box \(4,\) float32"):
        checkpoint_preprocess(None, vector, "agents[0]", "m.zip")


def test_a_crafted_space_is_refused_in_a_short_line(small: Path, tmp_path: Path) -> None:
    """A checkpoint whose `data` claims a space of a million dimensions, a class name and a
    dtype of a megabyte each: refused in one short line (the API quotes it back to its sender),
    nothing of it unpickled."""
    with zipfile.ZipFile(small) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"])
    data["observation_space"] = {
        ":type:": "<class '" + "x" * (1 << 20) + "'>",
        ":serialized:": "not a pickle",
        "_shape": [1] * 1_000_000,
        "dtype": "u" * (1 << 20),
    }
    members["data"] = json.dumps(data).encode()
    crafted = tmp_path / "crafted.zip"
    with zipfile.ZipFile(crafted, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    with pytest.raises(InputError) as refused:
        validate_batch(spec_of(crafted), asker="operator")
    line = str(refused.value)
    assert "\n" not in line and len(line) < 400, line[:400]
    assert "of 1000000 dimensions" in line
