"""`harness report DIR`: re-render report.html from a run folder's stored files only."""

from __future__ import annotations

from pathlib import Path

import typer


def report_command(
    run_dir: Path = typer.Argument(
        ..., metavar="DIR", help="Run folder (e.g. reports/quickstart)."
    ),
    worst: int | None = typer.Option(
        None, "--worst", min=1, help="Logged conversations: the failing ones shown [default: 20]."
    ),
    no_text: bool = typer.Option(
        False, "--no-text", help="Logged conversations: leave every text of the log out."
    ),
) -> None:
    """Write DIR/report.html from the stored CSVs, generations.jsonl and manifest.json (no model
    is loaded; what the run stored is never recomputed). Prints the report's path."""
    from harness.report import render_report  # lazy: CLI start-up

    print(render_report(run_dir, worst, with_text=not no_text))
