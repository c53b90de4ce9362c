"""Errors a user can act on. The CLI prints them as one line and exits with code 2."""

from __future__ import annotations

import sys
from typing import NoReturn


class HarnessError(Exception):
    """Base class of every error the harness raises on purpose."""


class UserError(HarnessError):
    """Bad input: config, model name, prompt or file. One clear line, exit code 2."""

    exit_code = 2


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
