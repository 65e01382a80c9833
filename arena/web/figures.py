"""The pictures on the page (docs/api.md, "Pictures"): each an <img> of its SVG route (the
page's Content-Security-Policy admits this origin's images, and an SVG loaded as an image
styles itself without the page admitting any inline style), in a <figure> that carries the
picture's numbers as JSON in `data-values` and links its SVG and PNG."""

from __future__ import annotations

from urllib.parse import quote

from pydantic import BaseModel

from arena.service.boards import Board
from arena.service.compare import series_picture
from arena.service.pictures import BoardKind, SeriesPicture, picture_of
from arena.service.trends import AgentTrend, TrendPicture
from arena.web.html import e
from tasks.store import Store

CAPTIONS: dict[str, str] = {
    "episodes": "Episode scores (★ the best), success rate [Wilson 95%], average max x",
    "bars": "Each agent's scores side by side",
    "heatmap": "Normalised per-game values (0-100), by category",
    "race": "Each agent's five dimensions and composite",
    "timeline": "Each unit on its worker, from start to end",
    "series": "Learning curve: each checkpoint's IQM [bootstrap 95%] and best score, success "
    "rate [Wilson 95%], by training steps; △ (▽): better (worse) than the previous checkpoint, "
    "its P(beats previous) 95% interval excluding 0.5",
}


def figure(url: str, kind: str, numbers: BaseModel, caption: str, alt: str) -> str:
    """`url`: the picture's SVG route without its suffix (.svg / .png), then a query."""
    base, _, query = url.partition("?")
    tail = f"?{query}" if query else ""
    svg, png = f"{base}.svg{tail}", f"{base}.png{tail}"
    values = e(numbers.model_dump_json())
    return (
        f'<figure class="picture {e(kind)}" data-kind="{e(kind)}" data-values="{values}">'
        f'<img src="{e(svg)}" alt="{e(alt)}" loading="lazy">'
        f"<figcaption>{e(caption) + ' · ' if caption else ''}"
        f'<a href="{e(svg)}">SVG</a> · <a href="{e(png)}">PNG</a></figcaption></figure>'
    )


def chart_url(board: str, kind: str, agent: str | None = None, run: str | None = None) -> str:
    query = f"?agent={quote(agent, safe='')}" if agent is not None else ""
    query = f"?run={quote(run, safe='')}" if run is not None else query
    return f"/leaderboards/{quote(board, safe='')}/charts/{kind}{query}"


def board_figures(db: Store, board: Board, kinds: list[BoardKind]) -> str:
    """The board's pictures but its trends (each row has its own), a learning curve per run."""
    shown = [k for k in kinds if k not in ("trend", "series")]
    return "".join(
        figure(
            chart_url(board.name, kind),
            kind,
            picture_of(db, board, kind),
            CAPTIONS[kind],
            f"{board.name}: {kind}",
        )
        for kind in shown
    ) + (series_figures(db, board) if "series" in kinds else "")


def series_figures(db: Store, board: Board) -> str:
    """One learning curve per training run on the board (GET .../series/{run}'s numbers)."""
    whole = series_picture(db, board)
    return "".join(
        figure(
            chart_url(board.name, "series", run=one.run),
            "series",
            SeriesPicture(board=board.name, series=[one]),
            f"{one.run}: " + CAPTIONS["series"],
            f"{board.name}: learning curve of {one.run}, {len(one.points)} checkpoints",
        )
        for one in whole.series
    )


def trends(db: Store, board: Board, kinds: list[BoardKind]) -> tuple[dict[str, str], str]:
    """Agent -> its trend's figure, for its row (one reading of the board's history), and what
    the rows' trends draw (their pictures have no legend)."""
    if "trend" not in kinds:
        return {}, ""
    whole = picture_of(db, board, "trend")
    assert isinstance(whole, TrendPicture)
    band = f"; dashed, with its 95% band: {whole.interval}" if whole.interval else ""
    legend = f"Trend: the {whole.score.lower()} at each evaluation{band}."
    figures = {t.agent: trend_figure(board.name, whole, t) for t in whole.agents}
    return figures, f'<p class="legend">{e(legend)}</p>'


def trend_figure(board: str, whole: TrendPicture, agent: AgentTrend) -> str:
    """A row's trend: the picture links its SVG (a caption in every row would be noise)."""
    mine = whole.model_copy(update={"agents": [agent]})
    band = f", band: {whole.interval}" if whole.interval else ""
    alt = f"{agent.agent}: {whole.score} at each of {len(agent.points)} evaluations{band}"
    base, _, query = chart_url(board, "trend", agent.agent).partition("?")
    svg, values = f"{base}.svg?{query}", e(mine.model_dump_json())
    return (
        f'<figure class="picture trend" data-kind="trend" data-values="{values}">'
        f'<a href="{e(svg)}"><img src="{e(svg)}" alt="{e(alt)}" loading="lazy"></a></figure>'
    )


def replay_figure(url: str, agent: str) -> str:
    """The leader's best episode, played again (the replay route), inline on the page when a
    reader opens it: a replay runs the emulator (seconds; a few at once per API process), so
    a page view does not start one by itself."""
    return (
        f'<details class="best-episode"><summary>Watch the best episode of {e(agent)}</summary>'
        f'<figure class="picture best-episode" data-agent="{e(agent)}"><img src="{e(url)}" '
        f'alt="the best episode of {e(agent)}, replayed" loading="lazy">'
        f"<figcaption>The best episode of {e(agent)}, replayed from its action log · "
        f'<a href="{e(url)}">GIF</a></figcaption></figure></details>'
    )
