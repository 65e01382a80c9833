"""A race's own Python environment under the Docker sandbox (docs/race.md, "The race's
environment"; workers/race/builders_docker.py): the repository of tests/race/test_environment.py
(a package named markupsafe, which the image's Arena also has, in a src/ layout, declaring pytest
and ruff) is checked in sibling containers of the worker image, in an environment made for the
image's interpreter: the worker's pip downloads the wheels (from the folder
scripts/install-test-tools fills, with no index), the image's pip installs them with no network.
Real engine, real git, real pip. Skipped without an engine, except under CI=true."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import DOCKER_GROUP, WORKER_IMAGE, require_image
from tests.race import test_environment as local
from tests.race.projects import commit
from tests.race.test_environment import COMMANDS
from tests.workers import test_docker_sandbox as sandbox_tests
from workers.race.check import CheckCommands, CheckError, PythonEnvironment, run_check
from workers.race.environment import TOOL_PINS
from workers.sandbox import SandboxUnavailable
from workers.sandbox.docker import DockerSandbox

# The fixtures of the local sandbox's tests (the repository, the wheels with no index) and of
# the Docker sandbox's (no container of this process left behind).
repo, wheels, no_leftovers = local.repo, local.wheels, sandbox_tests.no_leftovers
pytestmark = [pytest.mark.integration, DOCKER_GROUP, pytest.mark.usefixtures("no_leftovers")]
# What the build shows of where it runs: the package it imports, the interpreter's prefix,
# PATH, VIRTUAL_ENV and PYTHONPATH, any Arena variable, and which ruff and pytest it would run.
SHOW = (
    "import json, os, shutil, sys, markupsafe; print(json.dumps({'package': markupsafe.__file__,"
    " 'prefix': sys.prefix, 'ruff': shutil.which('ruff'), 'pytest': shutil.which('pytest'),"
    " 'arena': sorted(k for k in os.environ if k.startswith('ARENA')),"
    " **{k: os.environ.get(k) for k in ('PATH', 'VIRTUAL_ENV', 'PYTHONPATH')}}))"
)
SHOWN = COMMANDS.model_copy(update={"build": f'python -c "{SHOW}"'})


@pytest.fixture
def sandbox(docker_engine: Any) -> DockerSandbox:
    """The worker image: its Arena's pip installs the environment (a plain image has none)."""
    return DockerSandbox(require_image(WORKER_IMAGE), client=docker_engine)


def check(
    repo: Path,
    ref: str,
    sandbox: DockerSandbox,
    environment: PythonEnvironment,
    work: Path,
    commands: CheckCommands = SHOWN,
) -> dict[str, Any]:
    result = run_check(
        str(repo),
        ref,
        "main",
        commands,
        sandbox,
        workdir_root=work,
        echo=lambda _: None,
        environment=environment,
    )
    return result.model_dump(mode="json")


def test_checks_run_in_the_repositorys_environment_not_the_images_arena(
    repo: Path, wheels: Path, sandbox: DockerSandbox, docker_workdir: Path
) -> None:
    envs = docker_workdir / "envs"
    base = check(repo, "main", sandbox, PythonEnvironment(cache_root=envs), docker_workdir)
    build = base["build"]
    assert build["exit_code"] == 0, build
    shown = json.loads(build["output_tail"].strip().splitlines()[-1])
    first = base["environment"]
    env = str((envs / first["key"]).resolve())
    # The repository's own package from its src/, in the environment's interpreter; its ruff
    # and pytest; nothing of the image's Arena (/opt/arena) on PATH or in a variable.
    assert shown["package"].endswith("/checkout/src/markupsafe/__init__.py"), shown
    assert (shown["prefix"], shown["VIRTUAL_ENV"]) == (env, env)
    assert (shown["ruff"], shown["pytest"]) == (f"{env}/bin/ruff", f"{env}/bin/pytest")
    assert shown["PATH"].split(":")[0] == f"{env}/bin" and "/opt/arena" not in shown["PATH"]
    assert shown["PYTHONPATH"].endswith("/checkout/src") and shown["arena"] == []
    tests = base["tests"]
    assert tests["counts"]["passed"] == 1, tests
    assert "hypothesis" not in tests["output_tail"]  # none of Arena's pytest plugins
    assert base["lint"]["exit_code"] == 0, base["lint"]
    assert not first["reused"] and first["requirements"] == ["pytest", TOOL_PINS["ruff"]]
    assert not (envs / first["key"] / ".arena-wheels").exists()  # the download is gone

    environment = PythonEnvironment(cache_root=envs)
    broken = check(repo, "syntax-error", sandbox, environment, docker_workdir)
    assert broken["build"]["exit_code"] != 0 and broken["tests_skipped"], broken["build"]
    assert "SyntaxError" in broken["build"]["output_tail"]
    again = broken["environment"]
    assert again["reused"] and again["key"] == first["key"]
    # Versions on record (issue 36), read from the environment the image's pip installed into.
    assert first["installed"]["pytest"] and first["installed"]["ruff"]
    assert first["tools"] == {t: first["installed"][t] for t in ("pytest", "ruff")}
    assert again["installed"] == first["installed"]
    assert again["duration_s"] < first["duration_s"]
    print(f"docker: environment built in {first['duration_s']:.2f}s, reused in ", end="")
    print(f"{again['duration_s']:.3f}s")


def test_the_setup_command_writes_the_environment_the_checks_only_read(
    repo: Path, wheels: Path, sandbox: DockerSandbox, docker_workdir: Path
) -> None:
    environment = PythonEnvironment(
        cache_root=docker_workdir / "envs",
        setup_command='echo prepared > "$VIRTUAL_ENV/prepared.txt"',
    )
    commands = CheckCommands(
        build='cat "$VIRTUAL_ENV/prepared.txt" && touch "$VIRTUAL_ENV/written.txt"', timeout_s=60
    )
    result = check(repo, "main", sandbox, environment, docker_workdir, commands)
    build = result["build"]
    assert build["output_tail"].startswith("prepared\n"), build
    assert build["exit_code"] != 0 and "Read-only file system" in build["output_tail"], build


def test_a_requirement_with_no_wheel_fails_naming_it(
    repo: Path, wheels: Path, sandbox: DockerSandbox, docker_workdir: Path
) -> None:
    text = (repo / "pyproject.toml").read_text().replace('"pytest"', '"nosuch-pkg"')
    commit(repo, {"pyproject.toml": text}, "a requirement nobody has")
    envs = docker_workdir / "envs"
    with pytest.raises(CheckError, match=r"installing the requirements failed.*nosuch"):
        check(repo, "main", sandbox, PythonEnvironment(cache_root=envs), docker_workdir)
    started = time.perf_counter()
    with pytest.raises(CheckError, match="this environment's build failed"):
        check(repo, "main", sandbox, PythonEnvironment(cache_root=envs), docker_workdir)
    assert time.perf_counter() - started < 5
    assert not any((p / ".arena-ready").exists() for p in envs.iterdir() if p.is_dir())


def test_a_missing_image_is_not_the_checks_fault(
    repo: Path, docker_engine: Any, docker_workdir: Path
) -> None:
    """The environment's key needs the image: without one, the unit is an infrastructure error
    (retried on resubmission), not a failed environment remembered against the branch."""
    missing = DockerSandbox("arena-no-such-image:0", client=docker_engine)
    envs = docker_workdir / "envs"
    with pytest.raises(SandboxUnavailable, match="arena-no-such-image:0 not found"):
        check(repo, "main", missing, PythonEnvironment(cache_root=envs), docker_workdir)
    assert not envs.exists() or not any(envs.glob("*.failed"))
