"""The race page is titled with the label it was asked by. A race is its commits: run again with
--fresh under another label (the same batch), the batch keeps only the latest run's label, and
before (c3f317a) `/ui/races/rr1` was titled "Race rr3" after such a rerun. Real checks (the
example race's repository, examples/make_race_repo.py), real Redis, the in-process API."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml
from fastapi.testclient import TestClient

from tasks.store import Store
from tests.api.picture_batches import run_into
from tests.integration.conftest import ROOT


def title(client: TestClient, ref: str) -> tuple[str, str]:
    page = client.get(f"/ui/races/{ref}")
    assert page.status_code == 200, page.text
    found = re.search(r"<h1>(.*?)</h1>", page.text)
    assert found is not None
    return found.group(1), page.text


def test_a_race_page_keeps_its_own_label_after_a_fresh_rerun(
    client: TestClient, db: Store, tmp_path: Path
) -> None:
    repo = tmp_path / "race-repo"
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "make_race_repo.py"), str(repo)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    spec = yaml.safe_load((ROOT / "examples" / "race.yaml").read_text())
    spec["repo"] = str(repo)
    first = run_into(db, spec, "rr1")
    again = run_into(db, spec, "rr3")  # the same commits: the same batch, run again
    assert again == first
    shown, page = title(client, "rr1")
    assert shown == "Race rr1"
    assert "Last run as rr3 (the same commits checked again)" in page
    shown, page = title(client, "rr3")
    assert shown == "Race rr3" and "Last run as" not in page
    assert title(client, first)[0] == "Race rr3"  # by its id: its latest run's label
