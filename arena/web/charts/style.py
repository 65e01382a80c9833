"""What every picture shares: matplotlib's settings for deterministic SVG (a fixed hash salt,
text kept as text, no date), the colours (Okabe-Ito: told apart by colour-blind readers; the
page's green, yellow and red for a 0-100 score's band) and a figure sized to its rows."""

from __future__ import annotations

import re
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

RC: dict[Any, Any] = {
    "svg.hashsalt": "arena",  # ids of clip paths and markers: the same bytes for the same numbers
    "svg.fonttype": "none",  # text as <text>: smaller, searchable, readable by a test
    "font.family": "DejaVu Sans",  # matplotlib's own font: the same metrics on every machine
    "font.size": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 9,
    "axes.titleweight": "bold",
    "legend.fontsize": 7,
    "legend.frameon": False,
    "date.epoch": "1970-01-01T00:00:00",  # a trend's x: days since then (its points' `at`)
}
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
GOOD, FAIR, POOR = "#2e9e44", "#e0b020", "#d0342c"  # the page's bands (html.band)
MUTED = "#888888"
ROW_IN = 0.28  # inches per agent row
MAX_ROWS_LABELLED = 30  # beyond, a heat map's cells lose their numbers


def gid(text: str) -> str:
    """An XML id made of names: letters, digits, '.', '_', '-' (anything else becomes '_')."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def band_colour(value: float | None) -> str:
    if value is None:
        return POOR
    return GOOD if value > 80 else FAIR if value >= 50 else POOR


def figure(width_in: float, rows: int, row_in: float = ROW_IN, extra_in: float = 1.1) -> Figure:
    """A figure `width_in` wide, tall enough for `rows` rows of `row_in` inches. Its margins
    are set by `place`: matplotlib's constrained layout measures every label and cost half the
    time of a 50-agent picture."""
    return Figure(figsize=(width_in, max(1.6, rows * row_in + extra_in)))


def label_in(labels: list[str], size_pt: float = 8) -> float:
    """About how wide the longest label is, in inches (DejaVu Sans: 0.6 em a character)."""
    return max((len(t) for t in labels), default=0) * size_pt * 0.6 / 72 + 0.15


def place(
    fig: Figure, left_in: float, bottom_in: float = 0.5, top_in: float = 0.5, right_in: float = 0.2
) -> None:
    """Margins in inches, whatever the figure's size."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=min(left_in / width, 0.6),
        right=1 - right_in / width,
        bottom=bottom_in / height,
        top=1 - top_in / height,
        wspace=0.08,
    )


def agent_axis(ax: Axes, agents: list[str]) -> None:
    """Agents down the y axis in rank order, the best at the top."""
    ax.set_yticks(range(len(agents)), agents)
    ax.set_ylim(len(agents) - 0.5, -0.5)
    ax.tick_params(axis="y", length=0)


def no_data(ax: Axes, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color=MUTED)
    ax.set_xticks([])
    ax.set_yticks([])
