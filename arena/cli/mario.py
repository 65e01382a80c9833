"""`arena mario replay`: an episode played again from its stored action log, as a GIF or MP4."""

from __future__ import annotations

from pathlib import Path

import click

from arena.service.cluster import open_store
from arena.service.replays import check_video_path, pick_episode, replay, write_video
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


@click.group("mario")
def mario_group() -> None:
    """Super Mario Bros: replays of stored episodes."""


mario_group.add_command(replay_command)
