"""`harness bench NAME [OPTIONS...]`: run one of the repository's benchmarks (bench/NAME.py).

Benchmarks print ratios measured side by side in one run; they live in the repository, not
the installed package, because they are for developers with a checkout.
"""

from __future__ import annotations

import ast
from pathlib import Path

import typer

from harness.errors import UserError

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"
# Options after NAME that `harness bench` does not know go to the benchmark script as given.
CONTEXT_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def benchmarks(folder: Path = BENCH_DIR) -> dict[str, str]:
    """{name: the first paragraph of its docstring, on one line} of every bench/NAME.py
    (`_*.py` are helpers), read without importing them; {} outside a repository checkout."""
    if not folder.is_dir():
        return {}
    found = {}
    for path in sorted(folder.glob("[!_]*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        found[path.stem] = " ".join(doc.split("\n\n", 1)[0].split())
    return found


def bench_command(
    ctx: typer.Context,
    name: str = typer.Argument(
        None, metavar="NAME", help=" | ".join(benchmarks()) or "(none: needs a checkout)"
    ),
) -> None:
    """Run bench/NAME.py with this interpreter and print its figures; without NAME, list the
    benchmarks.

    Options after NAME go to the benchmark (harness bench probe --rss-tokens 1024).

    The benchmark's own options: harness bench NAME -- --help
    """
    import subprocess
    import sys

    found = benchmarks()
    if name is None:
        for bench, line in found.items():
            typer.echo(f"{bench:<14} {line}")
        return
    available = list(found)
    if name not in available:
        raise UserError(
            f"unknown benchmark '{name}' (available: {', '.join(available) or 'none'}; "
            "benchmarks need a repository checkout)"
        )
    code = subprocess.call([sys.executable, str(BENCH_DIR / f"{name}.py"), *ctx.args])
    raise typer.Exit(code)
