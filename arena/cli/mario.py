"""`arena mario replay`: an episode played again from its stored action log, as a GIF or MP4;
`arena mario watch`: checkpoints evaluated as they appear; `arena mario series`: a run's
learning curve on a board (docs/mario.md, "Evaluating while training", "Series")."""

from __future__ import annotations

from pathlib import Path

import click

from arena.cli import terminal
from arena.cli.terminal import print_json
from arena.service.cluster import open_store
from arena.service.compare import read_series
from arena.service.episodes_export import series_csv
from arena.service.replays import check_video_path, pick_episode, replay, write_video
from arena.service.series import Series, SeriesPoint
from arena.service.training import Evaluated, Watched, template, watch
from scoring.compare import trajectories_word
from tasks.redact import redact_raw
from tasks.settings import load_settings
from tasks.validation import RunFailed


@click.command("replay")
@click.argument("batch_ref", metavar="BATCH")
@click.argument("agent")
@click.option("--level", help="Which level (when the batch played several).")
@click.option("--episode", type=click.IntRange(min=0), help="Episode index (default: the best).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the replay as a .gif or .mp4.",
)
@click.option(
    "--every",
    type=click.IntRange(1, 60),
    default=4,
    show_default=True,
    help="Keep every Nth frame (the game runs at 60 frames/s).",
)
def replay_command(
    batch_ref: str,
    agent: str,
    level: str | None,
    episode: int | None,
    out: Path | None,
    every: int,
) -> None:
    """Play an episode again from its action log and check it reproduces the stored result."""
    if out is not None:
        check_video_path(out)
    with open_store(load_settings()) as db:
        batch_id = db.resolve(batch_ref)
        unit, stored = pick_episode(db, batch_id, agent, level, episode)
    replayed, differs, frames = replay(unit, stored, every if out is not None else 0)
    click.echo(
        f"{agent} on {unit.item}, episode {unit.episode}: score "
        f"{stored.result['arena_score']:,.0f}, max x {replayed['max_x']}, {replayed['steps']} "
        f"steps, {'completed' if replayed['completed'] else 'not completed'}"
    )
    if differs:
        shown = [
            f"{k} ({stored.result.get(k)} stored, {replayed.get(k)} replayed)" for k in differs
        ]
        raise RunFailed("the replay differs from the stored result in " + ", ".join(shown))
    click.echo("replay matches the stored result")
    if out is not None:
        write_video(out, frames, fps=60 / every)
        click.echo(f"wrote {out} ({len(frames)} frames)")


@click.command("watch")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--spec", "spec_file", help="A Mario spec: its levels, protocol, params, board.")
@click.option("--level", help="The level (default: the spec's, else 1-1).")
@click.option("--episodes", type=click.IntRange(min=1), help="Episodes per checkpoint.")
@click.option("--seed", type=int, help="The protocol's seed.")
@click.option("--max-steps", type=click.IntRange(min=1), help="The protocol's step cap.")
@click.option("--leaderboard", help="The board's prefix (default: mario).")
@click.option(
    "--resize", type=click.IntRange(8, 256),
    help="The checkpoints' frame size (default: read from each checkpoint).",
)  # fmt: skip
@click.option(
    "--frame-stack", type=click.IntRange(1, 16),
    help="The checkpoints' frame stack (default: read from each checkpoint).",
)  # fmt: skip
@click.option(
    "--colour", is_flag=True, default=None,
    help="RGB frames, not grayscale (default: read from each checkpoint).",
)  # fmt: skip
@click.option("--device", type=click.Choice(["cpu", "cuda"]), help="Where the checkpoints run.")
@click.option("--once", is_flag=True, help="Submit what is there now and exit.")
@click.option(
    "--interval", type=click.FloatRange(0.1, 3600), default=2.0, show_default=True,
    help="Seconds between looks; a file is whole once unchanged over one.",
)  # fmt: skip
@click.option("--workers", type=click.IntRange(min=1), help="Embedded cluster: processes.")
def watch_command(
    folder: Path,
    spec_file: str | None,
    level: str | None,
    episodes: int | None,
    seed: int | None,
    max_steps: int | None,
    leaderboard: str | None,
    resize: int | None,
    frame_stack: int | None,
    colour: bool | None,
    device: str | None,
    once: bool,
    interval: float,
    workers: int | None,
) -> None:
    """Submit every checkpoint <run>@<steps>.zip (or SB3 CheckpointCallback's
    <run>_<steps>_steps.zip) that appears in FOLDER, each once, as agent <run>@<steps> on the
    protocol's board, until Ctrl-C (--once: what is there, then exit).
    With no ARENA_REDIS_URL they run on the embedded cluster, started for the watch: each
    result is printed as it ends (--once waits for them, then prints the board)."""
    pre = {
        "resize": resize,
        "frame_stack": frame_stack,
        "grayscale": None if colour is None else not colour,
    }
    preprocess = {k: v for k, v in pre.items() if v is not None} or None
    tpl = template(
        spec_file,
        level=level,
        episodes=episodes,
        seed=seed,
        params={"max_steps": max_steps} if max_steps else None,
        leaderboard=leaderboard,
        preprocess=preprocess,
        device=device,
    )
    if not once:
        click.echo(
            f"watching {folder} for <run>@<steps>.zip, <run>_<steps>_steps.zip (Ctrl-C to stop)"
        )
    watched = Watched()  # what was done so far, when Ctrl-C stops the watch
    bars = terminal.follow(show=True)  # a progress bar per evaluation waited for, as `arena run`
    try:
        watch(folder, tpl, click.echo, once=once, interval_s=interval, workers=workers,
              evaluated=lambda done: click.echo(evaluated_line(done)), follow=bars,
              watched=watched)  # fmt: skip
    except KeyboardInterrupt:
        left = watched.unfinished if watched.embedded else []
        resume = f"`arena mario watch {folder} --once` on this data folder resumes them"
        click.echo(f"stopped: {len(left)} evaluations unfinished; {resume}" if left else "stopped")
        return
    show_watched(watched)


def show_watched(watched: Watched) -> None:
    """How a `--once` watch ended: the boards its evaluations wrote, what it submitted (and, on
    the embedded cluster, evaluated), and status 1 when an evaluation did not end clean."""
    for board in watched.boards:
        terminal.print_board(board)
    submitted = f"{len(watched.submitted)} checkpoints submitted"
    evaluated = f", {len(watched.evaluated)} evaluated" if watched.embedded else ""
    click.echo(submitted + evaluated)
    failed = [e.errors for e in watched.evaluated.values() if e.errors]
    if failed:
        terminal.exit_for(
            f"{len(failed)} of {len(watched.evaluated)} evaluations did not end clean; "
            f"first: {failed[0]}"
        )


def evaluated_line(done: Evaluated) -> str:
    """A checkpoint's evaluation as it ended: its scores in one line, and what went wrong."""
    head = f"{done.name}: {'evaluated' if done.info.status == 'done' else done.info.status}"
    point, numbers = done.point, []
    if point is not None:
        numbers.append(f"best {point.score:,.0f}")
        if point.avg_max_x is not None:  # the distance beside the composite score
            numbers.append(f"max x {point.avg_max_x:,.0f}")
        if point.iqm_score is not None:
            numbers.append(f"IQM {point.iqm_score:,.0f}")
        if point.success_rate is not None:
            numbers.append(f"success {point.success_rate:.0%}")
        if point.episodes is not None:
            numbers.append(f"{point.episodes} episodes")
    line = ", ".join([head, *numbers]) + f" (batch {done.info.id[:12]})"
    return redact_raw(line + (f"; {done.errors}" if done.errors else ""))


@click.command("series")
@click.argument("board")
@click.argument("run")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.option("--csv", "as_csv", is_flag=True, help="Print every episode as CSV, one per row.")
def series_command(board: str, run: str, as_json: bool, as_csv: bool) -> None:
    """RUN's learning curve on BOARD: each checkpoint <run>@<steps>, by training steps."""
    with open_store(load_settings()) as db:
        if as_csv:
            click.echo(series_csv(db, board, run), nl=False)
            return
        found = read_series(db, board, run)
    if as_json:
        print_json(found.model_dump(mode="json"))
    else:
        click.echo("\n".join(series_lines(found)))


def series_lines(series: Series) -> list[str]:
    def ci(pair: list[float] | None, fmt: str) -> str:
        return f"[{pair[0]:{fmt}}, {pair[1]:{fmt}}]" if pair else "-"

    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else f"{value:{fmt}}"

    head = f"{'steps':>12}  {'agent':<24} {'best':>8} {'max x':>6}  {'IQM [bootstrap 95%]':<28} "
    lines = [
        f"series {series.run} on {series.board}: {len(series.points)} checkpoints",
        head + f"{'success [Wilson 95%]':<26} {'episodes':>8}  P(> prev) [bootstrap 95%]",
    ]
    for p in series.points:
        iqm = f"{num(p.iqm_score, ',.0f')} {ci(p.iqm_ci95, ',.0f')}"
        success = f"{num(p.success_rate, '.0%')} {ci(p.success_ci95, '.0%')}"
        if p.trajectories is not None and p.trajectories < 2:  # an interval of one episode
            iqm = f"{num(p.iqm_score, ',.0f')} ({trajectories_word(p.trajectories)})"
            success = num(p.success_rate, ".0%")
        lines.append(
            f"{p.steps:>12,}  {p.agent:<24} {p.score:>8,.0f} {num(p.avg_max_x, ',.0f'):>6}  "
            f"{iqm:<28} {success:<26} "
            f"{num(p.episodes, 'd'):>8}  {versus_previous(p)}"
        )
    return lines


def versus_previous(point: SeriesPoint) -> str:
    """P(the checkpoint beats the previous one) and its interval, marked `better` or `worse`
    where the interval excludes 0.5 (as `arena compare` says it); `-` for the first."""
    c = point.vs_previous
    if c is None:
        return "-"
    if not c.conclusive:  # a side is one trajectory repeated: no interval, no verdict
        few = min(c.trajectories_a or 0, c.trajectories_b or 0)
        return f"{c.probability:.2f} no conclusion: {trajectories_word(few)}"
    mark = {"a": " better", "b": " worse"}.get(c.better or "", "")
    return f"{c.probability:.2f} [{c.ci95[0]:.2f}, {c.ci95[1]:.2f}]{mark}"


@click.group("mario")
def mario_group() -> None:
    """Super Mario Bros: replays, checkpoints evaluated as they train, learning curves."""


mario_group.add_command(replay_command)
mario_group.add_command(watch_command)
mario_group.add_command(series_command)
