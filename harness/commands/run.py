"""`harness run CONFIG`: the main job, every stage of `harness.pipeline.STAGES` in order
(generate -> single-turn -> forks -> score -> probe -> theory -> fits -> laws -> analyse ->
gates -> manifest -> report). Exit code 0, 1 when a gate check failed or is undecided, 2 on bad
input (nothing written)."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import VERDICT_NOT_PASSED


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
) -> None:
    """Run a config end to end; resumable (re-run the same command after a kill). Exits 1 when
    one of the config's gate checks failed or is undecided (see gates.csv and junit.xml in the
    run folder)."""
    from harness.pipeline import run_pipeline  # lazy: CLI start-up
    from harness.report.terminal import gates_failed, print_summary  # lazy: CLI start-up

    folder = run_pipeline(
        config, out=out, fresh=fresh, until_decided=until_decided, max_samples=max_samples
    )
    print_summary(folder)
    if gates_failed(folder):
        raise typer.Exit(code=VERDICT_NOT_PASSED)
