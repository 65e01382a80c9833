"""A hostile race branch's setup command (the checkout's own code, run in the jail with the race's
environment writable) leaves links where the worker then writes or reads outside the jail:
`.arena-size` and `.arena-ready` (the markers the worker writes into the environment once it is
built) as links to files of the worker's, and a distribution's METADATA as a link to a secret
file of the worker's, whose Name and Version headers the worker reads to record what the
environment holds (issue 36, "versions on record").

Before (c3f317a, and this session's first version of the records): the worker's plain writes
followed the links, overwriting the victim file with the environment's size and creating a file
of the branch's choosing named by the other link (reproduced by hand on this machine: `precious`
became `26529792`). Now the markers are written as new files (what was there removed, no link
followed) and no link is read. Real git, the real bubblewrap jail, real pip (no index)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import RACE_WHEELS
from tests.needs import require_bwrap, unavailable
from tests.race.projects import commit, git
from workers.race.check import CheckCommands, PythonEnvironment, run_check
from workers.sandbox.local import local_sandbox

PYPROJECT = '[project]\nname = "victim-race"\nversion = "0.1"\ndependencies = []\n'


def test_links_a_setup_command_leaves_are_never_followed(tmp_path: Path) -> None:
    require_bwrap()
    if not (RACE_WHEELS / ".complete").is_file():
        unavailable(f"no wheels in {RACE_WHEELS}: run scripts/install-test-tools")
    victim, created, secret = tmp_path / "victim", tmp_path / "created", tmp_path / "secret"
    victim.write_text("precious")
    secret.write_text("Metadata-Version: 2.1\nName: leaked-secret\nVersion: 4.5.6\n\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {"pyproject.toml": PYPROJECT}, "a project")
    site = "$S"
    setup = (
        "S=$(echo $VIRTUAL_ENV/lib/python3*/site-packages) && "
        f"ln -s {victim} $VIRTUAL_ENV/.arena-size && ln -s {created} $VIRTUAL_ENV/.arena-ready"
        f" && mkdir {site}/evil-1.0.dist-info && ln -s {secret} {site}/evil-1.0.dist-info/METADATA"
        f" && mkdir {site}/planted-1.0.dist-info"
        f" && printf 'Name: planted\\nVersion: 6.6.6\\n' > {site}/planted-1.0.dist-info/METADATA"
    )
    lines: list[str] = []
    result = run_check(
        str(repo),
        "main",
        "main",
        CheckCommands(build="true", tests=None, lint=None, timeout_s=60),
        local_sandbox(),
        role="baseline",
        workdir_root=tmp_path / "work",
        echo=lines.append,
        environment=PythonEnvironment(cache_root=tmp_path / "envs", setup_command=setup),
    )
    assert any("== setup:" in line and "exit 0" in line for line in lines), lines
    assert victim.read_text() == "precious"
    assert not created.exists()
    made = result.environment
    assert made is not None and made.size_bytes and made.size_bytes > 0
    # What the setup wrote as a plain file is the branch's own record; the link is not read.
    assert made.installed.get("planted") == "6.6.6"
    assert "leaked-secret" not in made.installed and "evil" not in made.installed
