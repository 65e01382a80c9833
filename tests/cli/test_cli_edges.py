"""The command line's edges: help, version, and every bad setting or path refused in one line,
with exit status 2, before any work — and a fuzz of settings and arguments that finds no
traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.cli.main import main
from tasks.provenance import arena_version
from tasks.settings import load_settings
from tasks.validation import InputError

ROOT = Path(__file__).resolve().parents[2]
ARENA = str(Path(sys.executable).with_name("arena"))
BANDIT = str(ROOT / "examples" / "bandit.yaml")


def arena(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return subprocess.run(
        [ARENA, *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def one_error_line(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arena: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


@pytest.mark.parametrize("args", [(), ("game",)])
def test_a_group_alone_prints_its_help(args: tuple[str, ...]):
    result = arena(*args)
    assert result.returncode == 0 and not result.stderr
    assert result.stdout.startswith("Usage: arena") and len(result.stdout.splitlines()) > 5


def test_version_names_the_release_and_the_commit():
    result = arena("--version")
    assert result.returncode == 0
    assert result.stdout.startswith(f"arena {arena_version()} (commit ")


@pytest.mark.parametrize(
    ("env", "args", "needles"),
    [
        ({"ARENA_WORKERS": "0"}, ("run", BANDIT), ["ARENA_WORKERS", "greater than or equal"]),
        ({"ARENA_WORKERS": "many"}, ("run", BANDIT), ["ARENA_WORKERS", "'many'"]),
        ({"ARENA_REDIS_URL": "localhost:6379"}, ("status", "x"), ["ARENA_REDIS_URL", "redis://"]),
        ({"ARENA_REDIS_URL": "localhost:6379"}, ("run", BANDIT), ["ARENA_REDIS_URL"]),
        ({"ARENA_VISIBILITY_TIMEOUT_S": "nan"}, ("run", BANDIT), ["ARENA_VISIBILITY_TIMEOUT_S"]),
        ({"ARENA_DATA_DIR": "/proc/nope"}, ("run", BANDIT), ["ARENA_DATA_DIR", "/proc/nope"]),
        ({"ARENA_DATA_DIR": "/proc/nope"}, ("leaderboard",), ["ARENA_DATA_DIR"]),
        ({}, ("run", BANDIT, "--output-path", "/nonexistent/dir/r.json"), ["--output-path"]),
        ({}, ("run", BANDIT, "--run-id", "has space"), ["--run-id"]),
        (
            {},
            ("game", "benchmark", "--output-file", "/nonexistent/dir/r.json"),
            ["--output-file", "/nonexistent/dir"],
        ),
        ({}, ("game", "benchmark", "--output-path", "/proc/x.json"), ["--output-path"]),
        (
            {},
            ("game", "benchmark", "--agent", "no_such_module_xyz:make"),
            ["agents[0].entry_point", "no_such_module_xyz"],
        ),
    ],
)
def test_bad_settings_and_paths_are_one_line_before_any_work(
    tmp_path: Path, env: dict[str, str], args: tuple[str, ...], needles: list[str]
):
    env = {"ARENA_DATA_DIR": str(tmp_path / "data"), **env}
    started = time.monotonic()
    one_error_line(arena(*args, env=env), *needles)
    assert time.monotonic() - started < 20  # refused up front, not after a benchmark ran
    assert not (tmp_path / "data").exists()  # nothing started, nothing stored


def test_an_agent_that_never_answers_ends_the_benchmark_with_status_1_and_the_reason():
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = arena(
        "game", "benchmark", "--agent", f"http://127.0.0.1:{port}/act", "--episodes", "2"
    )
    assert result.returncode == 1
    assert "scored 0/100" in result.stdout
    assert "13 of 13 units failed" in result.stderr and "Connection refused" in result.stderr


def test_an_agent_whose_factory_is_missing_is_refused_before_anything_runs():
    result = arena("game", "benchmark", "--agent", "tests.integration.agents:no_such_factory")
    one_error_line(result, "agents[0].entry_point", "has no 'no_such_factory'")


def test_an_agent_that_cannot_load_fails_with_status_1_and_the_reason():
    result = arena(
        "game", "benchmark", "--agent", "tests.integration.agents:unloadable", "--episodes", "1"
    )
    assert result.returncode == 1
    assert "scored 0/100" in result.stdout
    assert "13 of 13 units failed" in result.stderr
    assert "ImportError: this agent needs a package that is not installed" in result.stderr


def test_in_process_runs_import_agents_from_the_working_directory(tmp_path: Path):
    """One loading rule: the working directory first, as on the cluster's workers."""
    (tmp_path / "my_local_agent.py").write_text(
        "from workers.games import BUILTIN\n\n"
        "class Agent:\n"
        "    def reset(self, *, game, player, seed):\n"
        "        self.inner = BUILTIN[game]()\n"
        "        self.inner.reset(game=game, player=player, seed=seed)\n\n"
        "    def act(self, observation):\n"
        "        return self.inner.act(observation)\n\n"
        "def make():\n"
        "    return Agent()\n"
    )
    local = arena(
        "game",
        "benchmark",
        "--agent",
        "my_local_agent:make",
        "--episodes",
        "1",
        "--output",
        "json",
        cwd=tmp_path,
    )
    builtin = arena("game", "benchmark", "--episodes", "1", "--output", "json", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    assert (
        json.loads(local.stdout)["composite_score"] == json.loads(builtin.stdout)["composite_score"]
    )


# -- fuzz ---------------------------------------------------------------------------------------

WORDS = [
    "run",
    "submit",
    "status",
    "batches",
    "cancel",
    "leaderboard",
    "logs",
    "report",
    "score",
    "demo",
    "game",
    "benchmark",
    "mario",
    "race",
    "alympics",
    "--json",
    "--fresh",
    "--quiet",
    "--workers",
    "--run-id",
    "--output-path",
    "--output-file",
    "--output",
    "--episodes",
    "--seed",
    "--agent",
    "--limit",
    "--watch",
    "--cluster",
    "--version",
    "-h",
    "-v",
    "-",
    "0",
    "-1",
    "1",
    "3",
    "abc",
    "1e99",
    "nan",
    "",
    "text",
    "json",
    "builtin",
    "x:y",
    "http://127.0.0.1:1/act",
    "a" * 80,
    "ü",
    "/proc/nope/x.json",
    "/nonexistent/r.json",
]
ENV = {
    "ARENA_REDIS_URL": [
        "redis://127.0.0.1:1/0",
        "localhost:6379",
        "unix:///nonexistent.sock",
        "redis://:@[::1",
        "redis://127.0.0.1:99999",
        "ftp://x",
        " ",
    ],
    "ARENA_WORKERS": ["0", "-3", "x", "2", "1e3", ""],
    "ARENA_DATA_DIR": ["/proc/nope", "", "\x7f"],
    "ARENA_VISIBILITY_TIMEOUT_S": ["0", "-1", "inf", "nan", "x", "10"],
    "ARENA_MAX_DELIVERIES": ["0", "x", "2"],
    "ARENA_KEY_PREFIX": ["", " ", "a b", "ok:"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("fuzz-files")
    samples = {
        "spec.yaml": Path(BANDIT).read_bytes(),
        "utf16.yaml": "workload: bandit\n".encode("utf-16"),
        "latin1.json": b'{"name": "caf\xe9"}',
        "deep.json": b"[" * 5000 + b"]" * 5000,
        "deep.yaml": b"a: " + b"[" * 5000 + b"]" * 5000,
        "empty.json": b"",
        "list.yaml": b"- 1\n- 2\n",
        "dupe.yaml": b"workload: bandit\nworkload: alympics\n",
    }
    paths = []
    for name, data in samples.items():
        (folder / name).write_bytes(data)
        paths.append(str(folder / name))
    return [*paths, str(folder)]


def run_in_process(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, err.getvalue()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_fuzzed_settings_and_arguments_never_print_a_traceback(
    files: list[str], data: st.DataObject
):
    words = st.sampled_from(WORDS + files) | st.text(max_size=12)
    argv = data.draw(st.lists(words, max_size=6))
    env = {
        name: data.draw(st.sampled_from(values))
        for name, values in ENV.items()
        if data.draw(st.booleans())
    }
    # Never the embedded default here (it starts processes): a cluster URL is always set, to
    # nothing that answers.
    env.setdefault("ARENA_REDIS_URL", "redis://127.0.0.1:1/0")
    env["ARENA_REDIS_RETRY_S"] = "0"  # nothing answers there: no wait for it (exit 3 at once)
    if argv[:1] == ["worker"] or "--watch" in argv:
        argv = ["worker", "--queues", "nope"]
    saved = {k: v for k, v in os.environ.items() if k.startswith("ARENA_")}
    cwd = os.getcwd()
    try:
        os.environ.update(env)
        os.chdir(Path(files[-1]))  # paths the arguments name land in a scratch folder
        code, err = run_in_process(argv)
    finally:
        os.chdir(cwd)
        for name in env:
            os.environ.pop(name, None)
        os.environ.update(saved)
    assert code in (0, 1, 2, 3, 130), (argv, env, err)
    assert "Traceback" not in err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("arena: error: "), err


@settings(max_examples=200, deadline=None)
@given(env=st.dictionaries(st.sampled_from(sorted(ENV)), st.text(max_size=20), max_size=4))
def test_fuzzed_settings_load_or_name_the_variable(env: dict[str, str]):
    env = {k: v.replace("\x00", "") for k, v in env.items()}
    saved = {k: v for k, v in os.environ.items() if k.startswith("ARENA_")}
    try:
        os.environ.update(env)
        try:
            load_settings()
        except InputError as exc:
            assert str(exc).startswith("ARENA_") and "\n" not in str(exc)
    finally:
        for name in env:
            os.environ.pop(name, None)
        os.environ.update(saved)
