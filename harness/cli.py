"""The `harness` command line. Each subcommand lives in `harness/commands/<name>.py`; this file
only wires them together, turns `UserError` into one line on stderr with exit code 2 and a crash
into exit code 3 (harness/errors.py lists the codes)."""

from __future__ import annotations

import sys
import traceback

import typer

from harness.commands import bench, export, gate, init, models, probe, relay, report, run, score
from harness.errors import INTERNAL_ERROR, UserError, exit_with_error

# harness.logs quiets the libraries at import, before any engine process is spawned
from harness.logs import configure_logging

app = typer.Typer(
    name="harness",
    help="How long does a system prompt keep steering a model? Divergence, adherence, policies.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _options(
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Show engine and library logs (vLLM, transformers)."
    ),
) -> None:
    """How long does a system prompt keep steering a model? Divergence, adherence, policies."""
    configure_logging(verbose)


app.add_typer(models.app, name="models")
app.command("init")(init.init_command)
app.command("run")(run.run_command)
app.command("gate")(gate.gate_command)
app.command("probe")(probe.probe_command)
app.command("relay")(relay.relay_command)
app.command("score")(score.score_command)
app.command("report")(report.report_command)
app.command("export")(export.export_command)
app.command("bench", context_settings=bench.CONTEXT_SETTINGS)(bench.bench_command)


def main() -> None:
    try:
        app()
    except UserError as exc:
        # One line, no traceback: bad input is the user's to fix, not a crash.
        exit_with_error(exc, exc.exit_code)
    except Exception:
        # A crash is not a verdict: exit 3, not Python's 1 (which means "a gate did not pass").
        traceback.print_exc()
        sys.exit(INTERNAL_ERROR)


if __name__ == "__main__":
    main()
