"""`harness score LOGS.jsonl --suite tasks/x.yaml --out DIR`: windows.csv + adherence; a chat
log (OpenAI chat JSONL, an Inspect AI eval log or OpenTelemetry GenAI spans: `--format`) also
gets turns.csv, turn_adherence.csv, conversations.csv and report.html."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import UserError


def score_command(
    generations: Path = typer.Argument(
        ...,
        help="generations.jsonl (harness records), JSONL of {item, text}, or a chat log "
        '(one conversation per line: {"messages": [...], "id"?, "item"?} or a list of messages).',
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
    item: str = typer.Option(
        None,
        "--item",
        help="Chat logs: the item of every conversation that names none and whose system "
        "message is no item's system (or is the system of several items).",
    ),
    worst: int | None = typer.Option(
        None,
        "--worst",
        min=1,
        help="Chat logs: the failing conversations the report shows [default: 20].",
    ),
    no_text: bool = typer.Option(
        False, "--no-text", help="Chat logs: leave every text of the log out of the report."
    ),
    log_format: str = typer.Option(
        "auto",
        "--format",
        help="The log's format: chat (OpenAI chat JSONL), inspect (an Inspect AI eval log), "
        "otel (OpenTelemetry GenAI spans, OTLP/JSON, semconv 1.37.0), or auto (by content).",
    ),
) -> None:
    """Score transcripts window by window (chat logs turn by turn too); write the CSVs."""
    from harness.chatlogs import is_chat_log  # lazy: CLI start-up
    from harness.config import ScoringConfig  # lazy: CLI start-up
    from harness.config_files import load_suite  # lazy: CLI start-up
    from harness.interop import FORMATS, detect_format  # lazy: CLI start-up
    from harness.pipeline import run_score  # lazy: CLI start-up
    from harness.plan import plan_score  # lazy: CLI start-up
    from harness.scoring.io import score_files  # lazy: CLI start-up

    suites = [load_suite(path) for path in suite]
    try:
        config = ScoringConfig(window=window, sentence_aligned=sentence_aligned)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise UserError(f"--window: {exc}") from None
    if log_format not in FORMATS:
        raise UserError(f"--format: '{log_format}' is not one of {', '.join(FORMATS)}")
    if log_format == "auto" and generations.is_file():
        log_format = detect_format(generations)
    if log_format == "chat" and not is_chat_log(generations):
        if item is not None:
            raise UserError("--item: only for chat logs (lines with 'messages')")
        for path in score_files(generations, suites, out, config, model):
            typer.echo(str(path))
        return
    plan = plan_score(generations, suites, out, config, model, item, worst, not no_text, log_format)
    ctx = run_score(plan)
    for name in [*ctx.outputs, "report.html"]:
        typer.echo(str(out / name))
    typer.echo(f"{ctx.scores.conversations} logged conversations scored", err=True)
