"""The architecture's one-way dependencies: scoring/ stays pure (no I/O, no other Arena package)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE_ALLOWED = {
    "__future__",
    "collections",
    "dataclasses",
    "decimal",
    "enum",
    "math",
    "random",
    "re",
    "statistics",
    "typing",
    "pydantic",
    "pydantic_core",
    "scoring",
    "xml",  # xml.etree parses a JUnit report given as a string (no entities, no I/O)
}
LAYERS = ["arena", "tasks", "workers", "scoring"]  # each may import only those to its right


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_scoring_imports_only_pure_modules():
    for path in sorted((ROOT / "scoring").rglob("*.py")):
        extra = imported_roots(path) - PURE_ALLOWED
        assert not extra, f"{path.relative_to(ROOT)} imports {sorted(extra)}"


def test_scoring_opens_no_files():
    for path in sorted((ROOT / "scoring").rglob("*.py")):
        calls = {
            node.func.id
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assert not calls & {"open", "print", "input", "exec", "eval"}, path


def test_dependencies_point_one_way():
    for index, layer in enumerate(LAYERS):
        forbidden = set(LAYERS[:index])
        for path in sorted((ROOT / layer).rglob("*.py")):
            wrong = imported_roots(path) & forbidden
            assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)} (points backwards)"


MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
# Where a longer piece reads better whole; each with its reason. Keep this short.
LONG_ALLOWED: dict[str, str] = {}


def long_code() -> list[str]:
    """Files over MAX_FILE_LINES and functions over MAX_FUNCTION_LINES in Arena's packages."""
    found = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            text = path.read_text()
            if text.count("\n") > MAX_FILE_LINES and name not in LONG_ALLOWED:
                found.append(f"{name}: {text.count(chr(10))} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    where = f"{name}:{node.name}"
                    if length > MAX_FUNCTION_LINES and where not in LONG_ALLOWED:
                        found.append(f"{where}: {length} lines")
    return found


def test_no_file_or_function_is_too_long_to_read():
    assert long_code() == []


if __name__ == "__main__":  # python -m tests.test_layout: what is too long now
    print("\n".join(long_code()) or "nothing too long")


# -- the import contracts (lint-imports, [tool.importlinter] in pyproject.toml) -------------------


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--no-cache", str(root / "pyproject.toml")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def copy_of_the_code(tmp_path: Path) -> Path:
    for name in [*LAYERS, "pyproject.toml"]:
        source = ROOT / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(source, tmp_path / name, ignore=ignore)
        else:
            shutil.copy(source, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize(
    ("module", "added", "broken"),
    [
        ("scoring/_common.py", "import tasks.validation", "The floors point one way"),
        ("arena/service/numbers.py", "import arena.web.html", "The front doors"),
        ("arena/cli/mario.py", "import arena.cli.races", "Command modules never import"),
        ("tasks/validation.py", "import tasks.spec", "No import cycles"),
    ],
)
def test_the_import_contracts_refuse_an_upward_import_or_a_cycle(
    tmp_path: Path, module: str, added: str, broken: str
) -> None:
    root = copy_of_the_code(tmp_path)
    path = root / module
    # Inside a function, where the import hid the cycle before the contracts.
    path.write_text(path.read_text() + f"\n\ndef _added() -> None:\n    {added}\n")
    result = lint_imports(root)
    assert result.returncode != 0, result.stdout
    assert broken in result.stdout.split("Broken contracts")[1], result.stdout


def test_the_code_keeps_its_import_contracts() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-3000:]
