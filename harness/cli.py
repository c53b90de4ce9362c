"""The `harness` command line. Each subcommand lives in `harness/commands/<name>.py`; this file
only wires them together, turns `UserError` into one line on stderr with exit code 2 and a crash
into exit code 3 (harness/errors.py lists the codes)."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import traceback

import typer

from harness.commands import (
    checks,
    export,
    gate,
    init,
    models,
    probe,
    relay,
    report,
    run,
    score,
)
from harness.errors import (
    INTERNAL_ERROR,
    STOP_SIGNALS,
    Interrupted,
    UserError,
    exit_with_error,
)

# harness.verbosity quiets the libraries at import, before any engine process is spawned
from harness.verbosity import configure_logging

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
app.command("checks")(checks.checks_command)
app.command("report")(report.report_command)
app.command("export")(export.export_command)


_received = STOP_SIGNALS  # the signal that stopped this command, if one did
# After a stop signal the engines get this long to shut down before the process ends anyway:
# a library may swallow the interrupt or block in its shutdown, and the engine processes die
# with this one in any case (harness/engines/lifetime.py).
SHUTDOWN_GRACE_S = 30.0


def _interrupt(signum: int, frame) -> None:
    if _received:  # a second signal: stop now
        _force_exit()
    _received.append(signum)
    timer = threading.Timer(SHUTDOWN_GRACE_S, _force_exit)
    timer.daemon = True
    timer.start()
    raise Interrupted(signum)


def _resume_line() -> str:
    signum = _received[0] if _received else signal.SIGINT
    command = shlex.join(["harness", *sys.argv[1:]])
    return (
        f"interrupted by {signal.Signals(signum).name}: engines stopped, finished units kept; "
        f"re-run `{command}` to resume"
    )


def _exit_interrupted() -> None:
    """One line saying how the command stopped and how to go on; exit 128 + the signal."""
    exit_with_error(_resume_line(), 128 + (_received[0] if _received else signal.SIGINT))


def _force_exit() -> None:
    # os._exit below runs no `finally`, so the locks go here
    from harness.store import remove_held_locks  # lazy: pydantic, CLI start-up

    remove_held_locks()
    sys.stdout.flush()
    sys.stderr.write(f"error: {_resume_line()}\n")
    sys.stderr.flush()
    os._exit(128 + (_received[0] if _received else signal.SIGINT))


def main() -> None:
    # SIGTERM (a CI timeout, `kill`) and SIGINT unwind like Ctrl-C, so the stages' `finally`
    # blocks stop the engines; SIGKILL is met by the engine processes (engines/lifetime.py)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    # every process the command starts through multiprocessing (vLLM's engine core, any
    # other) dies with it: process-wide here, where the harness owns the process
    from harness.engines.lifetime import bind_engine_children  # lazy: pydantic, CLI start-up

    bind_engine_children()
    try:
        app()
    except KeyboardInterrupt:
        _exit_interrupted()
    except SystemExit:
        if _received:  # typer turns the interrupt into exit 130 with a bare "Aborted"
            _exit_interrupted()
        raise
    except UserError as exc:
        # One line, no traceback: bad input is the user's to fix, not a crash.
        exit_with_error(exc, exc.exit_code)
    except Exception:
        # A crash is not a verdict: exit 3, not Python's 1 (which means "a gate did not pass").
        traceback.print_exc()
        sys.exit(INTERNAL_ERROR)


if __name__ == "__main__":
    main()
