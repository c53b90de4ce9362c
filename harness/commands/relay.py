"""`harness relay` (not built yet: its issue fills it in)."""

from __future__ import annotations

import typer


def relay_command(ctx: typer.Context) -> None:
    """Not built yet."""
    from harness.errors import UserError

    raise UserError("`harness relay` is not built yet")
