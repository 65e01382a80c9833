"""`arena game benchmark`: the rubric's command line for the Alympics benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import click

from arena import cluster_cmd
from arena.alympics import BenchmarkResult, benchmark_spec, result_of
from scoring.alympics import normalise
from tasks.execute import execute_batch
from tasks.workloads import validate_batch


def _verbose_lines(result: BenchmarkResult) -> list[str]:
    lines = ["", "Match sets:"]
    for match in result.matches():
        game, opponent = match["item"].split("@")
        if match["status"] != "ok":
            lines.append(f"  {game:<18} vs {opponent:<22} ERROR {match['reason']}")
            continue
        m = match["measures"]
        extra = "".join(
            f", {key} {m[key]:.1f}" for key in ("cooperation", "fairness") if m.get(key) is not None
        )
        score = normalise(game, m["raw"])
        lines.append(
            f"  {game:<18} vs {opponent:<22} raw {m['raw']:8.3f} -> {score:5.1f}"
            f"{extra}, faults {int(m.get('faults', 0))}"
        )
        lines += [f"      fault: {reason}" for reason in match.get("fault_reasons", [])[:3]]
    return lines


@click.command("benchmark")
@click.option("--agent", "agent_name", default="builtin", show_default=True,
              help="builtin, package.module:factory, or an http(s):// endpoint.")  # fmt: skip
@click.option("--episodes", type=click.IntRange(min=1), help="Override every game's episodes.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--output-file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-v", "--verbose", is_flag=True, help="Every match set: raw payoff, measures, faults."
)
@click.option("--cluster", is_flag=True,
              help="Run match sets on the cluster (embedded unless ARENA_REDIS_URL).")  # fmt: skip
@click.option("--workers", type=click.IntRange(min=1), help="Embedded workers (with --cluster).")
def benchmark_command(
    agent_name: str, episodes: int | None, seed: int, output: str, output_file: Path | None,
    verbose: bool, cluster: bool, workers: int | None,
) -> None:  # fmt: skip
    """Run the alympics_lite suite for one agent and print the rubric's breakdown."""
    batch = validate_batch(benchmark_spec(agent_name, episodes, seed))
    if cluster:
        _, results = cluster_cmd.run_batch(batch, fresh=False, workers=workers, quiet=True)
    else:
        results = execute_batch(batch)
    result = result_of(batch, results)
    text = "\n".join([result.summary(), *(_verbose_lines(result) if verbose else [])])
    rendered = json.dumps(result.to_json(), indent=2) if output == "json" else text
    if output_file:
        output_file.write_text(rendered + "\n")
        click.echo(result.summary().splitlines()[0])
    else:
        click.echo(rendered)
