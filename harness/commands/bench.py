"""`harness bench NAME [OPTIONS...]`: run one of the repository's benchmarks (bench/NAME.py).

Benchmarks print ratios measured side by side in one run; they live in the repository, not
the installed package, because they are for developers with a checkout.
"""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import UserError

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"
# Options after NAME that `harness bench` does not know go to the benchmark script as given.
CONTEXT_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def bench_command(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="generation | probe | scoring"),
) -> None:
    """Run bench/NAME.py with this interpreter and print its figures.

    Options after NAME go to the benchmark (harness bench probe --rss-tokens 1024).

    The benchmark's own options: harness bench NAME -- --help
    """
    import subprocess
    import sys

    available = sorted(p.stem for p in BENCH_DIR.glob("[!_]*.py")) if BENCH_DIR.is_dir() else []
    if name not in available:
        raise UserError(
            f"unknown benchmark '{name}' (available: {', '.join(available) or 'none'}; "
            "benchmarks need a repository checkout)"
        )
    code = subprocess.call([sys.executable, str(BENCH_DIR / f"{name}.py"), *ctx.args])
    raise typer.Exit(code)
