"""`harness gate DIR CONFIG`: re-evaluate CONFIG's gates on a finished run folder.

Reads DIR/summary.csv and the rule and turn files the run wrote, as its manifest.json lists
them (nothing is recomputed, no model is loaded), rewrites gates.csv and junit.xml (and
report.html when the folder has one, so its gates section agrees), prints the verdicts. Exit
code 0 when every check passed, 1 when one failed or is undecided, 2 on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from harness.errors import VERDICT_NOT_PASSED, UserError

if TYPE_CHECKING:  # annotations only: harness.config.run (pydantic) stays out of CLI start-up
    from harness.config.run import RunConfig


def gate_command(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="Finished run folder."),
    config: Path = typer.Argument(..., metavar="CONFIG", help="Run config YAML with `gates:`."),
    until_decided: bool = typer.Option(
        False,
        "--until-decided",
        help="DIR was run with `harness run --until-decided`: read CONFIG the same way.",
    ),
    max_samples: int = typer.Option(
        None, "--max-samples", min=2, help="With --until-decided: as given to `harness run`."
    ),
) -> None:
    """Check CONFIG's gates against DIR/summary.csv; exit 1 when one fails or is undecided."""
    from harness.config.files import load_run_config_and_suites  # lazy: CLI start-up
    from harness.report.load import run_files  # lazy: CLI start-up
    from harness.report.terminal import gates_failed, print_gates  # lazy: CLI start-up
    from harness.stages.base import write_output  # lazy: CLI start-up
    from harness.stages.gates import gate_outputs  # lazy: CLI start-up
    from harness.units.plan import until_decided as sampling_until_decided  # lazy: CLI start-up
    from harness.units.selection import select_items  # lazy: CLI start-up

    spec, suites = load_run_config_and_suites(config)
    if until_decided:  # the config as `harness run --until-decided` ran it
        spec = sampling_until_decided(spec, config, max_samples)
    elif max_samples is not None:
        raise UserError("--max-samples needs --until-decided")
    if not spec.gates:
        raise UserError(f"{config}: no `gates:` to evaluate")
    _check_same_run(run_dir, spec)
    items = [sel.item for sel in select_items(spec, suites)]
    files = run_files(run_dir)  # what the run wrote: the files its gate stage read
    if "summary.csv" not in files:
        raise UserError(f"{run_dir}: its run wrote no summary.csv (manifest.json's files)")
    outputs = gate_outputs(spec, items, files)  # every check before the first write
    for name, value in outputs.items():
        write_output(run_dir / name, value)
    if (run_dir / "report.html").is_file():
        from harness.report import render_report  # lazy: CLI start-up

        render_report(run_dir)
    print_gates(run_dir)
    if gates_failed(run_dir):
        raise typer.Exit(code=VERDICT_NOT_PASSED)


def _check_same_run(run_dir: Path, config: RunConfig) -> None:
    """DIR must hold results of this config: judging another config's results against these
    thresholds would pass or fail the wrong thing. Only `gates` and `out` may differ from the
    config manifest.json recorded."""
    if not (run_dir / "summary.csv").is_file():
        raise UserError(f"{run_dir}: no summary.csv (not a finished run folder)")
    manifest = run_dir / "manifest.json"
    if not manifest.is_file():
        return  # a run folder copied without its manifest: nothing to compare
    try:
        stored = json.loads(manifest.read_text(encoding="utf-8")).get("config")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise UserError(f"{manifest}: not valid JSON") from None
    if not isinstance(stored, dict):
        return
    current = json.loads(config.model_dump_json(exclude={"gates", "out"}))
    differ = sorted(
        k for k in {*current, *stored} - {"gates", "out"} if current.get(k) != stored.get(k)
    )
    if differ == ["samples"] and isinstance(stored.get("samples"), dict):
        # the folder sampled until decided: name the flags that read CONFIG the same way
        fix = (
            f"this reads samples {_range(current['samples'])}: give --max-samples as given "
            "to `harness run`"
            if isinstance(current["samples"], dict)
            else "add --until-decided (and --max-samples as given to `harness run`)"
        )
        raise UserError(
            f"{run_dir}: was sampled until decided (samples {_range(stored['samples'])}); {fix}"
        )
    if differ:
        raise UserError(
            f"{run_dir}: was run with another config ({', '.join(differ)} differ; only gates "
            "and out may): run `harness run` first"
        )


def _range(samples: dict) -> str:
    return f"{samples.get('min')} to {samples.get('max')}"
