"""A race's environments on record (docs/race.md, "How versions are recorded"): what each
environment its checks ran in was made of and holds (every distribution's version, the tools'
the commands name), for the summary (`arena race results --json`) and the text layout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.workloads.base import UnitResult
from tasks.workloads.race_spec import BASELINE

# A check's Python environment and, for a package.json, its Node one (workers/race/node_env.py).
FIELDS = ("environment", "node_environment")
KEPT = ("groups", "requirements", "added_tools", "pinned_tools", "tools", "installed", "size_bytes")


def environments_of(results: Sequence[UnitResult]) -> dict[str, dict[str, Any]]:
    """Each environment the race's checks ran in, by key: who used it (the baseline as
    @baseline) and what it held."""
    found: dict[str, dict[str, Any]] = {}
    for result in sorted(results, key=lambda r: (r.agent != BASELINE, r.agent)):
        checked = (result.result or {}) if result.status == "ok" else {}
        for field in FIELDS:
            run = checked.get(field)
            if not isinstance(run, dict) or "key" not in run:
                continue
            entry = found.setdefault(
                run["key"], {"used_by": [], **{k: run.get(k) for k in KEPT if k in run}}
            )
            entry["used_by"].append(result.agent)
    return found


def format_environments(summary: dict[str, Any]) -> list[str]:
    """The layout's lines: each environment, who used it, its tools and what it holds."""
    lines: list[str] = []
    for key, env in (summary.get("environments") or {}).items():
        installed = env.get("installed") or {}
        size = f", {env['size_bytes'] / (1 << 20):.1f} MiB" if env.get("size_bytes") else ""
        groups = ", ".join(env.get("groups") or []) or "none"
        tools = ", ".join(f"{n} {v}" for n, v in (env.get("tools") or {}).items()) or "none"
        lines += [
            "",
            f"Environment {key} ({', '.join(env['used_by'])}): groups {groups}; "
            f"{len(installed)} distributions{size}",
            f"  tools: {tools}",
            "  installed: " + (", ".join(f"{n} {v}" for n, v in installed.items()) or "nothing"),
        ]
    return lines
