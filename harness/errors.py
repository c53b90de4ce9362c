"""Errors a user can act on, and the CLI's exit codes.

0: done, every gate passed (or none was set); 1: a gate failed or is undecided (the verdict a
CI job acts on); 2: bad input, one line naming it, nothing written; 3: an internal error (a
traceback: the harness's fault, never a verdict); 130 / 143: stopped by SIGINT / SIGTERM (128 +
the signal, as a shell reports it) after a clean shutdown, with the line to resume; 4: a
hosted run stopped before crossing its `budget` (harness/engines/pricing.py), every answer
kept. Python's own exit code for an uncaught exception is 1, which would read as "a gate failed":
`harness.cli.main` maps it to 3, as pytest does.
"""

from __future__ import annotations

import sys
from typing import NoReturn

VERDICT_NOT_PASSED = 1
BAD_INPUT = 2
INTERNAL_ERROR = 3


class HarnessError(Exception):
    """Base class of every error the harness raises on purpose."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM (or SIGINT) received: unwinds like Ctrl-C, so every `finally` closes its engine."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# The stop signal this process received (harness.cli's handler records it before raising
# Interrupted). A library that swallows the KeyboardInterrupt leaves it here for
# `raise_if_stopped`: vLLM's engine start runs inside a socket context that catches it
# (vllm.utils.network_utils.zmq_socket_ctx), and the run used to go on for the 30 s grace.
STOP_SIGNALS: list[int] = []


def raise_if_stopped() -> None:
    """Raise Interrupted again if a stop signal arrived while a library had control."""
    if STOP_SIGNALS:
        raise Interrupted(STOP_SIGNALS[0])


class UserError(HarnessError):
    """Bad input: config, model name, prompt or file. One clear line, exit code 2."""

    exit_code = BAD_INPUT


def exit_with_error(message: object, code: int = 2) -> NoReturn:
    """Print `error: MESSAGE` as exactly one newline-terminated line on stderr and exit.

    A message that spans lines (a library's exception text quoted in it) is joined into one,
    so scripts and tests can rely on the last stderr line being the whole error.
    """
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    sys.stdout.flush()  # what the command printed before failing comes out first
    sys.stderr.write(f"error: {text}\n")
    sys.stderr.flush()
    sys.exit(code)


def notice(message: str) -> None:
    """Print `note: MESSAGE` on stderr: what a command decided for the user without asking
    (one line, before any generation or scoring), never an error."""
    sys.stderr.write(f"note: {message}\n")
    sys.stderr.flush()
