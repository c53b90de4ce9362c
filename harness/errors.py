"""Errors a user can act on. The CLI prints them as one line and exits with code 2."""


class HarnessError(Exception):
    """Base class of every error the harness raises on purpose."""


class UserError(HarnessError):
    """Bad input: config, model name, prompt or file. One clear line, exit code 2."""

    exit_code = 2
