"""A run's identity and provenance: a changed agent is new work, an unchanged one resumes, the
report says what produced every number, and what agents print is kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from arena.service.reports import report_schema
from tests.integration.conftest import ROOT, arena, bandit_spec, wait_finished

pytestmark = pytest.mark.integration

AGENT_SOURCE = '''"""A bandit agent that always pulls one arm."""


class Fixed:
    def reset(self, *, seed, n_arms):
        pass

    def act(self, observation):
        return {arm}


def make():
    return Fixed()
'''


def write_agent(folder: Path, arm: int) -> None:
    package = folder / "myagents"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "fixed.py").write_text(AGENT_SOURCE.format(arm=arm))


def fixed_arm_spec() -> dict:
    return bandit_spec(
        leaderboard="mine",
        agents=[{"name": "fixed", "entry_point": "myagents.fixed:make"}],
        items=[{"name": "two", "arms": [0.1, 0.9]}],
        protocol={"episodes": 3, "seed": 2, "unit_time_limit_s": 60},
        params={"pulls": 400},
    )


def embedded_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env.pop("PYTHONPATH", None)  # the agent is found in the working directory, by the rule
    return {**env, "ARENA_DATA_DIR": str(data_dir), "ARENA_WORKERS": "1"}


def run_json(spec_path: Path, env: dict[str, str], cwd: Path, *flags: str) -> dict:
    result = arena("run", str(spec_path), "--json", *flags, env=env, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_changed_agent_is_new_work_and_an_unchanged_one_resumes(tmp_path: Path):
    write_agent(tmp_path, arm=0)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(fixed_arm_spec()))
    env = embedded_env(tmp_path / "data")
    first = run_json(spec, env, tmp_path)
    assert first["submission"]["enqueued"] == 3
    assert first["results"]["mine"]["fixed"]["stats"]["best_arm_rate"] == 0.0
    again = run_json(spec, env, tmp_path)
    assert again["batch_id"] == first["batch_id"]
    assert (again["submission"]["enqueued"], again["submission"]["reused"]) == (0, 3)
    write_agent(tmp_path, arm=1)  # the agent changed: its old results must not come back
    changed = run_json(spec, env, tmp_path)
    assert changed["batch_id"] != first["batch_id"]
    assert changed["submission"]["enqueued"] == 3
    assert changed["results"]["mine"]["fixed"]["stats"]["best_arm_rate"] == 1.0
    fingerprints = {run["versions"]["agents"]["fixed"]["digest"] for run in (first, changed)}
    assert len(fingerprints) == 2


def test_long_lived_workers_run_the_new_code_of_a_changed_agent(
    tmp_path: Path, cluster_env, db, workers, write_spec
):
    """A worker that imported the agent keeps it in memory: the fingerprint makes it reload."""
    write_agent(tmp_path, arm=0)
    env = {**cluster_env, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    workers.start(env, concurrency=1)
    spec = write_spec(fixed_arm_spec())
    boards = []
    for arm in (0, 1, 0):
        write_agent(tmp_path, arm=arm)
        submitted = arena("submit", str(spec), env=env)
        assert submitted.returncode == 0, submitted.stderr
        batch_id = submitted.stdout.strip()
        assert wait_finished(db, batch_id, timeout=120) == "done"
        boards.append(db.leaderboard("mine")[0].stats["best_arm_rate"])
    assert boards == [0.0, 1.0, 0.0]
    assert len(db.history("mine", "fixed")) == 2  # the third submission resumed the first


def test_the_report_validates_against_the_published_schema_and_carries_provenance(
    tmp_path: Path,
):
    spec = tmp_path / "spec.json"
    chatty = {"name": "chatty", "entry_point": "tests.integration.agents:chatty"}
    spec.write_text(
        json.dumps(bandit_spec(agents=["ucb1", chatty], protocol={"episodes": 2, "seed": 4}))
    )
    env = {**embedded_env(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    out = tmp_path / "reports"
    ran = arena("run", str(spec), "--output-path", str(out), "--run-id", "nightly-1", env=env)
    assert ran.returncode == 0, ran.stderr
    (report_file,) = out.glob("arena-*.json")
    report = json.loads(report_file.read_text())
    published = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    jsonschema.validate(report, published)
    assert published == report_schema()
    versions = report["versions"]
    assert versions["arena_version"] and versions["engine"] and versions["run_id"] == "nightly-1"
    assert versions["submitted_at"].endswith("Z") and versions["finished_at"].endswith("Z")
    assert versions["hosts"] and versions["agents"]["chatty"]["kind"] == "source"
    assert versions["agents"]["ucb1"]["kind"] == "builtin"
    assert report["counts"] == {"total": 8, "completed": 8, "errors": 0}
    assert {u["host"] for u in report["units"]} == set(versions["hosts"])
    assert all(u["started_at"] <= u["finished_at"] for u in report["units"])
    # What the agent printed: a tail with each unit, the whole in the per-batch log folder,
    # and `arena logs` (by run id) shows it.
    chatty_units = [u for u in report["units"] if u["agent"] == "chatty"]
    assert all("straight to file descriptor 1" in u["log_tail"] for u in chatty_units)
    logs = sorted(Path(report["log_dir"]).glob("chatty/*.log"))
    assert len(logs) == 4 and "a warning on stderr" in logs[0].read_text()
    shown = arena("logs", "nightly-1", "chatty", env=env)
    assert shown.returncode == 0 and shown.stdout.count("chatty: reset with 3 arms") == 2
    # Leaderboard rows carry the provenance of the evaluation behind them.
    board = arena("leaderboard", "it", "--json", env=env)
    row = next(e for e in json.loads(board.stdout)["entries"] if e["agent"] == "chatty")
    assert row["provenance"]["fingerprint"] == versions["agents"]["chatty"]
    assert row["provenance"]["protocol_fingerprint"] == versions["protocol_fingerprint"]


def test_arena_run_and_game_benchmark_share_one_board(tmp_path: Path):
    env = embedded_env(tmp_path / "data")
    ran = arena("run", str(ROOT / "examples" / "alympics.yaml"), "--json", env=env)
    assert ran.returncode == 0, ran.stderr
    bench = arena("game", "benchmark", "--cluster", "--output", "json", env=env)
    assert bench.returncode == 0, bench.stderr
    assert json.loads(bench.stdout)["composite_score"] == pytest.approx(
        json.loads(ran.stdout)["results"]["alympics"]["builtin"]["score"]
    )
    board = json.loads(arena("leaderboard", "alympics", "--json", env=env).stdout)
    assert [e["agent"] for e in board["entries"]] == ["builtin"]
