"""A hostile branch against the report a check asks pytest for (workers/race/named_tests.py):
the test command is the agent's code, and PYTEST_ADDOPTS tells it where the JUnit report goes.
Its conftest.py, run by the real pytest in the real bubblewrap jail, replaces the report after
pytest wrote it, as an agent that wants to hide a broken test, or to make the worker read what
it should not, would: a link to a file outside the checkout (the worker's own secret), an XML
entity bomb, a report of 200,000 names. Each time the check ends as a result whose counts are
the output's, as ever, no name is kept (so a race holds the branch for review: `unnamed`), the
file outside is never read, and nothing is left in the checkout.

The attack surface is new (on c3f317a no report was asked for). What stays open, by nature: a
conftest can write a well-formed report that lies, as it can print a summary line that lies;
the tests are the agent's code.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from tests.needs import require_bwrap
from tests.race.projects import commit, git
from workers.race.check import CheckCommands, run_check
from workers.race.named_tests import REPORT_PREFIX
from workers.sandbox import SandboxLimits
from workers.sandbox.local import local_sandbox

SECRET = "worker-secret-" + secrets.token_hex(8)
TESTS = "def test_one():\n    assert True\n\n\ndef test_two():\n    assert 1 == 2\n"
INI = "[pytest]\naddopts = -p no:cacheprovider -p no:xdist -p no:hypothesispytest -p no:anyio\n"
# After pytest has written its report (the junitxml plugin writes it at session finish), the
# agent's hook swaps it for what the attack names.
CONFTEST = """\
import os, re


def pytest_unconfigure(config):
    report = re.search(r"--junitxml=(\\S+)", os.environ.get("PYTEST_ADDOPTS", "")).group(1)
    os.remove(report)
    {attack}
"""
ATTACKS = {
    "link-out": "os.symlink(SECRET_PATH, report)",
    "entity-bomb": (
        'open(report, \'w\').write(\'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><testsuite><testcase classname="c" '
        'name="&b;"/></testsuite>\')'
    ),
    # 200,000 names in 8 MB: under the report's size bound, over the names' bound.
    "200k-names": (
        "open(report, 'w').write('<testsuite>' + ''.join("
        "f'<testcase classname=\"c\" name=\"t{i}\"/>' for i in range(200_000)) + '</testsuite>')"
    ),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_tampered_report_keeps_no_names_and_reads_nothing_outside(
    tmp_path: Path, attack: str
) -> None:
    require_bwrap()
    secret = tmp_path / "secret.xml"
    secret.write_text(f'<testsuite><testcase classname="{SECRET}" name="x"/></testsuite>')
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {"pytest.ini": INI, "test_x.py": TESTS}, "base")
    git(repo, "checkout", "-q", "-b", "hostile")
    code = ATTACKS[attack].replace("SECRET_PATH", repr(str(secret)))
    commit(repo, {"conftest.py": CONFTEST.format(attack=code)}, "the agent's work")
    seen: list[str] = []
    result = run_check(
        str(repo),
        "hostile",
        "main",
        CheckCommands(tests="python -m pytest -q", timeout_s=60),
        local_sandbox(),
        limits=SandboxLimits(processes=128),
        workdir_root=tmp_path / "work",
        echo=seen.append,
    )
    tests = result.tests
    assert tests is not None and tests.counts is not None
    assert (tests.counts.passed, tests.counts.failed) == (1, 1)  # the output's, as ever
    assert tests.cases is None  # neither the bomb, the flood nor the secret became names
    assert SECRET not in result.model_dump_json()
    assert not list((tmp_path / "work").rglob(f"{REPORT_PREFIX}*"))  # the checkout is gone


def test_an_honest_run_names_its_tests(tmp_path: Path) -> None:
    """The same check without the attack: the report is read, every test named, then removed."""
    require_bwrap()
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {"pytest.ini": INI, "test_x.py": TESTS}, "base")
    result = run_check(
        str(repo),
        "main",
        "main",
        CheckCommands(tests="python -m pytest -q", timeout_s=60),
        local_sandbox(),
        role="baseline",
        echo=lambda _: None,
    )
    assert result.tests is not None
    assert result.tests.cases == {"test_x::test_one": "passed", "test_x::test_two": "failed"}
