"""How a race's results read: the rubric's CLI layout (one aligned row per agent, the winner,
the merge hint, the verdict, the notes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scoring._common import format_half_up
from scoring.race import DIMENSIONS, ScoredAgent, Verdict, format_composite, tied_at_top

_LABELS = ("BUILD", "TESTS", "LINT", "DIFF", "SPEED")


def _cell(label: str, value: float | None, build_failed: bool) -> str:
    if value is None or (build_failed and label in ("TESTS", "LINT")):
        return f"[{label}: --]"
    if label == "BUILD":
        return f"[{label}: {'✓' if value > 0 else '✗'}]"
    return f"[{label}: {format_half_up(value)}]"


def format_race_results(
    ranked: Sequence[ScoredAgent],
    task: str | None = None,
    verdict: Verdict | None = None,
    branches: Mapping[str, str] | None = None,
    merge_hint: str | None = None,
) -> str:
    """The rubric's CLI layout: one aligned row per agent (an unmeasured dimension, or tests and
    lint after a failed build, show '--'), the winner (with its branch when known), the merge
    hint, the verdict, then any notes."""
    title = f'Race Results — Task: "{task}"' if task else "Race Results"
    name_width = max([len(r.name) for r in ranked] or [0]) + 2
    rows: list[list[str]] = []
    for r in ranked:
        s = r.scores
        failed = s.build is not None and s.build == 0
        rows.append(
            [
                _cell(label, getattr(s, dim), failed)
                for label, dim in zip(_LABELS, DIMENSIONS, strict=True)
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(_LABELS))] if rows else []
    lines = [title, "=" * max(44, len(title)), ""]
    for r, row in zip(ranked, rows, strict=True):
        cells = " ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        row_text = f"  #{r.rank:<2} {r.name:<{name_width}} {format_composite(r.composite):>5} / 100"
        lines.append(f"{row_text}    {cells}".rstrip())
    tied = tied_at_top(ranked)
    if len(tied) > 1:
        shown = format_composite(ranked[0].composite)
        lines += ["", f"Winner: none: {', '.join(tied)} tie at {shown} / 100 (a person picks)"]
    elif ranked:
        winner = ranked[0].name
        branch = (branches or {}).get(winner)
        lines += ["", f"Winner: {winner}" + (f" (branch: {branch})" if branch else "")]
        if merge_hint:
            lines.append(merge_hint)
    if verdict is not None:
        lines.append(f"Verdict: {verdict.value}")
    notes = [f"  {r.name}: {note}" for r in ranked for note in r.notes]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)
