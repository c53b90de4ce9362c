"""`harness models list|prepare`."""

from __future__ import annotations

import typer

app = typer.Typer(help="The model zoo: list names, convert/cache a model.", no_args_is_help=True)


@app.command("list")
def list_command(
    extra: list[str] = typer.Argument(None, help="More names or folders to show."),
) -> None:
    """Show every built-in model: name, source, parameters, layers, hidden size, cached."""
    from rich.console import Console
    from rich.table import Table

    from harness.models import list_models, model_info  # lazy: CLI start-up

    rows = list_models() + [model_info(name) for name in extra or []]
    table = Table(title="models")
    for column in ("name", "source", "parameters", "layers", "hidden", "cached"):
        table.add_column(column)
    for info in rows:
        params = f"{info.parameters / 1e6:.1f}M" if info.parameters else "?"
        table.add_row(
            info.name,
            info.source,
            params,
            str(info.layers or "?"),
            str(info.hidden_size or "?"),
            "yes" if info.cached else "no",
        )
    Console(width=160).print(table)


@app.command("prepare")
def prepare_command(
    name: str = typer.Argument(..., help="Model name, e.g. smollm2-135m-instruct"),
) -> None:
    """Convert/initialise NAME once and cache the safetensors folder; prints its path."""
    from rich.console import Console

    from harness.models import parse_model_name, resolve_model  # lazy: CLI start-up

    parse_model_name(name)  # a bad name fails before the spinner starts
    console = Console(stderr=True)
    with console.status(f"preparing {name} ..."):
        resolved = resolve_model(name)
    print(resolved.path)
