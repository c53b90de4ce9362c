"""`make bench`: list the benchmarks of this folder, or run one (`make bench NAME=probe
ARGS="--rss-tokens 1024"`, the same as `.venv/bin/python bench/probe.py --rss-tokens 1024`).

Benchmarks print ratios measured side by side in one run; they live in the repository, not
the installed package, because they are for developers with a checkout. `_*.py` are helpers.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def benchmarks(folder: Path = BENCH_DIR) -> dict[str, str]:
    """{name: the first paragraph of its docstring, on one line} of every NAME.py in `folder`
    (`_*.py` are helpers), read without importing them."""
    found = {}
    for path in sorted(folder.glob("[!_]*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        found[path.stem] = " ".join(doc.split("\n\n", 1)[0].split())
    return found


def command(argv: list[str], folder: Path = BENCH_DIR) -> list[str] | None:
    """The command line that runs benchmark argv[0] with the rest of argv (None: list them);
    SystemExit(2) with one line for a name that is not a benchmark."""
    if not argv or not argv[0]:
        return None
    found = benchmarks(folder)
    if argv[0] not in found:
        print(f"unknown benchmark '{argv[0]}' (available: {', '.join(found)})", file=sys.stderr)
        raise SystemExit(2)
    return [sys.executable, str(folder / f"{argv[0]}.py"), *argv[1:]]


def main(argv: list[str]) -> None:
    line = command(argv)
    if line is None:
        for name, summary in benchmarks().items():
            print(f"{name:<14} {summary}")
        return
    os.execv(line[0], line)  # the benchmark's exit code and signals are make's


if __name__ == "__main__":
    main(sys.argv[1:])
