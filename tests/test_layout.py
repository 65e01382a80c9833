"""The architecture's one-way dependencies: scoring/ stays pure (no I/O, no other Arena package)."""

from __future__ import annotations

import ast
from pathlib import Path

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
