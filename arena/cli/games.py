"""`arena game benchmark`: the rubric's command line for the Alympics benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import click

from arena.cli.terminal import OUTPUT_PATH, exit_for, run_and_show
from arena.service.alympics import BenchmarkResult, benchmark_spec, llm_options, result_of
from arena.service.batches import check_run_id, report_errors, run_in_process
from arena.service.reports import check_output_file, check_output_path, write_report
from scoring.alympics import normalise
from tasks.settings import load_settings
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
@click.option(
    "--agent",
    "agent_name",
    default="builtin",
    show_default=True,
    help="builtin, package.module:factory, an http(s):// endpoint, or llm:MODEL@BASE_URL "
    "(a chat-completions endpoint, e.g. llm:qwen-7b@http://127.0.0.1:8000/v1).",
)
@click.option(
    "--llm",
    "llm_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="An llm agent's setting, repeatable: api_key_env=OPENAI_API_KEY, "
    "limits.requests_per_minute=60, prices.prompt_per_1k=0.15, prompt=FILE ... "
    "(docs/alympics.md).",
)
@click.option(
    "--cost-budget",
    type=click.FloatRange(min=0, max=1_000_000, min_open=True),
    help="US dollars the llm agent may spend; then no further match set starts.",
)
@click.option(
    "--replay-cache",
    is_flag=True,
    help="Rerun answering the llm agent from the replay cache, never its endpoint.",
)
@click.option(
    "--suite",
    default="alympics_lite",
    show_default=True,
    help="The suite (tasks/suites/): alympics_lite, the rubric's; alympics_smoke, 87 moves.",
)
@click.option(
    "--episodes", type=click.IntRange(min=1, max=100_000), help="Override every game's episodes."
)
@click.option("--seed", type=click.IntRange(min=0, max=2**63 - 1), default=0, show_default=True)
@click.option(
    "--move-timeout",
    type=click.FloatRange(min=0, max=600, min_open=True),
    help="Seconds an HTTP agent has per move (default 10).",
)
@click.option(
    "--unit-time-limit",
    type=click.FloatRange(min=0, max=86400, min_open=True),
    help="Seconds per match set, whatever the agent does (default 600; another "
    "value is another protocol, on its own board).",
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--output-file",
    type=click.Path(path_type=Path),
    help="Write the --output text or JSON here instead of stdout.",
)
@OUTPUT_PATH
@click.option("--run-id", help="A label for this run (with --cluster: arena status LABEL).")
@click.option(
    "-v", "--verbose", is_flag=True, help="Every match set: raw payoff, measures, faults."
)
@click.option(
    "--cluster",
    is_flag=True,
    help="Run match sets on the cluster (embedded unless ARENA_REDIS_URL).",
)
@click.option(
    "--workers", type=click.IntRange(min=1, max=1024), help="Embedded workers (with --cluster)."
)
def benchmark_command(
    agent_name: str,
    llm_pairs: tuple[str, ...],
    cost_budget: float | None,
    replay_cache: bool,
    suite: str,
    episodes: int | None,
    seed: int,
    move_timeout: float | None,
    unit_time_limit: float | None,
    output: str,
    output_file: Path | None,
    output_path: Path | None,
    run_id: str | None,
    verbose: bool,
    cluster: bool,
    workers: int | None,
) -> None:
    """Run the alympics_lite suite for one agent and print the rubric's breakdown. Exits 1 when
    a match set failed (e.g. the agent never answered), with the reasons."""
    settings = load_settings()  # every bad setting, option or path is refused before any work
    check_run_id(run_id)
    if output_file:
        check_output_file(output_file, "--output-file")
    report_target = check_output_path(output_path) if output_path else None
    spec = benchmark_spec(
        agent_name,
        episodes,
        seed,
        suite=suite,
        move_timeout_s=move_timeout,
        unit_time_limit_s=unit_time_limit,
        llm=llm_options(list(llm_pairs)),
        cost_budget_usd=cost_budget,
    )
    batch = validate_batch(spec, asker="operator")
    if cluster:
        finished = run_and_show(
            batch, False, workers, quiet=True, run_id=run_id, replay_cache=replay_cache
        )
        results, report = finished.results, finished.report
    else:
        report = run_in_process(batch, run_id, settings, replay_cache)
        results = report.units
    result = result_of(batch, results)
    text = "\n".join([result.summary(), *(_verbose_lines(result) if verbose else [])])
    rendered = json.dumps(result.to_json(), indent=2) if output == "json" else text
    if output_file:
        output_file.write_text(rendered + "\n")
        click.echo(result.summary().splitlines()[0])
    else:
        click.echo(rendered)
    if report_target:
        write_report(report, report_target)
    exit_for(report_errors(report))
