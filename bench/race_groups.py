"""What a race's environment costs when it holds what the commands need against every group
(docs/race.md, "What goes into an environment"; issue 36), on a real public Python repository
as its release's sdist has it: pallets/click 8.5.1 ([dependency-groups] dev, docs, docs-auto,
gha-update, pre-commit, tests, tests-random, typing: the layout itsdangerous's main branch has)
or, with --release, pallets/itsdangerous 2.2.0 (pip-compile files requirements/build, dev, docs,
tests, typing.txt). The environment for `python -c 'import PROJECT'`, `python -m pytest -q` and
`ruff check .` is built each into an empty cache, in turn: the default (runtime + the groups
whose name says test + the named tools), every group, and a race that names only `[tests]`.
Printed side by side: build time, distributions, size; then the project's own test suite run in
the default environment (it has what the commands need; click's one module that reads its
installed metadata left out, SKIP: a race's environment does not install the project).

The builds install from one folder of wheels fetched first (not timed), with no index: the
difference measured is what is installed, not the network.

Run from the repository root: .venv/bin/python bench/race_groups.py [--repeat R] [--release R]
It needs the package index once (the sdist and the wheels; PIP_INDEX_URL for a mirror).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.race.projects import extract_all
from workers.race.builders import LocalBuilder
from workers.race.environment import EnvironmentRun, python_environment
from workers.race.requirements import EnvironmentOptions, declarations, select
from workers.sandbox.local import LocalSandbox

# The releases the tests race the same (tests/race/test_real_repository.py); --release picks.
RELEASES = ("click==8.5.1", "itsdangerous==2.2.0")
COMMANDS = ("python -c 'import PROJECT'", "python -m pytest -q", "ruff check .")
# The one test module that reads click's installed metadata (importlib.metadata.version): the
# project itself is not installed in a race's environment (a setup command can: docs/race.md).
SKIP = ("--ignore=tests/test_deprecations.py",)
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
console = Console(width=150)


def fetch(folder: Path, release: str) -> Path:
    """The sdist of `release`, unpacked: the repository as its release has it."""
    subprocess.run(
        [*PIP, "download", "--quiet", "--no-deps", "--no-binary=:all:", "-d", str(folder), release],
        check=True,
    )
    (sdist,) = folder.glob(f"{release.split('==')[0]}-*.tar.gz")
    with tarfile.open(sdist) as archive:
        extract_all(archive, folder)
    return next(p for p in folder.iterdir() if p.is_dir())


def wheels_for(checkout: Path, folder: Path, everything: EnvironmentOptions) -> None:
    requirements = select(checkout, COMMANDS, everything).requirements
    subprocess.run(
        [*PIP, "download", "--quiet", "--only-binary=:all:", "-d", str(folder), *requirements],
        check=True,
    )


def build(checkout: Path, options: EnvironmentOptions, envs: Path) -> tuple[Path, EnvironmentRun]:
    builder = LocalBuilder(LocalSandbox(), checkout, None, 600.0)
    return python_environment(
        checkout, envs, None, builder, lambda _: None, commands=COMMANDS, options=options
    )


def suite(checkout: Path, env: Path) -> str:
    """The project's tests in the default environment, as a check runs them (src/ on PYTHONPATH)."""
    done = subprocess.run(
        [str(env / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", *SKIP],
        cwd=checkout,
        capture_output=True,
        text=True,
        env={"PATH": f"{env / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(checkout / "src")},
    )
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--release", choices=RELEASES, default=RELEASES[0])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arena-bench-groups-") as tmp:
        root = Path(tmp)
        checkout = fetch(root / "src", args.release)
        groups = sorted(declarations(checkout).groups)
        modes = {
            "tests only": EnvironmentOptions(groups=["tests"]),
            "default": EnvironmentOptions(),
            "every group": EnvironmentOptions(groups=groups),
        }
        wheels_for(checkout, root / "wheels", modes["every group"])
        os.environ |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(root / "wheels")}
        runs: dict[str, list[EnvironmentRun]] = {m: [] for m in modes}
        envs: dict[str, Path] = {}
        for attempt in range(args.repeat):
            for index, (mode, options) in enumerate(modes.items()):
                folder = root / f"envs-{index}-{attempt}"  # an empty cache; no ":" (venv)
                envs[mode], run = build(checkout, options, folder)
                runs[mode].append(run)
        shown = ", ".join(COMMANDS).replace("PROJECT", args.release.split("==")[0])
        table = Table(title=f"{checkout.name}: the environment for {shown}")
        columns = ("", "groups", "requirements", "distributions", "MiB", "build s (median)", "runs")
        for column in columns:
            table.add_column(column)
        for mode, done in runs.items():
            run = done[0]
            table.add_row(
                mode,
                ", ".join(run.groups),
                str(len(run.requirements)),
                str(len(run.installed)),
                f"{(run.size_bytes or 0) / (1 << 20):.0f}",
                f"{statistics.median(r.duration_s for r in done):.1f}",
                " ".join(f"{r.duration_s:.1f}" for r in done),
            )
        console.print(table)
        tests, default, every = (statistics.median(r.duration_s for r in runs[m]) for m in modes)
        console.print(
            f"default / every group: {default / every:.2f}x the build time; "
            f"tests only / every group: {tests / every:.2f}x"
        )
        console.print(f"tools: {runs['default'][0].tools}")
        console.print(f"its tests in the default environment: {suite(checkout, envs['default'])}")


if __name__ == "__main__":
    main()
