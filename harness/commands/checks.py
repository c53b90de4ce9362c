"""`harness checks LABELS.jsonl`: a check's error rate on your own labelled replies.

Each line is a labelled reply, `{"text": ..., "check": {...a suite's check entry...},
"expected": true|false}` (optional: `id`, `stratum`, `window`, `reminder`, `reminder_at`),
scored through the run's own scoring path and printed as the table of docs/checks.md:
sensitivity and specificity with exact intervals, and abstentions, per check and length band.
"""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import UserError


def checks_command(
    labels: Path = typer.Argument(..., help="JSONL of labelled replies (text, check, expected)."),
    languages: list[str] = typer.Option(
        None,
        "--language",
        help="A candidate language of the language checks (repeatable; default: the twelve "
        "of scoring.languages).",
    ),
    model: str = typer.Option(
        None, "--model", help="Model whose tokenizer cuts rows with 'window' (default: embedded)."
    ),
    by: str = typer.Option(
        "check", "--by", help="The check column: check (type), check_id, or label (target)."
    ),
) -> None:
    """Score labelled replies and print each check's sensitivity, specificity and abstentions."""
    from harness.config.run import ScoringConfig  # lazy: CLI start-up
    from harness.scoring.validation import read_labelled, score_labelled  # lazy: CLI start-up
    from harness.scoring.validation_table import table_lines  # lazy: CLI start-up

    if by not in ("check", "check_id", "label"):
        raise UserError(f"--by: '{by}' is not one of check, check_id, label")
    rows = read_labelled(labels)
    candidates = None
    if languages:
        try:
            candidates = ScoringConfig(languages=languages).languages
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise UserError(f"--language: {msg}") from None
    tokenizer = None
    if any(row.window is not None for row in rows):
        from harness.scoring.io import load_tokenizer  # lazy: loads a model's tokenizer

        tokenizer = load_tokenizer(model)
    scored = score_labelled(rows, candidates=candidates, tokenizer=tokenizer)
    typer.echo(f"{labels}: {len(rows)} labelled replies")
    for line in table_lines(scored, by=by):
        typer.echo(line)
