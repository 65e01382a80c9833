"""Hostile specs (issue 19, findings 1, 5 and 6): a spec names only what the operator allows.

Every attack goes through a real front door: the HTTP API (its test client on a real Redis),
the CLI (arena.cli.main.main in-process, as tests/cli/test_malformed_input.py runs it, with Redis
pointing where nothing listens, so a spec that got past validation would end "cannot reach
Redis"), the schedules `arena beat` fires, and a worker running a stored unit. Repositories are
real git repositories in temporary folders. Each refusal must be a 4xx (API) or exit 2 with one
line (CLI) naming the field, run nothing (the shell payloads write a marker file that must not
appear) and store nothing (Redis byte for byte as before).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from tasks.execute import execute_batch
from tasks.provenance import finished_provenance, provenance_of
from tasks.schedules import parse_entry
from tasks.store import Store
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch
from tests.api.conftest import AUTH
from tests.cli.test_malformed_input import arena
from tests.race.projects import git, make_feature_repo
from workers.race import git as race_git

pytestmark = pytest.mark.integration
NO_REDIS = "redis://127.0.0.1:1/0"
UNREACHABLE = "cannot reach Redis"


# -- the world: allowed roots, a repository inside, one outside, and a marker ------------------


class World:
    """tmp/roots/repo (a repository Arena may read), tmp/roots/plain (a folder, not a
    repository), tmp/roots/link (a link to a repository outside the roots), tmp/elsewhere/repo
    (a repository outside them), and the marker file a payload would write."""

    def __init__(self, tmp: Path) -> None:
        self.roots = tmp / "roots"
        self.repo = make_repo(self.roots / "repo")
        self.outside = make_repo(tmp / "elsewhere" / "repo")
        self.plain = self.roots / "plain"
        self.plain.mkdir()
        (self.plain / "README").write_text("not a repository\n")
        self.link = self.roots / "link"
        self.link.symlink_to(self.outside)
        self.marker = tmp / "pwned"

    def payloads(self) -> dict[str, str]:
        """Every repository value a hostile token holder tries (finding 1 and 6)."""
        m = self.marker
        return {
            "upload-pack option": f"--upload-pack=:;(id;env)>{m};:",
            "ext helper": f"ext::sh -c touch% {m}",
            "fd helper": "fd::0",
            "file URL of /etc": "file:///etc",
            "file URL outside the roots": f"file://{self.outside}",
            "ssh URL": "ssh://git@127.0.0.1:22/srv/repo.git",
            "ssh URL with an option host": f"ssh://-oProxyCommand=touch%20{m}/x",
            "scp-style user@host:path": "git@127.0.0.1:srv/repo.git",
            "https when no remote is allowed": "https://127.0.0.1:1/repo.git",
            "/etc": "/etc",
            "a missing path": str(self.roots / "missing"),
            "a repository outside the roots": str(self.outside),
            "a link out of the roots": str(self.link),
            "a folder that is not a repository": str(self.plain),
            "a path climbing out": str(self.roots / ".." / "elsewhere" / "repo"),
            "a relative path": "repo",
        }


ATTACKS = [
    "upload-pack option",
    "ext helper",
    "fd helper",
    "file URL of /etc",
    "file URL outside the roots",
    "ssh URL",
    "ssh URL with an option host",
    "scp-style user@host:path",
    "https when no remote is allowed",
    "/etc",
    "a missing path",
    "a repository outside the roots",
    "a link out of the roots",
    "a folder that is not a repository",
    "a path climbing out",
    "a relative path",
]


def make_repo(path: Path) -> Path:
    """main (with hydra.toml) and a branch `feat` one commit ahead."""
    return make_feature_repo(path, '[scoring]\ntest_command = "true"\n')


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """The operator allows tmp/roots and no remote; Arena's other settings left at defaults."""
    for name in [n for n in os.environ if n.startswith("ARENA_")]:
        monkeypatch.delenv(name)
    built = World(tmp_path)
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(built.roots))
    yield built
    assert not built.marker.exists(), "a payload ran: " + built.marker.read_text()[:300]


def race(repo: str, *, scoring: bool = True, **extra: Any) -> dict[str, Any]:
    """A race spec; with a scoring block, nothing stops validation before git reads `repo`."""
    spec: dict[str, Any] = {
        "workload": "race",
        "task": "t",
        "repo": repo,
        "agents": [{"name": "a", "branch": "feat"}],
        **extra,
    }
    if scoring:
        spec["scoring"] = {"test_command": "true"}
    return spec


def snapshot(db: Store) -> dict[str, Any]:
    """Every key in Redis with its type and contents: what a refusal must leave alone."""
    return {k: (db.r.type(k), db.r.dump(k)) for k in sorted(db.r.keys("*"))}


def refused_over_http(client: TestClient, db: Store, spec: Any) -> str:
    before = snapshot(db)
    response = client.post("/batches", json=spec, headers=AUTH)
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail, detail
    assert snapshot(db) == before, "a refused spec changed what Redis holds"
    return detail


@pytest.fixture
def cli(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI pointed at a Redis where nothing listens (and no wait for it); its data folder
    must stay unborn."""
    monkeypatch.setenv("ARENA_REDIS_URL", NO_REDIS)
    monkeypatch.setenv("ARENA_REDIS_RETRY_S", "0")  # a spec that passes: exit 3 at once
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    assert not (tmp_path / "data").exists(), "a refused spec started or stored something"


def refused_by_cli(*argv: str) -> str:
    code, out, err = arena(*argv)
    assert "Traceback" not in out + err
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arena: error: "), err
    assert UNREACHABLE not in lines[0], "a hostile spec got as far as connecting"
    return lines[0].removeprefix("arena: error: ")


def spec_file(folder: Path, spec: dict[str, Any], name: str = "spec.yaml") -> str:
    path = folder / name
    path.write_text(yaml.safe_dump(spec))
    return str(path)


# -- finding 1 and 6 over HTTP -----------------------------------------------------------------


@pytest.mark.parametrize("attack", ATTACKS)
def test_the_api_refuses_a_repository_the_operator_did_not_allow(
    world: World,
    client: TestClient,
    db: Store,
    attack: str,
) -> None:
    assert set(world.payloads()) == set(ATTACKS)
    repo = world.payloads()[attack]
    detail = refused_over_http(client, db, race(repo))
    assert detail.startswith("repo: "), detail


def test_the_api_takes_a_repository_under_the_roots(
    world: World,
    client: TestClient,
    db: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: what the operator allows is accepted, as an absolute path, from hydra.toml
    too (no scoring block); with ARENA_REPO_ROOTS empty the same repository is refused."""
    response = client.post("/batches", json=race(str(world.repo), scoring=False), headers=AUTH)
    assert response.status_code == 202, response.text
    stored = db.batch(response.json()["batch_id"])
    assert stored is not None and stored.spec["items"][0]["repo"] == str(world.repo.resolve())
    monkeypatch.setenv("ARENA_REPO_ROOTS", "")
    detail = refused_over_http(client, db, race(str(world.repo), task="other"))
    assert "ARENA_REPO_ROOTS is empty" in detail


def test_the_generic_shape_is_checked_too(world: World, client: TestClient, db: Store) -> None:
    """A stored spec's shape (items, params) skips the race shorthand: its repository is still
    admitted before git reads it."""
    item = {"name": "race", "task": "t", "repo": world.payloads()["upload-pack option"]}
    spec = {
        "workload": "race",
        "agents": [{"name": "a", "branch": "feat"}],
        "items": [item],
        "params": {"test_command": "true"},
    }
    assert refused_over_http(client, db, spec).startswith("repo: ")
    spec["items"][0]["repo"] = str(world.outside)
    assert refused_over_http(client, db, spec).startswith("repo: ")


def without(message: str, value: str) -> str:
    return message.replace(repr(value), "<repo>")


@pytest.mark.parametrize("roots", ["set", "empty"])
@pytest.mark.parametrize("scoring", [True, False], ids=["scoring block", "hydra.toml"])
def test_paths_are_not_told_apart(
    world: World,
    client: TestClient,
    db: Store,
    monkeypatch: pytest.MonkeyPatch,
    roots: str,
    scoring: bool,
) -> None:
    """/etc, a missing path, a folder that is no repository, a repository outside the roots
    and a file all get one message: the API host's files are no oracle."""
    if roots == "empty":
        monkeypatch.setenv("ARENA_REPO_ROOTS", "")
    paths = [
        "/etc",
        "/etc/hostname",
        "/no/such/path",
        str(world.roots / "missing"),
        str(world.plain),
        str(world.outside),
        f"file://{world.outside}",
    ]
    messages = {p: refused_over_http(client, db, race(p, scoring=scoring)) for p in paths}
    shapes = {without(m, p) for p, m in messages.items()}
    assert len(shapes) == 1, messages
    assert "ARENA_REPO_ROOTS" in shapes.pop()


def test_a_hostile_ref_is_refused(world: World, client: TestClient, db: Store) -> None:
    marker = world.marker
    for agents, base, field in (
        ([{"name": "a", "branch": f"--output={marker}"}], "main", "agents[0].branch"),
        ([{"name": "a", "branch": "-x"}], "main", "agents[0].branch"),
        ([{"name": "a", "branch": "main..feat"}], "main", "agents[0].branch"),
        ([{"name": "a", "branch": "feat\n--output=x"}], "main", "agents[0].branch"),
        ([{"name": "a", "branch": "feat"}], f"--output={marker}", "base"),
    ):
        spec = race(str(world.repo), base=base)
        spec["agents"] = agents
        assert refused_over_http(client, db, spec).startswith(field)


# -- the same over the CLI ------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["run"], ["submit"], ["race", "run"]])
def test_the_cli_refuses_a_hostile_repository(world: World, cli: Path, command: list[str]) -> None:
    for attack in (
        "upload-pack option",
        "ext helper",
        "file URL of /etc",
        "ssh URL",
        "scp-style user@host:path",
        "a repository outside the roots",
    ):
        path = spec_file(cli, race(world.payloads()[attack]))
        assert refused_by_cli(*command, path).startswith("repo: "), attack


def test_the_cli_refuses_options_given_as_a_repository_or_a_branch(world: World, cli: Path) -> None:
    marker = world.marker
    line = refused_by_cli(
        "race", "run", f"--repo=--upload-pack=:;(id)>{marker};:", "--task", "t", "--agent", "a=feat"
    )
    assert line.startswith("repo: ") and "begins with '-'" in line
    line = refused_by_cli(
        "race", "run", "--repo", str(world.repo), "--task", "t", "--agent", f"a=--output={marker}"
    )
    assert line.startswith("agents[0].branch")


def test_the_cli_tells_paths_apart_no_more_than_the_api(world: World, cli: Path) -> None:
    paths = ["/etc", "/no/such/path", str(world.plain), str(world.outside)]
    lines = {p: refused_by_cli("run", spec_file(cli, race(p))) for p in paths}
    assert len({without(line, p) for p, line in lines.items()}) == 1, lines


def test_the_operators_cli_names_any_local_repository_while_no_roots_are_set(
    world: World, cli: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ARENA_REPO_ROOTS empty: `arena race run --repo .` works as before (the spec is valid and
    gets as far as Redis), while the same path is no oracle there either."""
    monkeypatch.setenv("ARENA_REPO_ROOTS", "")
    monkeypatch.chdir(world.outside)
    code, _, err = arena("race", "run", "--repo", ".", "--task", "t", "--agent", "a=feat")
    assert code == 3 and UNREACHABLE in err, err
    lines = {p: refused_by_cli("run", spec_file(cli, race(p))) for p in ("/etc", "/nope")}
    assert len({without(line, p) for p, line in lines.items()}) == 1, lines
    # Roots set bind the operator too; a relative path is still theirs to give.
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(world.roots))
    assert refused_by_cli(
        "race", "run", "--repo", ".", "--task", "t", "--agent", "a=feat"
    ).startswith("repo: ")
    monkeypatch.chdir(world.repo)
    code, _, err = arena("race", "run", "--repo", ".", "--task", "t", "--agent", "a=feat")
    assert code == 3 and UNREACHABLE in err, err


# -- arena beat: schedules are validated as schedules ------------------------------------------


def test_a_schedule_names_only_what_the_roots_allow(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    for repo in (world.payloads()["upload-pack option"], str(world.outside), "/etc"):
        with pytest.raises(InputError, match=r"^spec: repo: "):
            parse_entry({"name": "nightly", "cron": "0 3 * * *", "spec": race(repo)})
    entry = {"name": "nightly", "cron": "0 3 * * *", "spec": race(str(world.repo))}
    assert parse_entry(entry).name == "nightly"
    monkeypatch.setenv("ARENA_REPO_ROOTS", "")  # beat fires unattended: no local repository
    with pytest.raises(InputError, match="ARENA_REPO_ROOTS is empty"):
        parse_entry(entry)


# -- the worker checks a stored spec again ------------------------------------------------------


def test_a_worker_refuses_a_stored_repository_outside_its_roots(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = validate_batch(race(str(world.repo)), asker="operator")
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(world.outside.parent))  # the workers' own
    results = execute_batch(batch)
    assert [r.status for r in results] == ["error", "error"]
    assert all("ARENA_REPO_ROOTS" in (r.reason or "") for r in results), results


def test_a_worker_refuses_a_tampered_unit(world: World) -> None:
    """A unit as someone who can write Redis might leave it: an option for a repository, an
    option for a branch. Neither reaches git."""
    workload = get_workload("race")
    unit = workload.expand(validate_batch(race(str(world.repo))))[1]
    for item, agent in (
        ({"repo": world.payloads()["upload-pack option"]}, {}),
        ({"repo": world.payloads()["ext helper"]}, {}),
        ({}, {"branch": f"--output={world.marker}"}),
    ):
        payload = {
            **unit.payload,
            "item": {**unit.payload["item"], **item},
            "agent": {**unit.payload["agent"], **agent},
        }
        with pytest.raises(ValueError, match=r"repo|branch"):
            workload.run_unit(unit.model_copy(update={"payload": payload}))


# -- git itself: no option, no transport, no host credentials --------------------------------


def test_git_takes_no_repository_as_an_option_or_a_transport(world: World) -> None:
    """The lowest layer refuses on its own, whatever a policy above it said."""
    marker = world.marker
    for repo in (
        f"--upload-pack=:;(id)>{marker};:",
        f"ext::sh -c touch% {marker}",
        f"ssh://-oProxyCommand=touch%20{marker}/x",
        "git@127.0.0.1:x.git",
    ):
        with pytest.raises(race_git.GitError):
            race_git.resolve_commit(repo, "main")
        with pytest.raises(race_git.GitError):
            race_git.clone(repo, world.roots.parent / "clone")
    assert race_git.resolve_commit(str(world.repo), "feat") is not None  # the control


def test_git_runs_without_the_hosts_home_or_agent(world: World) -> None:
    env = race_git.git_environment(["https"])
    assert env["HOME"] == os.devnull
    assert not {"SSH_AUTH_SOCK", "XDG_CONFIG_HOME", "NETRC"} & set(env)
    assert not [k for k in env if k.startswith("ARENA_")]
    assert env["GIT_ALLOW_PROTOCOL"] == "https"


class _Recorder(BaseHTTPRequestHandler):
    """An http remote that asks for credentials and remembers any it was given."""

    seen: list[str | None]

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="r"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_a_remote_never_gets_the_hosts_netrc(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOME is not passed to git: the host user's ~/.netrc stays theirs."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine 127.0.0.1 login arena password host-secret\n")
    (home / ".netrc").chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    seen: list[str | None] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/repo.git"
        with pytest.raises(race_git.GitError):
            race_git.resolve_commit(url, "main")
    finally:
        server.shutdown()
        server.server_close()
    assert seen, "git never asked the remote"
    assert seen == [None] * len(seen), seen


# -- merge: only into a repository under the roots ---------------------------------------------


def finished_race(db: Store, repo: Path) -> str:
    """A race the operator ran (their CLI may name any repository while no roots are set),
    checked for real in-process and stored as a reducer stores it."""
    spec = {**race(str(repo)), "scoring": {}}  # no command: a clone and a diff
    batch = validate_batch(spec, asker="operator")
    results = execute_batch(batch)
    assert [r.status for r in results] == ["ok", "ok"], [r.reason for r in results]
    workload = get_workload("race")
    boards = workload.boards(batch)
    submitted = provenance_of(batch)
    db.start_batch(batch.normalised(), "race", boards, len(results), batch.identity, submitted)
    finished, per_agent = finished_provenance(submitted, time.time(), [])
    db.finish_batch(batch.batch_id, workload.reduce(batch, results), boards, finished, per_agent)
    return batch.batch_id


def test_merge_refuses_a_repository_outside_the_roots(
    world: World,
    client: TestClient,
    db: Store,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARENA_REPO_ROOTS", "")
    batch_id = finished_race(db, world.outside)
    main_before = git(world.outside, "rev-parse", "main")

    # A token holder: no roots, no local repository at all; roots elsewhere, not this one.
    for roots in ("", str(world.roots)):
        monkeypatch.setenv("ARENA_REPO_ROOTS", roots)
        response = client.post(f"/races/{batch_id}/merge?force=true", headers=AUTH)
        assert response.status_code == 409, response.text
        assert "repo: " in response.json()["detail"] and "\n" not in response.json()["detail"]
    # The operator's CLI too, once the operator has set roots that leave it out.
    monkeypatch.setenv("ARENA_REDIS_URL", redis_url)
    code, _, err = arena("race", "merge", batch_id, "--force")
    assert code == 1 and "repo: " in err and len(err.strip().splitlines()) == 1, err
    assert git(world.outside, "rev-parse", "main") == main_before  # nothing merged

    # The control: the API merges where the roots allow it.
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(world.outside.parent))
    merged = client.post(f"/races/{batch_id}/merge?force=true", headers=AUTH)
    assert merged.status_code == 200, merged.text
    assert git(world.outside, "rev-parse", "main") != main_before


# -- finding 5: the unit cap, before expansion --------------------------------------------------


def huge_bandit(agents: int = 100, items: int = 100, episodes: int = 1_000_000) -> dict[str, Any]:
    return {
        "workload": "bandit",
        "agents": [{"name": f"a{i}", "builtin": "random"} for i in range(agents)],
        "items": [{"name": f"i{i}", "arms": [0.1, 0.9]} for i in range(items)],
        "protocol": {"episodes": episodes},
    }


def test_ten_billion_units_are_refused_before_expansion(world: World) -> None:
    started = time.perf_counter()
    with pytest.raises(InputError) as refused:
        validate_batch(huge_bandit())
    assert time.perf_counter() - started < 0.5
    message = str(refused.value)
    assert "10,000,000,000 units" in message and "100,000" in message, message
    assert "ARENA_MAX_UNITS" in message and "1,000,000 episodes" in message


def test_the_cli_refuses_ten_billion_units_in_one_line(world: World, cli: Path) -> None:
    path = spec_file(cli, huge_bandit(), "huge.json")
    started = time.perf_counter()
    line = refused_by_cli("run", path)
    assert time.perf_counter() - started < 1.0
    assert line.startswith("protocol: ") and "10,000,000,000 units" in line, line


def test_the_api_refuses_a_batch_over_the_cap(
    world: World,
    client: TestClient,
    db: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2,000 units over a cap of 1,000 (small, so a front door that expanded first would still
    finish); and the race's own count (agents + the baseline)."""
    monkeypatch.setenv("ARENA_MAX_UNITS", "1000")
    started = time.perf_counter()
    detail = refused_over_http(client, db, huge_bandit(agents=2, items=10, episodes=100))
    assert time.perf_counter() - started < 1.0
    assert "2,000 units" in detail and "1,000" in detail and "ARENA_MAX_UNITS" in detail, detail
    monkeypatch.setenv("ARENA_MAX_UNITS", "2")
    spec = race(str(world.repo))
    spec["agents"] = [{"name": "a", "branch": "feat"}, {"name": "b", "branch": "main"}]
    assert "3 units (2 agents + the baseline)" in refused_over_http(client, db, spec)


def test_the_default_cap_leaves_room(world: World) -> None:
    assert json.dumps(validate_batch(huge_bandit(10, 10, 1000)).spec.protocol.episodes) == "1000"
