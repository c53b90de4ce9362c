"""`harness score GENERATIONS.jsonl --suite tasks/x.yaml --out DIR`: windows.csv + adherence."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import UserError


def score_command(
    generations: Path = typer.Argument(
        ..., help="generations.jsonl (harness records) or JSONL of {item, text}."
    ),
    suite: list[Path] = typer.Option(..., "--suite", help="Task suite YAML (repeatable)."),
    out: Path = typer.Option(..., "--out", help="Output folder."),
    window: int = typer.Option(64, "--window", min=1, help="Generated tokens per window."),
    sentence_aligned: bool = typer.Option(
        False, "--sentence-aligned", help="Close windows at sentence ends (about --window)."
    ),
    model: str = typer.Option(
        None,
        "--model",
        help="Model whose tokenizer splits the text (default: the record's "
        "model, else the embedded model).",
    ),
) -> None:
    """Score transcripts window by window; write windows.csv and adherence*.csv."""
    from harness.config import ScoringConfig, load_suite  # lazy: CLI start-up
    from harness.scoring.io import score_files  # lazy: CLI start-up

    suites = [load_suite(path) for path in suite]
    try:
        config = ScoringConfig(window=window, sentence_aligned=sentence_aligned)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise UserError(f"--window: {exc}") from None
    written = score_files(generations, suites, out, config, model)
    for path in written:
        typer.echo(str(path))
