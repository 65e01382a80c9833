"""Fingerprints of agents and of Arena's own unit code: what makes two runs the same work.

A batch's identity covers every agent's fingerprint, so a rerun resumes only when no agent's
code changed (docs/reproducibility.md). Kinds:

- `source`: SHA-256 over the files of an entry point's top-level package (or its one module);
- `distribution`: an entry point installed as a package: its distribution's name and version;
- `declared`: a version the spec declares (`version:`), taken on trust;
- `file`: SHA-256 of one artifact (a checkpoint);
- `image`: a Docker image's content id (`sha256:...` of its config), resolved at submission;
  the worker runs that id, whatever the tag names by then;
- `builtin`: Arena's own agents, covered by the engine fingerprint;
- `unversioned`: nothing to fingerprint (an HTTP agent with no declared version): a fresh nonce,
  so every submission is new work and is always rerun.
"""

from __future__ import annotations

import ast
import errno
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import uuid
from functools import cache
from pathlib import Path
from stat import S_ISREG
from typing import BinaryIO, Literal

from pydantic import BaseModel, ConfigDict

FingerprintKind = Literal[
    "source",
    "distribution",
    "declared",
    "file",
    "builtin",
    "unversioned",
    "commit",
    "image",
    "model",
]
# Folders never part of an agent's source: caches and version-control data.
SKIPPED_DIRS = {"__pycache__", ".git", ".hg", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
ENGINE_PACKAGES = ("scoring", "workers", "tasks")
# pyproject.toml's packages and package data
ENGINE_SUFFIXES = frozenset({".py", ".yaml", ".gitconfig"})
# The largest artifact (a checkpoint) Arena reads or hashes: a Mario checkpoint is megabytes
# (NatureCNN: 6.9 MB), the largest SB3 policies a few hundred; past this a file is refused
# before a byte of it is read (docs/security.md).
MAX_ARTIFACT_BYTES = 2 << 30


class AgentFingerprint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FingerprintKind
    digest: str  # what identity hashes: a hex digest, a version, or a nonce
    detail: str = ""  # for people: what was hashed or why nothing could be


class FingerprintError(ValueError):
    """The agent cannot be located to fingerprint it; the message says what to do."""


def agent_search_path() -> str:
    """The one import rule (docs/agents.md): the working directory first, as `python -m` does,
    then PYTHONPATH, then installed packages. The same for in-process and worker processes."""
    cwd = os.getcwd()
    if not sys.path or sys.path[0] != cwd:
        if cwd in sys.path:
            sys.path.remove(cwd)
        sys.path.insert(0, cwd)
    return cwd


def _hash_tree(paths: list[Path]) -> tuple[str, int]:
    """SHA-256 over (relative name, content) of every file under `paths`, in sorted order."""
    digest = hashlib.sha256()
    count = 0
    for root in paths:
        files = [root] if root.is_file() else sorted(_files_under(root))
        for path in files:
            name = path.name if path == root else path.relative_to(root).as_posix()
            digest.update(name.encode() + b"\0")
            digest.update(_file_digest(path, path.stat().st_mtime_ns, path.stat().st_size))
            count += 1
    return digest.hexdigest(), count


def _files_under(root: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.startswith(".")]
        found += [Path(folder, f) for f in files if not f.endswith((".pyc", ".pyo"))]
    return found


@cache
def _file_digest(path: Path, mtime_ns: int, size: int) -> bytes:
    """Cached by (path, mtime, size): a worker re-checks an unchanged package for free."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.digest()


def open_artifact(path: str | Path, max_bytes: int = MAX_ARTIFACT_BYTES) -> BinaryIO:
    """`path` opened for reading, once it is a regular file of at most `max_bytes`; OSError
    otherwise. Opened without blocking (a FIFO would wait for a writer) and checked on the
    open descriptor, so what is read is what was checked (a device, a folder, a file swapped
    in after a stat: refused)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        stat = os.fstat(fd)
        if not S_ISREG(stat.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if stat.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"over {max_bytes:,} bytes")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_artifact(path: str | Path, max_bytes: int = MAX_ARTIFACT_BYTES) -> bytes:
    """A regular file's bytes, at most `max_bytes` (OSError past them: a file that grew)."""
    with open_artifact(path, max_bytes) as handle:
        # read(n) allocates n bytes up front: ask for what the file holds, then for what it
        # grew by since (a file being written), never past the cap.
        data = handle.read(os.fstat(handle.fileno()).st_size + 1)
        while len(data) <= max_bytes and (more := handle.read(1 << 20)):
            data += more
    if len(data) > max_bytes:
        raise OSError(errno.EFBIG, f"over {max_bytes:,} bytes")
    return data


@cache
def _artifact_digest(path: Path, mtime_ns: int, size: int, ctime_ns: int) -> bytes:
    digest = hashlib.sha256()
    read = 0
    with open_artifact(path) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            read += len(block)
            if read > MAX_ARTIFACT_BYTES:
                raise OSError(errno.EFBIG, f"over {MAX_ARTIFACT_BYTES:,} bytes")
            digest.update(block)
    return digest.digest()


def file_fingerprint(path: str | Path) -> AgentFingerprint:
    """One artifact, e.g. a Stable-Baselines3 checkpoint: a regular file of at most
    MAX_ARTIFACT_BYTES (never a device, a FIFO or a folder), read with that bound."""
    p = Path(path)
    try:
        resolved = p.resolve()
        stat = resolved.stat()
        digest = _artifact_digest(resolved, stat.st_mtime_ns, stat.st_size, stat.st_ctime_ns)
    except (OSError, RuntimeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise FingerprintError(f"cannot read {path} ({why})") from None
    return AgentFingerprint(kind="file", digest=digest.hex(), detail=f"sha256 of {p.name}")


def declared_fingerprint(version: str) -> AgentFingerprint:
    return AgentFingerprint(kind="declared", digest=version, detail="version declared in the spec")


def commit_fingerprint(commit: str, detail: str) -> AgentFingerprint:
    """A race agent is its branch's commit, resolved at submission."""
    return AgentFingerprint(kind="commit", digest=commit, detail=detail)


def unversioned_fingerprint(why: str) -> AgentFingerprint:
    return AgentFingerprint(kind="unversioned", digest=uuid.uuid4().hex, detail=why)


def builtin_fingerprint(name: str) -> AgentFingerprint:
    return AgentFingerprint(kind="builtin", digest=engine_fingerprint(), detail=f"built-in {name}")


def _module_location(module: str) -> list[Path]:
    """Where `module` (a dotted name) lives, found without importing (nothing runs at submit):
    the folder(s) of its top-level package, or its one file."""
    top = module.split(".")[0]
    agent_search_path()
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError) as exc:
        raise FingerprintError(f"cannot find module {top!r}: {exc}") from None
    if spec is None:
        raise FingerprintError(
            f"cannot find module {top!r} (looked in the working directory {os.getcwd()}, "
            "PYTHONPATH and installed packages)"
        )
    if spec.submodule_search_locations:
        # A namespace package lists a folder once per sys.path entry that reaches it (the
        # working directory, '' and an editable install may all be the same folder): each
        # folder once, or the digest would depend on how sys.path happens to look.
        roots = list(
            dict.fromkeys(Path(os.path.realpath(p)) for p in spec.submodule_search_locations)
        )
        _check_submodule(module, roots)
        return roots
    if spec.origin and os.path.isfile(spec.origin):
        if "." in module:
            raise FingerprintError(f"{top!r} is a module, not a package: no {module!r}")
        return [Path(spec.origin)]
    raise FingerprintError(f"module {top!r} has no source files to fingerprint")


def _check_submodule(module: str, roots: list[Path]) -> None:
    parts = module.split(".")[1:]
    if not parts:
        return
    rel = Path(*parts)
    if not any((r / rel).with_suffix(".py").is_file() or (r / rel).is_dir() for r in roots):
        raise FingerprintError(f"cannot find module {module!r} (no {rel}.py in {roots[0]})")


def _module_file(module: str, roots: list[Path]) -> Path | None:
    rel = Path(*module.split(".")[1:]) if "." in module else Path()
    for root in roots:
        if root.is_file():
            return root
        for candidate in (root / rel / "__init__.py", (root / rel).with_suffix(".py")):
            if candidate.is_file() and candidate.suffix == ".py":
                return candidate
    return None


def check_entry_point(entry_point: str) -> None:
    """Refuse, before anything runs, an entry point whose module cannot be found or that
    plainly does not define its factory — read from the source, without importing it (so no
    agent code runs at submission). Modules that build names dynamically pass."""
    module, attribute = entry_point.split(":")
    roots = _module_location(module)
    if _distribution(module.split(".")[0], roots):
        return
    path = _module_file(module, roots)
    if path is None:
        return
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError) as exc:
        raise FingerprintError(f"{path} does not parse: {exc}") from None
    names = _top_level_names(tree.body)
    if attribute not in names and "*" not in names and "__getattr__" not in names:
        raise FingerprintError(f"module {module!r} has no {attribute!r} ({path})")


def _top_level_names(body: list[ast.stmt]) -> set[str]:
    """Names a module binds at its top level, through if/try/with blocks."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for item in getattr(node, block, []):
                    inner = item.body if isinstance(item, ast.ExceptHandler) else [item]
                    names |= _top_level_names(inner)
    return names


def _distribution(top: str, roots: list[Path]) -> str | None:
    """`name==version` when the package is installed (not a checkout on the path)."""
    if not any(part in {"site-packages", "dist-packages"} for part in roots[0].parts):
        return None
    names = importlib.metadata.packages_distributions().get(top)
    if not names:
        return None
    return f"{names[0]}=={importlib.metadata.version(names[0])}"


def source_fingerprint(entry_point: str) -> AgentFingerprint:
    """The files of the entry point's top-level package (every file: code and data it loads)."""
    module = entry_point.split(":")[0]
    roots = _module_location(module)
    top = module.split(".")[0]
    installed = _distribution(top, roots)
    if installed:
        return AgentFingerprint(kind="distribution", digest=installed, detail=f"installed {top}")
    digest, count = _hash_tree(roots)
    where = roots[0] if len(roots) == 1 else f"{len(roots)} folders"
    return AgentFingerprint(kind="source", digest=digest, detail=f"{count} files of {where}")


@cache
def engine_fingerprint() -> str:
    """Arena's own code that runs and scores units (scoring/, workers/, tasks/): results of
    another version of it are other results."""
    here = Path(__file__).resolve().parent.parent
    # What an install ships (modules and their data), so a worker image built from this tree
    # has the same fingerprint: build files beside the code (workers/docker/) do not count.
    shipped = [
        path
        for name in ENGINE_PACKAGES
        for path in sorted(_files_under(here / name))
        if path.suffix in ENGINE_SUFFIXES
    ]
    digest = hashlib.sha256()
    for path in shipped:
        digest.update(path.relative_to(here).as_posix().encode() + b"\0")
        digest.update(_file_digest(path, path.stat().st_mtime_ns, path.stat().st_size))
    return digest.hexdigest()[:16]
