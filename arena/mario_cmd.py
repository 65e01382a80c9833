"""`arena mario replay`: an episode played again from its stored action log, as a GIF or MP4."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from arena import cluster_cmd
from tasks.settings import load_settings
from tasks.store import Store
from tasks.validation import InputError, RunFailed
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import Unit, UnitResult

# Fields a replay must reproduce exactly (wall time is the machine's, not the episode's).
COMPARED = ("completed", "world", "stage", "max_x", "steps", "frames", "coins",
            "time_remaining", "lives_lost", "levels_completed", "furthest_level")  # fmt: skip


def pick_episode(
    db: Store, batch_id: str, agent: str, level: str | None, episode: int | None
) -> tuple[Unit, UnitResult]:
    """The agent's best stored episode (or the given one) in a finished Mario batch."""
    info = db.batch(batch_id)
    if info is None:
        raise InputError(f"batch: no batch {batch_id!r}")
    if info.workload != "mario":
        raise InputError(f"batch: {batch_id} is a {info.workload} batch, not mario")
    batch = validate_batch(info.spec, identity=info.identity)
    units = [u for u in get_workload("mario").expand(batch) if u.agent == agent]
    if not units:
        raise InputError(f"agent: no agent {agent!r} in batch {batch_id}")
    if level is not None:
        units = [u for u in units if u.item == level]
        if not units:
            raise InputError(f"--level: agent {agent!r} played no {level!r} in batch {batch_id}")
    if episode is not None:
        units = [u for u in units if u.episode == episode]
        if not units:
            raise InputError(f"--episode: no episode {episode} (episodes count from 0)")
    stored = db.unit_results(batch_id)
    played = [(u, stored[u.id]) for u in units if u.id in stored and stored[u.id].status == "ok"]
    if not played:
        raise InputError(f"agent: {agent!r} has no played episode to replay in batch {batch_id}")
    return max(played, key=lambda pair: (pair[1].result["arena_score"], -pair[0].episode))


def replay(
    unit: Unit, stored: UnitResult, every: int
) -> tuple[dict[str, Any], list[str], list[Any]]:
    """Play the stored episode again from its action log: what it gave, the fields that differ
    from the stored result (none, for a faithful replay), and every `every`-th frame (0: none)."""
    from workers.mario.protocol import MarioProtocol
    from workers.mario.runner import replay_episode

    frames: list[Any] = []
    count = [0]

    def keep(frame: Any) -> None:
        if every and count[0] % every == 0:
            frames.append(frame.copy())
        count[0] += 1

    protocol = MarioProtocol.model_validate(unit.payload["params"])
    replayed = replay_episode(
        unit.item, stored.result["actions"], protocol, unit.env_seed, keep
    ).model_dump(mode="json")
    differs = [k for k in COMPARED if replayed.get(k) != stored.result.get(k)]
    return replayed, differs, frames


def check_output(path: Path | None) -> None:
    if path is None:
        return
    if path.suffix.lower() not in (".gif", ".mp4"):
        raise InputError(f"--out: {path} must end in .gif or .mp4")
    if not path.parent.is_dir():
        raise InputError(f"--out: folder {path.parent} does not exist")


def write_video(path: Path, frames: list[Any], fps: float) -> None:
    import imageio.v3 as iio

    try:
        if path.suffix.lower() == ".gif":
            iio.imwrite(path, frames, duration=1000 / fps, loop=0)
        else:
            iio.imwrite(path, frames, fps=fps, codec="libx264")
    except (ImportError, OSError, ValueError) as exc:  # e.g. no ffmpeg for MP4
        raise RunFailed(f"cannot write {path}: {exc} (a .gif needs no ffmpeg)") from None


@click.command("replay")
@click.argument("batch_ref", metavar="BATCH")
@click.argument("agent")
@click.option("--level", help="Which level (when the batch played several).")
@click.option("--episode", type=click.IntRange(min=0), help="Episode index (default: the best).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the replay as a .gif or .mp4.")  # fmt: skip
@click.option("--every", type=click.IntRange(1, 60), default=4, show_default=True,
              help="Keep every Nth frame (the game runs at 60 frames/s).")  # fmt: skip
def replay_command(
    batch_ref: str, agent: str, level: str | None, episode: int | None, out: Path | None,
    every: int,
) -> None:  # fmt: skip
    """Play an episode again from its action log and check it reproduces the stored result."""
    check_output(out)
    with cluster_cmd.open_store(load_settings()) as db:
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
