"""A board's pictures: a Mario board's episodes, any board's trend, a workload's bars, the
Alympics heat map. Each function draws the numbers of arena/service/pictures.py and returns
the figure, its title and a <title> per element (by gid) for the SVG."""

from __future__ import annotations

import math

from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

from arena.service.pictures import BarsPicture, EpisodesPicture, HeatPicture
from arena.service.trends import AgentTrend, TrendPicture
from arena.web.charts.style import (
    MAX_ROWS_LABELLED,
    MUTED,
    PALETTE,
    agent_axis,
    colour,
    figure,
    gid,
    label_in,
    no_data,
    place,
)

Drawn = tuple[Figure, str, dict[str, str]]  # the figure, its title, gid -> element title
DAY_S = 86400.0


def jitter(count: int) -> list[float]:
    """Fixed vertical offsets of a strip's dots (the same picture for the same numbers)."""
    return [((k % 5) - 2) * 0.08 for k in range(count)]


def episodes(pic: EpisodesPicture) -> Drawn:
    """Each agent's episode scores as a strip (a box behind from four episodes on), its success
    rate with the Wilson interval, and its average max x; agents in rank order."""
    fig = figure(10, len(pic.agents))
    labels = [a.agent + (f" ({a.failed} failed)" if a.failed else "") for a in pic.agents]
    place(fig, label_in(labels), top_in=0.45, bottom_in=0.45)
    strip, success, reach = fig.subplots(1, 3, sharey=True, width_ratios=[3.2, 1.4, 1.4])
    titles = episode_strip(strip, pic)
    rows = range(len(pic.agents))
    rates = [a.success_rate * 100 for a in pic.agents]
    below = [max(a.success_rate - a.success_ci95[0], 0) * 100 for a in pic.agents]
    above = [max(a.success_ci95[1] - a.success_rate, 0) * 100 for a in pic.agents]
    drawn = success.errorbar(rates, rows, xerr=[below, above], fmt="o", capsize=3, markersize=4)
    drawn.lines[0].set_gid("success")
    titles["success"] = "success rate [Wilson 95%]: " + "; ".join(
        f"{a.agent} {a.success_rate:.4g} [{a.success_ci95[0]:.4g}, {a.success_ci95[1]:.4g}]"
        for a in pic.agents
    )
    bars = reach.barh(rows, [a.avg_max_x for a in pic.agents], height=0.55, color=PALETTE[0])
    for a, patch in zip(pic.agents, bars.patches, strict=True):
        patch.set_gid(gid(f"max-x-{a.agent}"))
        titles[gid(f"max-x-{a.agent}")] = f"{a.agent}: average max x {a.avg_max_x:g}"
    reach.bar_label(bars, [f" {a.avg_max_x:,.0f}" for a in pic.agents], fontsize=7)
    agent_axis(strip, labels)
    strip.set_xlabel("arena score of each episode (★ the best)")
    success.set_xlim(0, 100)
    success.set_xlabel("success rate, % [Wilson 95%]")
    reach.set_xlabel("average max x (pixels)")
    reach.margins(x=0.3)
    title = f"{pic.board}: episodes"
    fig.suptitle(title, fontweight="bold")
    return fig, title, titles


def episode_strip(ax: Axes, pic: EpisodesPicture) -> dict[str, str]:
    """The episodes' scores, a row of dots per agent, its best one a star."""
    rows = range(len(pic.agents))
    boxed = [i for i in rows if len(pic.agents[i].scores) >= 4]
    if boxed:  # one call for every box: a call each costs 15 ms
        grey = {"color": MUTED}
        ax.boxplot(
            [pic.agents[i].scores for i in boxed],
            positions=boxed,
            orientation="horizontal",
            widths=0.55,
            showfliers=False,
            manage_ticks=False,
            medianprops=grey,
            boxprops=grey,
            whiskerprops=grey,
            capprops=grey,
        )
    titles = {}
    for i, a in enumerate(pic.agents):
        heights = [i + d for d in jitter(len(a.scores))]
        dots = ax.scatter(a.scores, heights, s=12, color=colour(i))
        dots.set_gid(gid(f"episodes-{a.agent}"))
        titles[gid(f"episodes-{a.agent}")] = (
            f"{a.agent}: {len(a.scores)} episodes played, {a.failed} failed; best {a.best:g}; "
            "scores " + ", ".join(f"{s:g}" for s in a.scores)
        )
    best = [a.best for a in pic.agents]
    colours = [colour(i) for i in rows]
    ax.scatter(best, rows, marker="*", s=80, color=colours, edgecolor="black", zorder=4)
    return titles


def trend(pic: TrendPicture) -> Drawn:
    """One line per agent: its score at each evaluation, and the band of the workload's
    interval (its statistic dashed) where it declares one. One agent: a small picture for a
    board's row."""
    single = len(pic.agents) == 1
    fig = Figure(figsize=(3.4, 1.4) if single else (8, 3.8))
    if single:
        place(fig, 0.4, bottom_in=0.3, top_in=0.1, right_in=0.1)
    else:
        place(fig, 0.7, top_in=0.4, right_in=0.3 + label_in([t.agent for t in pic.agents]))
    ax = fig.add_subplot()
    titles: dict[str, str] = {}
    for i, t in enumerate(pic.agents):
        when = [p.at / DAY_S for p in t.points]  # matplotlib's dates: days since 1970
        titles |= trend_band(ax, pic, t, when, colour(i))
        (line,) = ax.plot(
            when,
            [p.score for p in t.points],
            marker="o",
            markersize=3,
            color=colour(i),
            label=pic.score if single else t.agent,
        )
        line.set_gid(gid(f"trend-{t.agent}"))
        titles[gid(f"trend-{t.agent}")] = f"{t.agent}: {pic.score} " + ", ".join(
            f"{p.score:g}" for p in t.points
        )
    locator = AutoDateLocator(minticks=2, maxticks=4 if single else 8)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    dates = ConciseDateFormatter(locator, show_offset=not single)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_formatter(dates)
    if single:  # a row's picture: the page says what its lines are (a legend costs 15 ms)
        ax.tick_params(labelsize=6)
        title = f"{pic.agents[0].agent} on {pic.board}"
    else:
        ax.set_ylabel(pic.score)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), ncols=1 + len(pic.agents) // 20)
        title = f"{pic.board}: trend" + (f" (band: {pic.interval})" if pic.interval else "")
        ax.set_title(title)
    return fig, title, titles


def trend_band(
    ax: Axes, pic: TrendPicture, t: AgentTrend, when: list[float], shade: str
) -> dict[str, str]:
    """The interval's statistic (dashed, with its whiskers) and its 95% band, shaded."""
    banded = [
        (w, p.point, p.ci95)
        for w, p in zip(when, t.points, strict=True)
        if p.point is not None and p.ci95 is not None
    ]
    if not banded:
        return {}
    xs = [w for w, _, _ in banded]
    lows, highs = [ci[0] for _, _, ci in banded], [ci[1] for _, _, ci in banded]
    points = [point for _, point, _ in banded]
    if len(banded) > 1:
        ax.fill_between(xs, lows, highs, color=shade, alpha=0.18, linewidth=0)
        (stat,) = ax.plot(xs, points, "--", color=shade, alpha=0.7, linewidth=1)
    else:  # one evaluation: its interval as whiskers (a band needs two)
        below, above = [max(points[0] - lows[0], 0)], [max(highs[0] - points[0], 0)]
        drawn = ax.errorbar(xs, points, yerr=[below, above], fmt="s", color=shade, capsize=3)
        stat = drawn.lines[0]
    stat.set_gid(gid(f"band-{t.agent}"))
    return {
        gid(f"band-{t.agent}"): f"{t.agent}: {pic.interval} "
        + "; ".join(f"{point:g} [{ci[0]:g}, {ci[1]:g}]" for _, point, ci in banded)
    }


def bars(pic: BarsPicture) -> Drawn:
    """Each agent's 0-100 values side by side (Alympics' categories, a race's dimensions)."""
    fig = figure(8, len(pic.agents), row_in=0.11 * max(len(pic.columns), 1) + 0.12)
    place(fig, label_in([a.agent for a in pic.agents]), top_in=0.7)
    ax = fig.add_subplot()
    keys = list(pic.columns)
    height = 0.8 / max(len(keys), 1)
    titles = {}
    for j, key in enumerate(keys):
        offset = (j - (len(keys) - 1) / 2) * height
        values = [a.values.get(key) for a in pic.agents]
        drawn = ax.barh(
            [i + offset for i in range(len(pic.agents))],
            [v if v is not None else 0 for v in values],
            height=height * 0.9,
            color=colour(j),
            label=pic.columns[key],
        )
        for a, patch, value in zip(pic.agents, drawn.patches, values, strict=True):
            name = gid(f"bar-{a.agent}-{key}")
            patch.set_gid(name)
            titles[name] = f"{a.agent}: {pic.columns[key]} {value if value is not None else '—'}"
    agent_axis(ax, [a.agent for a in pic.agents])
    ax.set_xlim(0, 100)
    ax.set_xlabel("score, 0-100")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=len(keys))
    title = f"{pic.board}: " + ", ".join(pic.columns.values()).lower()
    fig.suptitle(title, fontweight="bold")
    return fig, title, titles


def heatmap(pic: HeatPicture) -> Drawn:
    """Agents x (category, game): the rubric's normalised per-game values, 0-100."""
    width = max(5.0, 0.55 * len(pic.columns) + 2.5)
    fig = figure(width, max(len(pic.agents), 3), row_in=0.35, extra_in=1.9)
    place(fig, label_in(pic.agents), bottom_in=1.3, top_in=0.6, right_in=1.2)
    ax = fig.add_subplot()
    titles: dict[str, str] = {}
    if not pic.columns:
        no_data(ax, "no per-game values")
        return fig, f"{pic.board}: per-game values", titles
    grid = [[math.nan if v is None else v for v in row] for row in pic.values]
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    fig.colorbar(image, ax=ax, label="normalised, 0-100", shrink=0.8, pad=0.03)
    ax.set_xticks(range(len(pic.columns)), [g for _, g in pic.columns], rotation=40, ha="right")
    agent_axis(ax, pic.agents)
    categories = [c for c, _ in pic.columns]
    for j, category in enumerate(categories):
        if j == 0 or categories[j - 1] != category:
            ax.axvline(j - 0.5, color="white", linewidth=2)
            ax.annotate(category, (j - 0.4, 1.01), xycoords=("data", "axes fraction"), va="bottom")
    if len(pic.agents) <= MAX_ROWS_LABELLED:
        for i, row in enumerate(pic.values):
            for j, value in enumerate(row):
                if value is None:
                    continue
                name = gid(f"heat-{pic.agents[i]}-{pic.columns[j][0]}-{pic.columns[j][1]}")
                text = ax.text(
                    j, i, f"{value:.0f}", ha="center", va="center", fontsize=6,
                    color="black" if value > 60 else "white",
                )  # fmt: skip
                text.set_gid(name)
                titles[name] = f"{pic.agents[i]}: {pic.columns[j][0]} {pic.columns[j][1]} {value:g}"
    title = f"{pic.board}: normalised per-game values by category"
    fig.suptitle(title, fontweight="bold")
    return fig, title, titles
