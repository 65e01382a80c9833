"""A race's picture (its agents' five dimensions side by side, the composite, the verdict) and a
batch's timeline (each unit on its worker, from start to end). Each function returns the
figure, its title and a <title> per element (by gid) for the SVG."""

from __future__ import annotations

from arena.service.batch_view import TimelinePicture
from arena.service.pictures import RacePicture
from arena.web.charts.boards import Drawn
from arena.web.charts.style import GOOD, POOR, colour, figure, gid, label_in, no_data, place

COMPOSITE = "#333333"


def race(pic: RacePicture) -> Drawn:
    dims = pic.dimensions
    fig = figure(max(6.0, 1.3 * len(pic.agents) + 2.5), 0, extra_in=3.4)
    place(fig, 0.6, top_in=0.8)
    ax = fig.add_subplot()
    titles: dict[str, str] = {}
    title = f"race {pic.batch_id[:12]}: verdict {pic.verdict}, winner {pic.winner or 'none'}"
    fig.suptitle(title, fontweight="bold")
    if not pic.agents:
        no_data(ax, "no agent was scored")
        return fig, title, titles
    width = 0.8 / (len(dims) + 1)
    for j, dim in enumerate(dims):
        offset = (j - len(dims) / 2) * width
        values = [a.scores.get(dim) for a in pic.agents]
        drawn = ax.bar(
            [i + offset for i in range(len(pic.agents))],
            [v if v is not None else 0 for v in values],
            width=width * 0.9,
            color=colour(j),
            label=dim.replace("_", " "),
        )
        for a, patch, value in zip(pic.agents, drawn.patches, values, strict=True):
            name = gid(f"dim-{a.name}-{dim}")
            patch.set_gid(name)
            titles[name] = f"{a.name}: {dim} {value if value is not None else '—'}"
    composite = ax.bar(
        [i + len(dims) / 2 * width for i in range(len(pic.agents))],
        [a.composite for a in pic.agents],
        width=width * 0.9,
        color=COMPOSITE,
        label="composite",
    )
    for a, patch in zip(pic.agents, composite.patches, strict=True):
        name = gid(f"composite-{a.name}")
        patch.set_gid(name)
        titles[name] = f"{a.name}: composite {a.composite:g} (rank {a.rank})"
        ax.annotate(
            f"{a.composite:.1f}",
            (patch.get_x() + patch.get_width() / 2, a.composite),
            ha="center",
            va="bottom",
            fontsize=7,
        )
    labels = [f"#{a.rank} {a.name}" + (" ★" if a.name == pic.winner else "") for a in pic.agents]
    ax.set_xticks(range(len(pic.agents)), labels)
    ax.set_ylim(0, 108)
    ax.set_ylabel("score, 0-100")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=len(dims) + 1)
    return fig, title, titles


def timeline(pic: TimelinePicture) -> Drawn:
    hosts = sorted({s.host for s in pic.spans})
    fig = figure(9, len(hosts), row_in=0.4, extra_in=1.4)
    place(fig, label_in(hosts), top_in=0.45)
    ax = fig.add_subplot()
    title = (
        f"batch {pic.batch_id[:12]}: {pic.status}, {pic.completed}/{pic.total} units, "
        f"{pic.errors} errors"
    )
    fig.suptitle(title, fontweight="bold")
    titles: dict[str, str] = {}
    if not pic.spans:
        no_data(ax, "no unit has run yet")
        return fig, title, titles
    for i, host in enumerate(hosts):
        for status, shade in (("ok", GOOD), ("error", POOR)):
            mine = [s for s in pic.spans if s.host == host and s.status == status]
            if not mine:
                continue
            # One collection per worker and status: a thousand units draw in milliseconds.
            drawn = ax.broken_barh(
                [(s.start_s, max(s.end_s - s.start_s, 0.0)) for s in mine],
                (i - 0.3, 0.6),
                facecolors=shade,
                edgecolors="white",
                linewidth=0.3,
            )
            name = gid(f"units-{host}-{status}")
            drawn.set_gid(name)
            titles[name] = f"{host}: {len(mine)} units {status}"
    ax.set_yticks(range(len(hosts)), hosts)
    ax.set_ylim(len(hosts) - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.set_xlabel("seconds since the batch was submitted (green: ok, red: error)")
    return fig, title, titles
