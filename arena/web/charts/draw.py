"""One picture drawn: its figure saved as SVG or PNG (deterministic bytes for the same numbers:
a fixed hash salt, no date, no software stamp), and an SVG given a <title>, its numbers as JSON
in <desc id="arena-numbers"> and a <title> in each element that has a gid, so a reader, a
screen reader or a test can read what the picture shows."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import escape

import matplotlib
from pydantic import BaseModel

from arena.web.charts import boards, runs, series
from arena.web.charts.cache import Format
from arena.web.charts.style import RC

PNG_DPI = 110
DRAWINGS: dict[str, Callable[[Any], boards.Drawn]] = {
    "episodes": boards.episodes,
    "trend": boards.trend,
    "bars": boards.bars,
    "heatmap": boards.heatmap,
    "race": runs.race,
    "timeline": runs.timeline,
    "series": series.learning_curve,
}
# matplotlib is not thread-safe (its font cache and text layout are shared): the API's worker
# threads draw one figure at a time. A drawing takes 20-150 ms and is kept (cache.py).
_drawing = threading.Lock()


def draw(kind: str, fmt: Format, numbers: BaseModel) -> bytes:
    """The picture `kind` of `numbers` as SVG or PNG bytes."""
    out = io.BytesIO()
    with _drawing, matplotlib.rc_context(RC):
        fig, title, titles = DRAWINGS[kind](numbers)
        if fmt == "svg":
            fig.savefig(out, format="svg", metadata={"Date": None})
        else:
            fig.savefig(out, format="png", dpi=PNG_DPI, metadata={"Software": None})
    if fmt == "png":
        return out.getvalue()
    return described(out.getvalue().decode(), title, numbers.model_dump_json(), titles).encode()


def described(svg: str, title: str, numbers: str, titles: dict[str, str]) -> str:
    """The SVG with its title and numbers first in the root, and each titled group's title
    first in the group (matplotlib writes an artist with a gid as <g id="gid">)."""
    opening = svg.index(">", svg.index("<svg")) + 1
    head = f'\n <title>{escape(title)}</title>\n <desc id="arena-numbers">{escape(numbers)}</desc>'
    svg = svg[:opening] + head + svg[opening:]
    for name, text in titles.items():
        svg = svg.replace(f'<g id="{name}">', f'<g id="{name}">\n<title>{escape(text)}</title>', 1)
    return svg
