"""The agent's module compiled once by the jail's fork server (workers/agent_precompile.py):
compiled without running, served to an import only for the very bytes it was compiled from, and
never blocked by what is not a regular file."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from pathlib import Path

import pytest

from workers import agent_precompile


@pytest.fixture
def agent_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path, with the loader installed for this test only."""
    monkeypatch.setattr(sys, "path_hooks", list(sys.path_hooks))
    monkeypatch.setattr(sys, "path_importer_cache", {})
    monkeypatch.setattr(agent_precompile, "COMPILED", {})
    monkeypatch.syspath_prepend(str(tmp_path))
    agent_precompile.install()
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("pre_agent")]:
        del sys.modules[name]


def test_a_module_is_compiled_without_running_and_its_code_served_to_each_import(
    agent_folder: Path,
):
    package = agent_folder / "pre_agent"
    package.mkdir()
    (package / "__init__.py").write_text("RAN = []\n")
    (package / "play.py").write_text("import pre_agent\npre_agent.RAN.append(1)\nVALUE = 41 + 1\n")
    assert agent_precompile.precompile("pre_agent.play") == 2
    assert "pre_agent" not in sys.modules  # compiled, nothing run
    code = agent_precompile.COMPILED[str(package / "play.py")][1]
    for _ in range(2):  # imported afresh, as each unit child does
        for name in ("pre_agent.play", "pre_agent"):
            sys.modules.pop(name, None)
        module = importlib.import_module("pre_agent.play")
        assert module.VALUE == 42 and sys.modules["pre_agent"].RAN == [1]
        assert module.__spec__.loader.get_code("pre_agent.play") is code


def test_changed_bytes_are_compiled_anew(agent_folder: Path):
    (agent_folder / "pre_agent_changed.py").write_text("VALUE = 1\n")
    assert agent_precompile.precompile("pre_agent_changed") == 1
    (agent_folder / "pre_agent_changed.py").write_text("VALUE = 2\n")
    assert importlib.import_module("pre_agent_changed").VALUE == 2
    sys.modules.pop("pre_agent_changed")


def test_what_is_not_a_regular_file_or_not_found_is_left_to_the_import(agent_folder: Path):
    os.mkfifo(agent_folder / "pre_agent_fifo.py")
    done = threading.Event()

    def compile_it() -> None:
        agent_precompile.precompile("pre_agent_fifo")
        done.set()

    threading.Thread(target=compile_it, daemon=True).start()
    assert done.wait(5), "precompiling a FIFO blocked the fork server"
    assert agent_precompile.COMPILED == {}
    assert agent_precompile.precompile("pre_agent_missing.sub") == 0
    (agent_folder / "pre_agent_broken.py").write_text("def (:\n")
    assert agent_precompile.precompile("pre_agent_broken") == 0  # the import says why
