"""Make the repository examples/race.yaml races: a tiny Python package, `textkit`, whose `main`
asks for `slugify(text)`, and three agents' branches that tried.

    python examples/make_race_repo.py            # makes examples/race-repo (once)
    arena run examples/race.yaml                 # races it: prints the race's table

- `alice`: slugify and two tests of it; every check passes (the winner).
- `bob`: slugify, but `words` no longer lower-cases (an existing test breaks) and an unused
  import (one ruff finding).
- `carol`: a syntax error: the build (`python -c "import textkit"`) fails, so tests and lint
  are not run.

Real git, no network. Fixed identities and dates, and none of your git configuration, so the
commits are the same on every machine (a second run of the script, or of the race, at the same
commits is a resume). An existing folder this script made is made again; any other is refused.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER = "arena-example-race"  # in .git/: this folder is ours to make again
AUTHOR = ("Arena Example", "example@arena.invalid")

PYPROJECT = """\
[project]
name = "textkit"
version = "0.1.0"
requires-python = ">=3.10"

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
TEXTKIT = '''\
"""Small text helpers."""


def words(text: str) -> list[str]:
    """The words of `text`, lower-cased."""
    return text.lower().split()
'''
TEST_WORDS = """\
from textkit import words


def test_words_split_on_spaces():
    assert words("a b  c") == ["a", "b", "c"]


def test_words_are_lower_case():
    assert words("Hello World") == ["hello", "world"]
"""
SLUGIFY = '''

def slugify(text: str) -> str:
    """`text` as a URL slug: its words, lower-cased, joined by hyphens."""
    return "-".join(words(text))
'''
TEST_SLUGIFY = """\
from textkit import slugify


def test_slugify_joins_words():
    assert slugify("Hello  World") == "hello-world"


def test_slugify_of_nothing_is_empty():
    assert slugify("   ") == ""
"""
# bob: `words` no longer lower-cases, and `re` is imported for nothing.
BOB_WORDS = TEXTKIT.replace('"""\n\n', '"""\n\nimport re\n\n', 1).replace(".lower()", "")
BOB = BOB_WORDS + SLUGIFY.replace("words(text))", "words(text.lower()))")
BRANCHES: dict[str, dict[str, str]] = {
    "alice": {"textkit/__init__.py": TEXTKIT + SLUGIFY, "tests/test_slugify.py": TEST_SLUGIFY},
    "bob": {"textkit/__init__.py": BOB},
    "carol": {"textkit/__init__.py": TEXTKIT + SLUGIFY.replace("-> str:", "-> str")},
}


def git_env() -> dict[str, str]:
    """No configuration of the caller's, fixed identities and dates: the same commits anywhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {
        **env,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": AUTHOR[0],
        "GIT_AUTHOR_EMAIL": AUTHOR[1],
        "GIT_COMMITTER_NAME": AUTHOR[0],
        "GIT_COMMITTER_EMAIL": AUTHOR[1],
        "GIT_AUTHOR_DATE": "2026-11-26T10:00:00+00:00",
        "GIT_COMMITTER_DATE": "2026-11-26T10:00:00+00:00",
    }


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=git_env(), timeout=60)


def commit(repo: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "--", *files)
    git(repo, "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message)


def make(repo: Path) -> None:
    """The repository: `main` with the task's starting point, one branch per agent."""
    if repo.exists():
        if not (repo / ".git" / MARKER).is_file():
            raise SystemExit(f"{repo} exists and was not made by this script: remove it first")
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / ".git" / MARKER).touch()
    start = {
        "pyproject.toml": PYPROJECT,
        ".gitignore": "__pycache__/\n.ruff_cache/\n",
        "textkit/__init__.py": TEXTKIT,
        "tests/test_words.py": TEST_WORDS,
    }
    commit(repo, start, "textkit: words()")
    for branch, files in BRANCHES.items():
        git(repo, "checkout", "-q", "-b", branch, "main")
        commit(repo, files, f"{branch}: slugify()")
    git(repo, "checkout", "-q", "main")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "path", nargs="?", type=Path, default=HERE / "race-repo", help="default: %(default)s"
    )
    repo = parser.parse_args(argv).path.resolve()
    make(repo)
    print(f"made {repo}: main and the branches {', '.join(BRANCHES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
