"""Where the data folder is when ARENA_DATA_DIR is not set (docs/configuration.md).

`.arena-data` in the current directory, as every command has it, except where that would put
it inside a git repository that does not ignore it: `arena race run --repo .` run in the raced
repository would leave an untracked folder there (the embedded Redis's data, its socket, logs),
which `git add -A` would commit. There the folder is the repository's git folder's
`arena-data` (`.git/arena-data`), which git never shows, and every command run anywhere in the
repository (`arena race results`, `arena race merge`, `arena leaderboard`) finds the same one.
A `.arena-data` already in the current directory stays the folder (nothing stored is lost),
and so does one the repository ignores (Arena's own checkout lists it in .gitignore)."""

from __future__ import annotations

import subprocess
from pathlib import Path

FOLDER = Path(".arena-data")
IN_GIT_FOLDER = "arena-data"


def _git(*args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):  # no git, or a git that hangs: the default
        return None


def default_data_dir() -> Path:
    """The data folder for a command run in the current directory (module docstring)."""
    if FOLDER.exists():
        return FOLDER
    found = _git("rev-parse", "--is-inside-work-tree", "--git-common-dir")
    if found is None or found.returncode != 0:
        return FOLDER  # not in a repository (or one git refuses to read)
    inside, _, common = found.stdout.strip().partition("\n")
    if inside != "true":
        return FOLDER  # a bare repository or the git folder itself
    # With its slash: a pattern `.arena-data/` matches a folder only, and this one may not
    # exist yet.
    ignored = _git("check-ignore", "-q", "--", f"{FOLDER}/")
    if ignored is None or ignored.returncode == 0:
        return FOLDER
    return Path(common.strip()).resolve() / IN_GIT_FOLDER
