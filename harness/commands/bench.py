"""`harness bench NAME`: run one of the repository's benchmarks (bench/NAME.py).

Benchmarks print ratios measured side by side in one run; they live in the repository, not
the installed package, because they are for developers with a checkout.
"""

from __future__ import annotations

from pathlib import Path

import typer

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def bench_command(
    name: str = typer.Argument(..., help="generation | probe | scoring"),
    args: list[str] = typer.Argument(None, help="Arguments passed to the benchmark."),
) -> None:
    """Run bench/NAME.py with this interpreter and print its figures."""
    import subprocess
    import sys

    from harness.errors import UserError

    available = sorted(p.stem for p in BENCH_DIR.glob("*.py")) if BENCH_DIR.is_dir() else []
    if name not in available:
        raise UserError(
            f"unknown benchmark '{name}' (available: {', '.join(available) or 'none'}; "
            "benchmarks need a repository checkout)"
        )
    code = subprocess.call([sys.executable, str(BENCH_DIR / f"{name}.py"), *(args or [])])
    raise typer.Exit(code)
