"""`harness run CONFIG`: the main job, every stage of `harness.pipeline.STAGES` in order
(generate -> single-turn -> forks -> score -> probe -> theory -> fits -> laws -> analyse ->
gates -> manifest -> report). Exit code 0, 1 when a gate check failed or is undecided, 2 on bad
input (nothing written)."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import VERDICT_NOT_PASSED, UserError


def run_command(
    config: Path = typer.Argument(..., help="Run config YAML, e.g. configs/quickstart.yaml"),
    out: Path = typer.Option(None, "--out", help="Output folder (default: reports/<name>)."),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore cached results, redo every unit."),
    until_decided: bool = typer.Option(
        False,
        "--until-decided",
        help="Start at the config's samples, then add samples to the conditions whose gates "
        "are undecided until they decide or reach --max-samples (as samples: {min, max}).",
    ),
    max_samples: int = typer.Option(
        None,
        "--max-samples",
        min=1,
        help="With --until-decided: samples per condition at most "
        "(default: the config's samples.max, else 64).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Print the plan (every unit: generations, single-turn twins, forks, probe pairs, "
        "judge calls; requests and tokens per model and policy; what is already cached) and "
        "exit: no engine starts, nothing is written.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="With --dry-run: the plan as JSON ({units, totals}: every unit, and per serving "
        "model the requests and tokens planned, cached and to send).",
    ),
) -> None:
    """Run a config end to end; resumable (re-run the same command after a kill). Exits 1 when
    one of the config's gate checks failed or is undecided (see gates.csv and junit.xml in the
    run folder)."""
    if dry_run:
        from harness.api import plan as plan_of  # lazy: CLI start-up

        plan = plan_of(config, out, until_decided, max_samples)
        if as_json:
            typer.echo(plan_json(plan))
        else:
            print_plan(plan)
        return
    if as_json:
        raise UserError("--json needs --dry-run")
    from harness.api import run  # lazy: CLI start-up
    from harness.report.terminal import gates_failed, print_summary  # lazy: CLI start-up

    folder = run(config, out, fresh, True, until_decided, max_samples).folder
    print_summary(folder)
    if gates_failed(folder):
        raise typer.Exit(code=VERDICT_NOT_PASSED)


def plan_json(plan) -> str:
    """The plan's units and per-model totals as one JSON document."""
    import json

    units = [unit.model_dump(mode="json") for unit in plan.units]
    totals = plan.totals.model_dump(mode="json")
    return json.dumps({"units": units, "totals": totals, "most_cost": most_cost(plan)}, indent=1)


def print_plan(plan) -> None:
    """The plan's units summed per (stage, model, policy), then per serving model."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # a CI log or a file: whole columns, not rich's 80 characters
        console = Console(width=160)
    console.print(
        f"plan of {plan.config.name} (run {plan.run_id}) into {plan.out_dir}: "
        "tokens are upper bounds; nothing was started or written"
    )
    table = Table("stage", "model", "policy", "units", "samples", "requests", "input tokens",
                  "output tokens", "cached units")  # fmt: skip
    groups: dict[tuple, list] = {}
    order = (
        "generate",
        "simulated-user",
        "single-turn",
        "forks",
        "probe",
        "judge",
    )  # the stages' order
    for unit in sorted(plan.units, key=lambda u: order.index(u.stage)):
        groups.setdefault((unit.stage, unit.model, unit.policy), []).append(unit)
    for (stage, model, policy), units in groups.items():
        keyed = [u for u in units if u.cached is not None]
        cached = f"{sum(u.cached for u in keyed)}/{len(keyed)}" if keyed else "after generate"
        requests = sum(u.budget.requests for u in units)
        tokens_in = sum(u.budget.input_tokens for u in units)
        tokens_out = sum(u.budget.output_tokens for u in units)
        samples = sum(u.samples * (len(u.items) if stage == "generate" else 1) for u in units)
        table.add_row(stage, model, policy, str(len(units)), str(samples), f"{requests:,}",
                      f"{tokens_in:,}", f"{tokens_out:,}", cached)  # fmt: skip
    console.print(table)
    totals = Table("model", "requests", "input tokens", "output tokens", "cached requests",
                   "to send: input", "to send: output", "most cost (USD)",
                   title="per serving model")  # fmt: skip
    costs = most_cost(plan)
    for m in plan.totals.models:
        totals.add_row(m.model, f"{m.planned.requests:,}", f"{m.planned.input_tokens:,}",
                       f"{m.planned.output_tokens:,}", f"{m.cached.requests:,}",
                       f"{m.to_send.input_tokens:,}", f"{m.to_send.output_tokens:,}",
                       costs[m.model])  # fmt: skip
    console.print(totals)


def most_cost(plan) -> dict[str, str]:
    """Per serving model, the most its requests still to send can cost at the config's dated
    prices (every input token at the uncached price), or why there is no figure."""
    from harness.engines.pricing import cost_usd  # lazy: CLI start-up

    out = {}
    for m in plan.totals.models:
        price = (plan.config.pricing or {}).get(m.model)
        if price is None:
            out[m.model] = "no price in config"
            continue
        usd = cost_usd(price, m.to_send.input_tokens, 0, m.to_send.output_tokens)
        out[m.model] = f"{usd:,.4f} (prices of {price.as_of.isoformat()})"
    return out
