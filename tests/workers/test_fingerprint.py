"""An agent's source fingerprint is the same however its package is reached."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from workers.fingerprint import source_fingerprint


def test_a_namespace_package_reached_twice_is_fingerprinted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`examples/` without an __init__.py, found through the working directory and again
    through another sys.path entry for the same folder (as '' and an editable install give a
    worker): its files count once, so submitter and worker agree on the digest."""
    package = tmp_path / "nspkg" / "agents"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mine.py").write_text("def make():\n    return None\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    once = source_fingerprint("nspkg.agents.mine:make")
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path / "."), *sys.path])
    sys.modules.pop("nspkg", None)
    twice = source_fingerprint("nspkg.agents.mine:make")
    assert twice.digest == once.digest
    assert twice.detail == once.detail == f"2 files of {tmp_path / 'nspkg'}"
