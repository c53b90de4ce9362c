"""`harness relay`: the exactly solvable linear relay model, per-layer decay table and relay.csv."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import UserError


def _default_out(prompt_len: int, layers: int, tokens: int, self_weight: float) -> Path:
    return Path("reports") / f"relay-P{prompt_len}-L{layers}-T{tokens}-W{self_weight:g}"


def relay_command(
    prompt_len: int = typer.Option(32, "--prompt-len", help="P: prompt positions."),
    layers: int = typer.Option(4, "--layers", help="L: number of layers."),
    tokens: int = typer.Option(100_000, "--tokens", help="T: continuation length (>= 16)."),
    out: Path | None = typer.Option(
        None, "--out", help="Output folder (default reports/relay-P..-L..-T..-W..)."
    ),
    self_weight: float = typer.Option(
        0.0, "--self-weight", help="W in [0, 1): attention = W * self + (1 - W) * uniform."
    ),
    sweep: bool = typer.Option(
        False, "--sweep", help="Also print alpha over [16, T] for L in 1,2,4,8 x W in 0..0.75."
    ),
) -> None:
    """Solve the linear relay model exactly; print alpha, local exponent and bound ratio per
    layer; write relay.csv (rows at ~200 geometric positions per layer, plus T/10)."""
    import time

    from rich.console import Console

    from harness.analysis.relay import (  # lazy: CLI start-up
        solve_relay,
        sweep_alpha,
        validate_relay,
        write_relay_csv,
        write_sweep_csv,
    )

    validate_relay(prompt_len, layers, tokens, self_weight)
    out = out or _default_out(prompt_len, layers, tokens, self_weight)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a folder")

    console = Console(width=120)
    started = time.perf_counter()
    result = solve_relay(prompt_len, layers, tokens, self_weight)
    elapsed = time.perf_counter() - started
    sweep_result = sweep_alpha(prompt_len, tokens) if sweep else None

    out.mkdir(parents=True, exist_ok=True)
    write_relay_csv(result, out / "relay.csv")
    if sweep_result is not None:
        write_sweep_csv(sweep_result, out / "relay_sweep.csv")

    console.print(_layer_table(result, elapsed))
    if sweep_result is not None:
        console.print(_sweep_table(sweep_result, prompt_len, tokens))
    console.print(f"wrote {out / 'relay.csv'}")


def _fmt(x: float, digits: int = 4) -> str:
    return "nan" if x != x else f"{x:.{digits}f}"


def _layer_table(result, elapsed: float):
    from rich.table import Table

    from harness.stats.text import bracket  # lazy: CLI start-up (harness.stats loads scipy)

    T = result.tokens
    title = (
        f"relay model  P={result.prompt_len}  L={result.layers}  T={T:,}  "
        f"W={result.self_weight:g}  (solved in {elapsed:.2f} s)"
    )
    table = Table(title=title)
    for column in (
        "layer",
        f"alpha [16, {T:,}]",
        "95% CI (block bootstrap)",
        "local alpha at T",
        "bound ratio T/10",
        "bound ratio T",
        "limit (1-W)^l/(l-1)!",
    ):
        table.add_column(column, justify="right")
    for row in result.summary:
        table.add_row(
            str(row.layer),
            _fmt(row.alpha),
            bracket(row.ci_low, row.ci_high, lambda x: _fmt(x, 3)),
            _fmt(row.local_alpha_T),
            _fmt(row.bound_ratio_T10),
            _fmt(row.bound_ratio_T),
            _fmt(row.bound_limit),
        )
    table.caption = "bound ratio of layer l: delta_l / (P (log t)^(l-1) / t)"
    return table


def _sweep_table(sweep: dict[tuple[int, float], float], prompt_len: int, tokens: int):
    from rich.table import Table

    weights = sorted({w for _, w in sweep})
    table = Table(title=f"alpha over [16, {tokens:,}]  P={prompt_len}: layers x self-weight W")
    table.add_column("L", justify="right")
    for w in weights:
        table.add_column(f"W={w:g}", justify="right")
    for n_layers in sorted({n for n, _ in sweep}):
        table.add_row(str(n_layers), *(_fmt(sweep[(n_layers, w)]) for w in weights))
    return table
