"""What a race's setup command can do (docs/race.md, "The race's environment"): install into the
race's environment with the environment's own pip, from what the checkout holds (here a wheel the
repository vendors), so the build, test and lint commands then import it. Real git, the real
bubblewrap jail, the real pip.

Before (c3f317a), and still while workers/sandbox/local.py binds the environment read-only as
well as writable for the setup command (at the same path the read-only bind wins), pip fails
with `[Errno 30] Read-only file system` under the environment's site-packages and the check is
an error (`setup command ... failed (exit 1)`); docs/race.md said it could install.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import RACE_WHEELS
from tests.needs import require_bwrap, unavailable
from tests.race.projects import commit, git
from workers.race.check import CheckCommands, PythonEnvironment, run_check
from workers.sandbox.local import LocalSandbox

SETUP = "pip install --no-deps --no-index vendor/iniconfig-*.whl"
COMMANDS = CheckCommands(
    build='python -c "import iniconfig, textkit; print(iniconfig.__file__)"',
    tests=None,
    lint=None,
    timeout_s=60,
)


def test_a_setup_command_installs_into_the_races_environment(tmp_path: Path) -> None:
    require_bwrap()
    wheels = sorted(RACE_WHEELS.glob("iniconfig-*.whl"))
    if not wheels:
        unavailable(f"no iniconfig wheel in {RACE_WHEELS}: run scripts/install-test-tools")
    repo = tmp_path / "repo"
    (repo / "vendor").mkdir(parents=True)
    shutil.copy(wheels[0], repo / "vendor")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "vendor")
    files = {"pyproject.toml": '[project]\nname = "textkit"\nversion = "0"\n'}
    commit(repo, {**files, "textkit.py": "X = 1\n"}, "textkit")
    envs = tmp_path / "envs"
    lines: list[str] = []
    result = run_check(
        str(repo),
        "main",
        "main",
        COMMANDS,
        LocalSandbox(),
        workdir_root=tmp_path,
        echo=lines.append,
        environment=PythonEnvironment(cache_root=envs, setup_command=SETUP),
    )
    assert any(f"== setup: {SETUP}" in line and "exit 0" in line for line in lines), lines
    assert result.build is not None and result.build.exit_code == 0, result.build
    made = result.environment
    assert made is not None
    assert f"{envs / made.key}/lib/python" in result.build.output_tail  # the environment's copy
