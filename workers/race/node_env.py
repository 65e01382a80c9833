"""A race's Node environment (docs/race.md, "Node repositories"): a repository with a
package.json gets its dependencies from its committed lockfile, `npm ci --ignore-scripts`, run
by the worker's npm (from the registry or cache it is configured with: npm_config_registry,
npm_config_cache, npm_config_offline), never the branch's own install scripts.

- Refused, in one line, when there is no package-lock.json (or npm-shrinkwrap.json): without
  one `npm install` resolves whatever the registry has newest, and a race would measure a
  different tree whenever it runs.
- The lockfile decides what is fetched, so it is checked first as requirements by name are for
  Python (requirements.by_name): every package comes from the npm registry with an integrity
  hash; a link, a `file:` path, a git or other URL is refused, never fetched or read.
- Kept in the race's environment cache (env_cache.py) by the digest of package.json, the
  lockfile and the node and npm versions: every check with the same lockfile shares one
  install, built once under a lock. Each check gets its own copy in its checkout
  (`node_modules`, as `npm ci` would leave it), so no command can change the cached one, and
  `node_modules/.bin` first on the commands' PATH (jest, eslint, tsc by name).
- What it holds is on record: each top-level package's name and version, read from
  `node_modules/*/package.json` with no link followed, bounded, and node's, npm's and the
  named tools' versions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from workers.race.env_cache import (
    READY,
    locked,
    stored_size,
    write_marker,
)
from workers.race.environment import (
    FAILED_KEPT_S,
    TAIL_CHARS,
    CacheBounds,
    EnvironmentRun,
    tidy_cache,
    within_disk_limit,
)
from workers.race.requirements import EnvironmentFailed, declaring_files
from workers.sandbox import CommandResult, SandboxSession
from workers.sandbox.base import DEFAULT_MAX_OUTPUT_BYTES

LOCKFILES = ("npm-shrinkwrap.json", "package-lock.json")  # npm's order: the shrinkwrap wins
NODE_DECLARING = ("package.json", *LOCKFILES)  # what a Node environment is made from
MAX_LOCKFILE_BYTES = 16 << 20
MAX_PACKAGE_JSON_BYTES = 256 << 10
MAX_PACKAGES = 5_000
INSTALL_TIMEOUT_S = 900.0
DEFAULT_REGISTRY = "https://registry.npmjs.org/"
_NAME = re.compile(r"^(?:@[a-z0-9][a-z0-9._~-]{0,100}/)?[a-z0-9][a-z0-9._~-]{0,213}$")
_VERSION = re.compile(r"^[0-9A-Za-z.+-]{1,64}$")
_WORD = re.compile(r"[A-Za-z0-9@][A-Za-z0-9@/._-]*")


def declares_node(checkout: Path) -> bool:
    """Whether the checkout is a Node project: a package.json at its root (not a link)."""
    path = checkout / "package.json"
    return path.is_file() and not path.is_symlink()


def wants_node(checkout: Path) -> bool:
    """Whether the checkout gets a Node environment: a package.json with a lockfile, or with
    none where nothing of Python is declared (then refused: `lockfile`). A Python project's
    stray package.json (a formatter's settings) without a lockfile is left alone."""
    if not declares_node(checkout):
        return False
    has_lock = any((checkout / n).is_file() and not (checkout / n).is_symlink() for n in LOCKFILES)
    return has_lock or not declaring_files(checkout)


def lockfile(checkout: Path) -> Path:
    """The checkout's committed lockfile, or EnvironmentFailed in one line."""
    for name in LOCKFILES:
        path = checkout / name
        if path.is_file() and not path.is_symlink():
            return path
    raise EnvironmentFailed(
        "package.json has no package-lock.json: a Node environment is installed only from a "
        "committed lockfile (npm ci); commit the one `npm install` writes"
    )


def _read_json(path: Path, limit: int) -> Any:
    if path.stat().st_size > limit:
        raise EnvironmentFailed(f"{path.name}: over {limit} bytes")
    try:
        return json.loads(path.read_bytes())
    except ValueError as exc:
        raise EnvironmentFailed(f"{path.name}: not valid JSON ({exc})") from None


def registry() -> str:
    """The registry the worker's npm installs from (npm_config_registry, else npm's own)."""
    names = ("npm_config_registry", "NPM_CONFIG_REGISTRY")  # npm reads either
    configured = next((os.environ[n] for n in names if os.environ.get(n)), "")
    return (configured or DEFAULT_REGISTRY).rstrip("/") + "/"


def check_lockfile(data: Any, name: str) -> None:
    """EnvironmentFailed unless every package the lockfile installs is the registry's, by
    `resolved` URL and `integrity` (lockfileVersion 2 or 3, whose `packages` list them all)."""
    if not isinstance(data, dict) or data.get("lockfileVersion") not in (2, 3):
        raise EnvironmentFailed(
            f"{name}: lockfileVersion must be 2 or 3 (written by npm 7 or later); "
            f"it is {data.get('lockfileVersion') if isinstance(data, dict) else None!r}"
        )
    packages = data.get("packages")
    if not isinstance(packages, dict):
        raise EnvironmentFailed(f"{name}: no `packages` table")
    sources = (DEFAULT_REGISTRY, registry())
    for where, entry in packages.items():
        if where == "":
            continue  # the project itself
        if not isinstance(entry, dict):
            raise EnvironmentFailed(f"{name}: packages[{where[:100]!r}] is not an object")
        if entry.get("inBundle") is True and not ({"link", "resolved"} & entry.keys()):
            continue  # nothing to fetch: inside its parent's tarball, which is checked
        resolved = entry.get("resolved")
        if resolved is None and _by_version(entry):
            continue  # npm's omit-lockfile-registry-resolved: the registry's, by name@version
        if entry.get("link") or not isinstance(resolved, str) or not resolved.startswith(sources):
            raise EnvironmentFailed(
                f"{name}: packages[{where[:100]!r}] is not from the npm registry "
                f"(resolved: {str(resolved)[:100]!r}); only registry packages are installed, "
                "not links, paths, git or other URLs"
            )
        if not isinstance(entry.get("integrity"), str):
            raise EnvironmentFailed(f"{name}: packages[{where[:100]!r}] has no integrity hash")


def _by_version(entry: dict[str, Any]) -> bool:
    """An entry with no `resolved` that npm fetches from the registry: a plain version, with
    an integrity hash."""
    version = entry.get("version")
    return (
        not entry.get("link")
        and isinstance(version, str)
        and _VERSION.match(version) is not None
        and isinstance(entry.get("integrity"), str)
    )


def _version_of(program: str) -> str:
    try:
        done = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        raise EnvironmentFailed(f"{program} is not installed on the worker") from None
    return done.stdout.strip().lstrip("v")


def node_key(checkout: Path, lock: Path, node: str, npm: str) -> str:
    """What a Node environment is made from: package.json, the lockfile, node's and npm's
    versions (a `node-` key beside the Python ones in the cache)."""
    digest = hashlib.sha256(f"node\0{node}\0{npm}\0{lock.name}\0".encode())
    digest.update((checkout / "package.json").read_bytes())
    digest.update(b"\0" + lock.read_bytes())
    return "node-" + digest.hexdigest()[:24]


def _npm_ci(env: Path, echo: Callable[[str], None]) -> str:
    """`npm ci --ignore-scripts` in `env` (holding package.json and the lockfile)."""
    argv = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--update-notifier=false"]
    echo(f"== npm: {' '.join(argv)}")
    try:
        done = subprocess.run(
            argv, cwd=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise EnvironmentFailed(f"npm ci took over {INSTALL_TIMEOUT_S:g}s") from None
    output = done.stdout + done.stderr
    echo(output.rstrip("\n"))
    if done.returncode != 0:
        lines = output.strip().splitlines()
        errors = [line for line in lines if line.startswith(("npm error", "npm ERR!"))][:3]
        errors = errors or lines[-3:]
        raise EnvironmentFailed(f"npm ci failed (exit {done.returncode}): {' '.join(errors)[:300]}")
    return output


def _package(path: Path) -> tuple[str, str] | None:
    """(name, version) from a package.json that is a plain file, not a link, read to a bound."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        try:
            data = json.loads(handle.read(MAX_PACKAGE_JSON_BYTES))
        except ValueError:
            return None
    if not isinstance(data, dict):
        return None
    name, version = data.get("name"), data.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        return None
    if not _NAME.match(name) or not _VERSION.match(version):
        return None
    return name, version


def installed_packages(modules: Path) -> dict[str, str]:
    """Each top-level package in the `node_modules` folder `modules` (name → version), by
    name: `*/package.json` and `@scope/*/package.json`, no link followed."""
    if modules.is_symlink() or not modules.is_dir():
        return {}
    folders: list[Path] = []
    for entry in sorted(modules.iterdir()):
        if entry.is_symlink() or not entry.is_dir() or entry.name.startswith("."):
            continue
        if entry.name.startswith("@"):
            folders += [p for p in sorted(entry.iterdir()) if p.is_dir() and not p.is_symlink()]
        else:
            folders.append(entry)
    found: dict[str, str] = {}
    for folder in folders[:MAX_PACKAGES]:
        named = _package(folder / "package.json")
        if named is not None:
            found.setdefault(*named)
    return dict(sorted(found.items()))


def tool_versions(commands: Sequence[str | None], installed: Mapping[str, str]) -> dict[str, str]:
    """The installed packages the commands name as a word (`jest`, `npx jest`, `eslint`)."""
    tools: dict[str, str] = {}
    for command in (c for c in commands if c):
        for word in _WORD.findall(command):
            if word in installed:
                tools[word] = installed[word]
    return tools


def _build(checkout: Path, lock: Path, env: Path, echo: Callable[[str], None]) -> str:
    shutil.rmtree(env, ignore_errors=True)  # a build that did not finish
    env.mkdir(parents=True)
    shutil.copyfile(checkout / "package.json", env / "package.json", follow_symlinks=False)
    shutil.copyfile(lock, env / lock.name, follow_symlinks=False)
    return _npm_ci(env, echo)


def node_environment(
    checkout: Path,
    cache_root: Path,
    echo: Callable[[str], None] = print,
    commands: Sequence[str | None] = (),
    bounds: CacheBounds | None = None,
) -> EnvironmentRun:
    """The Node environment of `checkout`: reused when one with its key is ready, else built
    now; copied into the checkout's `node_modules`. EnvironmentFailed names why it cannot be."""
    started = time.perf_counter()
    lock = lockfile(checkout)
    check_lockfile(_read_json(lock, MAX_LOCKFILE_BYTES), lock.name)
    _read_json(checkout / "package.json", MAX_PACKAGE_JSON_BYTES)  # valid JSON, bounded
    node, npm = _version_of("node"), _version_of("npm")
    key = node_key(checkout, lock, node, npm)
    cache_root.mkdir(parents=True, exist_ok=True)
    env, failed = cache_root / key, cache_root / f"{key}.failed"
    output, reused = "", True
    with locked(cache_root / f"{key}.lock"):
        if failed.is_file() and time.time() - failed.stat().st_mtime < FAILED_KEPT_S:
            raise EnvironmentFailed(f"{failed.read_text()} (this environment's build failed)")
        if (env / READY).is_file():
            (env / READY).touch()  # used now: not pruned (env_cache.UNUSED_KEPT_S)
            size = stored_size(env)
        else:
            reused = False
            echo(f"== environment {key}: building (npm ci from {lock.name})")
            try:
                output = _build(checkout, lock, env, echo)
            except EnvironmentFailed as exc:
                failed.write_text(str(exc)[:1000])
                raise
            size = within_disk_limit(env, failed, bounds or CacheBounds())
            write_marker(env / READY, key)
        place(env / "node_modules", checkout / "node_modules")
    installed = installed_packages(checkout / "node_modules")
    run = EnvironmentRun(
        kind="node",
        key=key,
        reused=reused,
        duration_s=time.perf_counter() - started,
        requirements=[lock.name],
        installed=installed,
        tools={"node": node, "npm": npm, **tool_versions(commands, installed)},
        size_bytes=size,
        output_tail=output[-TAIL_CHARS:],
    )
    if not reused:
        tidy_cache(cache_root, key, bounds or CacheBounds(), echo)
    how = "reused" if reused else f"built in {run.duration_s:.1f}s"
    echo(
        f"== environment {key}: {how} ({size / (1 << 20):.1f} MiB, {len(installed)} packages; "
        f"tools: {', '.join(f'{n} {v}' for n, v in run.tools.items())})"
    )
    return run


def place(modules: Path, target: Path) -> None:
    """A copy of the cached `modules` at `target` (the checkout's `node_modules`), whatever the
    branch committed there removed first, as `npm ci` removes it; links are copied as links."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    if modules.is_dir():
        shutil.copytree(modules, target, symlinks=True)


def with_node_bin(env: Mapping[str, str] | None, checkout: Path) -> dict[str, str]:
    """A command's environment (default: the worker's) with the checkout's
    `node_modules/.bin` first on PATH (at the checkout's real path, where the sandbox binds
    it)."""
    base = dict(os.environ if env is None else env)
    bin_dir = os.path.join(os.path.realpath(checkout), "node_modules", ".bin")
    base["PATH"] = os.pathsep.join([bin_dir, base.get("PATH") or os.defpath])
    return base


class NodeBinSession(SandboxSession):
    """`session`, each command run with the checkout's `node_modules/.bin` first on PATH."""

    def __init__(self, session: SandboxSession, checkout: Path) -> None:
        self.session, self.checkout = session, checkout

    def run(
        self,
        command: str,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        read_only: Sequence[str] = (),
    ) -> CommandResult:
        return self.session.run(
            command,
            timeout_s,
            env=with_node_bin(env, self.checkout),
            max_output_bytes=max_output_bytes,
            read_only=read_only,
        )

    def close(self) -> None:
        self.session.close()
