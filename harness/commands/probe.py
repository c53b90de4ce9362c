"""`harness probe` (not built yet: its issue fills it in)."""

from __future__ import annotations

import typer


def probe_command(ctx: typer.Context) -> None:
    """Not built yet."""
    from harness.errors import UserError

    raise UserError("`harness probe` is not built yet")
