"""`harness export DIR --format inspect`: a run folder or a scored chat log as an Inspect AI
eval log (harness/report/inspect_log.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import UserError


def export_command(
    run_dir: Path = typer.Argument(
        ..., metavar="DIR", help="Run folder, or the --out folder of `harness score` on a log."
    ),
    export_format: str = typer.Option(
        ..., "--format", help="inspect: an Inspect AI eval log (`inspect view` opens it)."
    ),
    out: Path = typer.Option(
        None, "--out", help="File to write (.eval, or .json; default DIR/inspect/harness.eval)."
    ),
) -> None:
    """Write DIR in another tool's format (no model is loaded). Prints the written path."""
    if export_format != "inspect":
        raise UserError(f"--format: '{export_format}' is not a known format (formats: inspect)")
    if out is not None and out.suffix not in (".eval", ".json"):
        raise UserError(f"--out: {out} must end in .eval or .json (Inspect's two log formats)")
    from harness.report.inspect_log import export_inspect  # lazy: CLI start-up

    typer.echo(str(export_inspect(run_dir, out)))
