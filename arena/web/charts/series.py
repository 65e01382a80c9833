"""A board's learning curves (arena/service/series.py): for each training run, its checkpoints'
IQM with the bootstrap 95% band and best score (left), success rate with the Wilson 95% band
(middle) and the distance, the episodes' mean max x (right: how far right Mario got, which the
composite score mixes with steps and coins), against training steps: on a linear axis, or a
logarithmic one where that keeps the checkpoints further apart (1k, 20k, 3M: on a linear axis 1k
and 20k are drawn over each other). A checkpoint its episodes separate from the previous one
(`vs_previous`) is marked on its IQM: △ better, ▽ worse."""

from __future__ import annotations

import math
from itertools import pairwise

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from arena.service.pictures import SeriesPicture
from arena.service.series import Series, steps_label
from arena.web.charts.boards import Drawn
from arena.web.charts.style import colour, gid, place

Pair = list[float] | None


def learning_curve(pic: SeriesPicture) -> Drawn:
    fig = Figure(figsize=(10.5, 2.8))
    several = len(pic.series) > 1
    place(fig, 0.7, bottom_in=0.5, top_in=0.45, right_in=1.3 if several else 0.2)
    score, success, distance = fig.subplots(1, 3, width_ratios=[1.4, 1, 1])
    titles: dict[str, str] = {}
    for i, run in enumerate(pic.series):
        shade = colour(i)
        steps = [float(p.steps) for p in run.points]
        iqm = [(s, p.iqm_score, p.iqm_ci95) for s, p in zip(steps, run.points, strict=True)]
        titles |= banded(score, f"iqm-{run.run}", iqm, shade, run.run if several else "IQM")
        titles |= separated(score, run, shade)
        (best,) = score.plot(steps, [p.score for p in run.points], "*", color=shade, markersize=6)
        best.set_gid(gid(f"best-{run.run}"))
        titles[gid(f"best-{run.run}")] = f"{run.run}: best score " + ", ".join(
            f"{steps_label(p.steps)} {p.score:g}" for p in run.points
        )
        rates = [
            (s, pct(p.success_rate), pct_pair(p.success_ci95))
            for s, p in zip(steps, run.points, strict=True)
        ]
        titles |= banded(success, f"success-{run.run}", rates, shade, run.run)
        far: list[tuple[float, float | None, Pair]] = [
            (s, p.avg_max_x, None) for s, p in zip(steps, run.points, strict=True)
        ]
        titles |= banded(distance, f"max-x-{run.run}", far, shade, run.run)
    every = sorted({p.steps for run in pic.series for p in run.points})
    for ax in (score, success, distance):
        steps_axis(ax, every)
    score.set_ylabel("arena score")
    score.set_title("IQM [bootstrap 95%] (line), best (★), △▽ vs previous")
    success.set_ylim(-2, 102)
    success.set_title("success rate, % [Wilson 95%]")
    distance.set_title("distance: mean max x, px")
    if several:
        distance.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    runs = ", ".join(s.run for s in pic.series)
    title = f"{pic.board}: learning curve of {runs}"
    fig.suptitle(title, fontweight="bold")
    return fig, title, titles


def separated(ax: Axes, run: Series, shade: str) -> dict[str, str]:
    """A hollow triangle on the IQM of each checkpoint its episodes separate from the previous
    one's (`vs_previous`: the 95% interval of P(it beats the previous) excludes 0.5): up where
    it is better, down where it is worse."""
    titles: dict[str, str] = {}
    for better, marker, word in (("a", "^", "better"), ("b", "v", "worse")):
        shown = [
            (p, c, y)
            for p in run.points
            if (c := p.vs_previous) is not None
            and c.better == better
            and (y := p.iqm_score) is not None
        ]
        if not shown:
            continue
        xs, ys = [float(p.steps) for p, _, _ in shown], [y for _, _, y in shown]
        (marks,) = ax.plot(xs, ys, marker, markersize=9, color=shade, markerfacecolor="none")
        marks.set_gid(gid(f"{word}-{run.run}"))
        titles[gid(f"{word}-{run.run}")] = (
            f"{run.run}, {word} than the previous checkpoint: P(beats previous) "
            + "; ".join(
                f"{steps_label(p.steps)} {c.probability:.2f} [{c.ci95[0]:.2f}, {c.ci95[1]:.2f}]"
                for p, c, _ in shown
            )
        )
    return titles


def steps_axis(ax: Axes, steps: list[int]) -> None:
    """The x axis, training steps: logarithmic where the checkpoints' closest neighbours are
    further apart on it than on a linear axis (all steps above 0), ticks at whole decades, or at
    1, 2 and 5 of each within two decades; each tick written as a checkpoint's name writes its
    steps (1k, 3M)."""
    if log_is_wider(steps):
        ax.set_xscale("log")
        subs = (1.0,) if steps[-1] >= 100 * steps[0] else (1.0, 2.0, 5.0)
        ax.xaxis.set_major_locator(LogLocator(subs=subs))
        ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: steps_label(max(round(x), 0))))
    ax.set_xlabel("training steps")


def log_is_wider(steps: list[int]) -> bool:
    """Whether the closest two of `steps` (sorted, distinct) are further apart, as a share of
    the axis, on a logarithmic axis than on a linear one."""
    if len(steps) < 3 or steps[0] <= 0:
        return False
    logs = [math.log(s) for s in steps]

    def closest(xs: list[float]) -> float:
        return min(b - a for a, b in pairwise(xs)) / (xs[-1] - xs[0])

    return closest(logs) > closest([float(s) for s in steps])


def banded(
    ax: Axes, name: str, points: list[tuple[float, float | None, Pair]], shade: str, label: str
) -> dict[str, str]:
    """A statistic at each checkpoint, its 95% band shaded (whiskers for a lone point)."""
    shown = [(x, y, ci) for x, y, ci in points if y is not None]
    if not shown:
        return {}
    xs, ys = [x for x, _, _ in shown], [y for _, y, _ in shown]
    lows = [ci[0] if ci else y for _, y, ci in shown]
    highs = [ci[1] if ci else y for _, y, ci in shown]
    if len(shown) > 1:
        ax.fill_between(xs, lows, highs, color=shade, alpha=0.18, linewidth=0)
        (line,) = ax.plot(xs, ys, marker="o", markersize=3, color=shade, label=label)
    else:
        below, above = [max(ys[0] - lows[0], 0)], [max(highs[0] - ys[0], 0)]
        drawn = ax.errorbar(xs, ys, yerr=[below, above], fmt="o", color=shade, capsize=3)
        line = drawn.lines[0]
        line.set_label(label)
    line.set_gid(gid(name))
    text = "; ".join(
        f"{steps_label(int(x))} {y:g} [{lo:g}, {hi:g}]"
        for x, y, lo, hi in zip(xs, ys, lows, highs, strict=True)
    )
    return {gid(name): f"{name}: {text}"}


def pct(value: float | None) -> float | None:
    return None if value is None else value * 100


def pct_pair(pair: Pair) -> Pair:
    return None if pair is None else [pair[0] * 100, pair[1] * 100]
