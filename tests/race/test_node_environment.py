"""A race's Node environment (docs/race.md, "Node repositories"; workers/race/node_env.py): a
repository with a package.json gets `npm ci --ignore-scripts` from its committed lockfile,
cached by the lockfile, copied into each check's checkout, its `node_modules/.bin` first on the
commands' PATH; no lockfile, or a lockfile naming anything but registry packages, is refused in
one line with nothing fetched. Real npm installing jest 29.7.0 offline from the cache
scripts/install-test-tools fills (tests/race/node_project's lockfile), real git, the real
bubblewrap jail.

Before (c3f317a), a JavaScript repository's commands ran with whatever the sandbox had: `jest`
was "not installed" (exit 127) and no check recorded a Node package's version."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from tasks.workloads.base import UnitResult
from tasks.workloads.race_environments import environments_of
from tasks.workloads.race_spec import BASELINE
from tests.needs import require_bwrap, unavailable
from tests.race.projects import commit, git
from workers.race.check import CheckCommands, CheckError, PythonEnvironment, run_check
from workers.race.environment import EnvironmentFailed
from workers.race.node_env import (
    check_lockfile,
    installed_packages,
    node_environment,
    wants_node,
)
from workers.sandbox.local import LocalSandbox

ROOT = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).resolve().parent / "node_project"
NPM_CACHE = ROOT / ".test-tools" / "npm-cache"
SUM = "function sum(a, b) {\n  return a + b;\n}\n\nmodule.exports = { sum };\n"
TESTS = """\
const { sum } = require("../src/sum");

test("adds", () => expect(sum(1, 2)).toBe(3));
test("adds negatives", () => expect(sum(-1, -2)).toBe(-3));
test("adds zero", () => expect(sum(0, 5)).toBe(5));
"""
MORE_TESTS = (
    'const { sum } = require("../src/sum");\n\ntest("twos", () => expect(sum(2, 2)).toBe(4));\n'
)
COMMANDS = CheckCommands(tests="jest --json", timeout_s=120)  # node_modules/.bin on PATH


@pytest.fixture
def npm_cache(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The worker's npm, offline, from the cache scripts/install-test-tools filled."""
    if not (NPM_CACHE / ".complete").is_file():
        unavailable(f"no npm cache in {NPM_CACHE}: run scripts/install-test-tools")
    monkeypatch.setenv("npm_config_cache", str(NPM_CACHE))
    monkeypatch.setenv("npm_config_offline", "true")
    return NPM_CACHE


def project(folder: Path, lock: bool = True) -> Path:
    folder.mkdir(parents=True)
    (folder / "package.json").write_bytes((PROJECT / "package.json").read_bytes())
    if lock:
        (folder / "package-lock.json").write_bytes((PROJECT / "package-lock.json").read_bytes())
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: sum with 3 tests; clean: a 4th test; broken-test: one fails; syntax-error."""
    repo = project(tmp_path / "repo")
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {"src/sum.js": SUM, "__tests__/sum.test.js": TESTS}, "sum")
    branches = {
        "clean": {"__tests__/more.test.js": MORE_TESTS},
        "broken-test": {"src/sum.js": SUM.replace("a + b", "a + Math.abs(b)")},
        "syntax-error": {"src/sum.js": SUM.replace("(a, b)", "(a, b")},
    }
    for branch, files in branches.items():
        git(repo, "checkout", "-q", "-b", branch, "main")
        commit(repo, files, branch)
    git(repo, "checkout", "-q", "main")
    return repo


def check(repo: Path, ref: str, tmp_path: Path, role: str = "agent") -> dict[str, object]:
    result = run_check(
        str(repo),
        ref,
        "main",
        COMMANDS,
        LocalSandbox(),
        role="baseline" if role == "baseline" else "agent",
        workdir_root=tmp_path / "work",
        echo=lambda _: None,
        environment=PythonEnvironment(cache_root=tmp_path / "envs"),
    )
    return result.model_dump(mode="json")


def test_no_lockfile_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = project(tmp_path / "p", lock=False)
    assert wants_node(folder)
    (folder / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n')
    assert not wants_node(folder)  # a Python project's stray package.json is left alone
    (folder / "pyproject.toml").unlink()
    with pytest.raises(EnvironmentFailed) as refused:
        node_environment(folder, tmp_path / "envs", echo=lambda _: None)
    assert "no package-lock.json" in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "envs").exists()  # nothing built, nothing fetched


@pytest.mark.parametrize(
    "entry, says",
    [
        ({"resolved": "file:/etc/passwd", "integrity": "sha512-x"}, "not from the npm registry"),
        ({"resolved": "git+ssh://git@example.com/x.git"}, "not from the npm registry"),
        ({"resolved": "https://example.com/x.tgz", "integrity": "sha512-x"}, "not from the npm"),
        ({"resolved": "../..", "link": True}, "not from the npm registry"),
        ({"inBundle": True, "resolved": "file:/etc/passwd"}, "not from the npm registry"),
        ({"version": "file:../x", "integrity": "sha512-x"}, "not from the npm registry"),
        ({"resolved": "https://registry.npmjs.org.example.com/x.tgz"}, "not from the npm"),
        ({"resolved": "https://registry.npmjs.org/x/-/x-1.0.0.tgz"}, "no integrity hash"),
    ],
)
def test_a_lockfile_naming_anything_but_registry_packages_is_refused(
    entry: dict[str, object], says: str
) -> None:
    lock = {"lockfileVersion": 3, "packages": {"": {}, "node_modules/x": entry}}
    with pytest.raises(EnvironmentFailed, match=says) as refused:
        check_lockfile(lock, "package-lock.json")
    assert "node_modules/x" in str(refused.value)


def test_the_committed_lockfile_is_all_registry_packages() -> None:
    lock = json.loads((PROJECT / "package-lock.json").read_text())
    check_lockfile(lock, "package-lock.json")
    # As npm writes it with omit-lockfile-registry-resolved: registry packages by version.
    for entry in lock["packages"].values():
        entry.pop("resolved", None)
    check_lockfile(lock, "package-lock.json")
    with pytest.raises(
        EnvironmentFailed,
        match=r"lockfileVersion must be 2 or 3 \(written by npm 7 or later\); it is 1",
    ):
        check_lockfile({"lockfileVersion": 1, "dependencies": {}}, "package-lock.json")


def test_installed_versions_are_read_without_following_links(tmp_path: Path) -> None:
    modules = tmp_path / "node_modules"
    for name, version in {"jest": "29.7.0", "@jest/core": "29.7.0", "bad name": "1"}.items():
        (modules / name).mkdir(parents=True)
        (modules / name / "package.json").write_text(json.dumps({"name": name, "version": version}))
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"name": "secret", "version": "9.9.9"}))
    (modules / "linked").mkdir()
    (modules / "linked" / "package.json").symlink_to(secret)
    (modules / "folder-link").symlink_to(tmp_path)
    (modules / ".bin").mkdir()
    assert installed_packages(modules) == {"@jest/core": "29.7.0", "jest": "29.7.0"}


def test_npm_ci_from_the_lockfile_is_cached_and_copied_per_check(
    npm_cache: Path, tmp_path: Path
) -> None:
    first_checkout = project(tmp_path / "a")
    first = node_environment(first_checkout, tmp_path / "envs", lambda _: None, ["jest --json"])
    assert not first.reused and first.kind == "node"
    assert first.installed["jest"] == "29.7.0" and first.tools["jest"] == "29.7.0"
    assert first.tools["node"] and first.tools["npm"]
    assert (first_checkout / "node_modules" / ".bin" / "jest").is_symlink()
    # A command writing its checkout's copy does not reach the cached one.
    (first_checkout / "node_modules" / "jest" / "package.json").write_text("{}")
    second_checkout = project(tmp_path / "b")
    (second_checkout / "node_modules").mkdir()  # a committed node_modules is replaced
    (second_checkout / "node_modules" / "planted.js").write_text("")
    second = node_environment(second_checkout, tmp_path / "envs", lambda _: None, ["jest"])
    assert second.reused and second.key == first.key and second.installed == first.installed
    assert not (second_checkout / "node_modules" / "planted.js").exists()
    print(f"npm ci built in {first.duration_s:.2f}s, reused in {second.duration_s:.2f}s")


# What a plain `npm ci && npx jest` says of each branch, run by hand in a clone of it (jest
# 29.7.0, node 20.20.2): its "Tests:" line's passed and failed, and the suites that "failed to
# run" (the syntax error: no test ran).
BY_HAND = {
    "main": (3, 0, 0),
    "clean": (4, 0, 0),
    "broken-test": (2, 1, 0),
    "syntax-error": (0, 0, 1),
}


def test_a_jest_race_measures_what_npm_ci_and_jest_say_by_hand(
    npm_cache: Path, repo: Path, tmp_path: Path
) -> None:
    require_bwrap()
    units = []
    for ref, (passed, failed, broken) in BY_HAND.items():
        result = check(repo, ref, tmp_path, "baseline" if ref == "main" else "agent")
        agent = BASELINE if ref == "main" else ref
        units.append(
            UnitResult(unit_id=ref, agent=agent, item="r", episode=0, status="ok", result=result)
        )
        tests, environment = result["tests"], result["node_environment"]
        assert isinstance(tests, dict) and isinstance(environment, dict), result
        counts = tests["counts"]
        found = (counts["passed"], counts["failed"], counts["errors"])
        assert found == (passed, failed, broken), tests["output_tail"]
        assert tests["exit_code"] == (1 if failed or broken else 0)
        assert environment["tools"]["jest"] == "29.7.0"
        assert environment["reused"] == (ref != "main")  # one install for the race
        if not broken:  # jest --json names every test that ran
            assert len(tests["cases"]) == passed + failed
    # The race's summary lists it with the Python environment, who used it and what it holds.
    node = {k: v for k, v in environments_of(units).items() if k.startswith("node-")}
    assert [env["used_by"] for env in node.values()] == [
        [BASELINE, "broken-test", "clean", "syntax-error"]
    ]
    assert next(iter(node.values()))["tools"]["jest"] == "29.7.0"


def test_a_repository_without_a_lockfile_is_the_checks_error(tmp_path: Path) -> None:
    require_bwrap()
    repo = project(tmp_path / "repo", lock=False)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {"src/sum.js": SUM}, "sum")
    with pytest.raises(CheckError, match=r"^environment: package\.json has no package-lock\.json"):
        check(repo, "main", tmp_path, "baseline")


class Counting(BaseHTTPRequestHandler):
    """A tarball server on loopback that counts what it is asked for."""

    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Counting.asked.append(self.path)
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def tarball_server() -> Iterator[str]:
    Counting.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_branchs_lockfile_naming_another_host_fetches_nothing(
    tarball_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A branch's lockfile pointing a package at a server of its choosing (here one on
    loopback that records requests): the check fails naming the entry, and npm never asks.
    Before (c3f317a) no npm ran at all; without the lockfile's check, npm ci would run."""
    require_bwrap()
    monkeypatch.setenv("npm_config_offline", "true")  # whatever happens, no outside traffic
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    lock = json.loads((PROJECT / "package-lock.json").read_text())
    lock["packages"]["node_modules/jest"]["resolved"] = f"{tarball_server}/jest-29.7.0.tgz"
    repo = project(tmp_path / "repo")
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {"src/sum.js": SUM, "package-lock.json": json.dumps(lock)}, "elsewhere")
    with pytest.raises(CheckError, match=r"packages\['node_modules/jest'\] is not from the npm"):
        check(repo, "main", tmp_path, "baseline")
    assert Counting.asked == []
    assert not list((tmp_path / "envs").glob("node-*/node_modules"))  # npm never ran
