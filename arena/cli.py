"""The `arena` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from arena.errors import InputError
from arena.inputs import read_json
from arena.score_cmd import SCORERS, score

# The rubric worked examples shipped with the repository (scored by `arena demo`).
EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples" / "scoring"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Arena: fair, reproducible evaluation of agents at scale."""


@cli.command("score")
@click.argument("workload", type=click.Choice(sorted(SCORERS)))
@click.argument("file", metavar="FILE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
def score_command(workload: str, file: str, as_json: bool) -> None:
    """Score results produced elsewhere: FILE is JSON (see docs/scoring.md); '-' reads stdin."""
    text, payload = score(workload, read_json(file))
    click.echo(json.dumps(payload, indent=2) if as_json else text)


@cli.command("demo")
@click.option(
    "--examples",
    "examples_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=EXAMPLES_DIR,
    show_default=True,
    help="Folder of <workload>-*.json inputs.",
)
def demo_command(examples_dir: Path) -> None:
    """Score every worked example of the three rubrics (the embedded default job, for now)."""
    files = sorted(examples_dir.glob("*.json"))
    if not files:
        raise InputError(f"{examples_dir}: no example *.json files")
    for path in files:
        workload = path.name.split("-", 1)[0]
        if workload not in SCORERS:
            raise InputError(f"{path}: name must start with one of {sorted(SCORERS)}")
        text, _ = score(workload, read_json(str(path)))
        click.echo(click.style(f"── {workload}: {path.name} ", bold=True).ljust(72, "─"))
        click.echo(text + "\n")


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input ends with one line on stderr and exit status 2, never a traceback."""
    try:
        cli.main(args=argv, prog_name="arena", standalone_mode=False)
    except (InputError, click.ClickException) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        click.echo(f"arena: error: {' '.join(message.split())}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("arena: aborted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
