"""The terminal summary that ends `harness run`: the gate verdicts first (what CI acts on),
then how a sequential run sampled, one row per (model, item, policy) with adherence AUC and its
CI, half-life, token overhead and alpha, then the report's path."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

from harness.analysis.gates import gate_name


def _num(value, fmt: str = "{:.2f}") -> str:
    return "–" if value is None or pd.isna(value) else fmt.format(float(value))


def _with_ci(row: pd.Series, base: str) -> str:
    value, low, high = row.get(base), row.get(f"{base}_low"), row.get(f"{base}_high")
    if value is None or pd.isna(value):
        return "–"
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return _num(value)
    return f"{float(value):.2f} [{float(low):.2f}, {float(high):.2f}]"


def _half_life(row: pd.Series) -> str:
    auc = row.get("auc")
    if bool(row.get("half_life_censored", False)) and not pd.isna(auc) and auc > 0:
        return "never halves"  # with nothing adhered to at first there is nothing to halve
    return _num(row.get("half_life"), "{:.0f}")


def summary_rows(summary: pd.DataFrame, with_model: bool = True) -> list[list[str]]:
    """Table cells of the conditions that have behaviour (untrained twins have alpha only)."""
    rows = []
    behaved = summary[summary["auc"].notna()] if "auc" in summary else summary.iloc[0:0]
    for _, row in behaved.iterrows():
        overhead = row.get("token_overhead")
        rows.append(
            [
                *([str(row["model"])] if with_model else []),
                str(row["item"]),
                str(row["policy"]),
                _with_ci(row, "auc"),
                _half_life(row),
                "–" if overhead is None or pd.isna(overhead) else f"{100 * overhead:.1f} %",
                _with_ci(row, "alpha_mean"),
            ]
        )
    return rows


def _console(console=None):
    from rich.console import Console

    # Not a terminal (a log, CI): wide enough that no cell wraps.
    return console or Console(width=None if sys.stdout.isatty() else 160)


def read_gates(run_dir: Path) -> pd.DataFrame:
    """gates.csv of a run folder (empty when the run had no gates or predates them)."""
    path = Path(run_dir) / "gates.csv"
    if not path.is_file() or path.stat().st_size == 0:
        return pd.DataFrame()
    return pd.read_csv(path, dtype={"model": str, "item": str, "policy": str})


def gates_failed(run_dir: Path) -> bool:
    """True when some gate check of the run folder failed (`harness run` then exits 1)."""
    gates = read_gates(run_dir)
    return bool(len(gates)) and not gates["passed"].astype(bool).all()


def print_gates(run_dir: Path, console=None) -> None:
    """One line per gate check, failures in red, under a count; nothing without gates."""
    from rich.markup import escape

    gates = read_gates(run_dir)
    if gates.empty:
        return
    console = _console(console)
    failed = int((~gates["passed"].astype(bool)).sum())
    head = f"{failed} of {len(gates)} gate checks failed" if failed else "every gate check passed"
    console.print(f"[bold]Gates:[/] {head} (gates.csv, junit.xml)")
    several = gates["model"].nunique() > 1
    for row in gates.to_dict("records"):
        verdict = "[green]PASS[/]" if row["passed"] else "[bold red]FAIL[/]"
        where = f" [{row['model']}]" if several else ""
        console.print(f"  {verdict} {escape(gate_name(row) + where)}: {escape(row['detail'])}")


def sampling_line(run_dir: Path) -> str:
    """How a sequential run sampled (manifest.json `sequential`): "" for a fixed count."""
    path = Path(run_dir) / "manifest.json"
    record = json.loads(path.read_text()).get("sequential") if path.is_file() else None
    if not record:
        return ""
    counts = Counter(c["stopped"] for c in record["conditions"])
    taken = [c["samples"] for c in record["conditions"] if c["stopped"] == "decided"]
    spread = (
        ""
        if not taken
        else f" at {min(taken)}" + (f"-{max(taken)}" if max(taken) > min(taken) else "")
    )
    parts = [f"{counts['decided']} decided{spread}"]
    if counts["max reached"]:
        parts.append(f"{counts['max reached']} still undecided at max {record['max']}")
    if counts["not gated"]:
        parts.append(f"{counts['not gated']} not gated (kept {record['min']})")
    looks = ", ".join(map(str, record["looks"]))
    return f"Sampled until decided (looks at {looks} samples): " + "; ".join(parts)


def print_summary(run_dir: Path, console=None) -> None:
    """Print the gate verdicts and the summary table of a finished run folder, then the
    report's path."""
    from rich.table import Table

    console = _console(console)
    print_gates(run_dir, console)
    if line := sampling_line(run_dir):
        console.print(line, markup=False)
    path = Path(run_dir) / "summary.csv"
    summary = pd.read_csv(path) if path.is_file() else pd.DataFrame()
    models = sorted(summary[summary["auc"].notna()]["model"].unique()) if len(summary) else []
    title = f"{Path(run_dir).name}: adherence and decay per condition"
    table = Table(title=title + (f" ({models[0]})" if len(models) == 1 else ""))
    headers = ["model"] if len(models) > 1 else []
    headers += ["item", "policy", "adherence AUC [95% CI]", "half-life (t)", "token overhead"]
    for header in (*headers, "alpha [95% CI]"):
        table.add_column(header, no_wrap=True)
    for cells in summary_rows(summary, with_model=len(models) > 1) if models else []:
        table.add_row(*cells)
    console.print(table)
    # plain print: a console would wrap a long path at its width
    print(f"report: {Path(run_dir) / 'report.html'}", flush=True)


__all__ = [
    "gates_failed", "print_gates", "print_summary", "read_gates", "sampling_line", "summary_rows",
]  # fmt: skip
