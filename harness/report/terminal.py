"""The terminal summary that ends `harness run`: the prescription first (per rule: does it
hold, where it breaks, what fixes it), the gate verdicts (what CI acts on), then how a
sequential run sampled, one row per (model, item, policy) with adherence AUC and its CI,
half-life, token overhead and alpha, then the report's path."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

from harness.analysis.gate_rows import gate_name, verdicts_of
from harness.report.instrument import UNDECIDED_SHARE
from harness.report.prescription import HEADERS, cells, error_control_line, headline
from harness.report.truncation import read_truncation_line
from harness.results import PrescriptionRow
from harness.stats.text import interval_text


def _num(value, fmt: str = "{:.2f}") -> str:
    return "–" if value is None or pd.isna(value) else fmt.format(float(value))


def _with_ci(row: pd.Series, base: str) -> str:
    """`0.95 [0.41, 1.00] n=4`: the estimate, its interval as stored and the units it rests on
    (`<base>_n`, else the row's `n`); `n=1, no interval` where none could be formed."""
    value, low, high = row.get(base), row.get(f"{base}_low"), row.get(f"{base}_high")
    counts = [row.get(c) for c in (f"{base}_n", "n") if not pd.isna(row.get(c, float("nan")))]
    n_text = f" n={int(counts[0])}" if counts else ""
    if value is None or pd.isna(value):
        return "–"
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return _num(value) + (f"{n_text}, no interval" if n_text else "")
    return interval_text(value, low, high, ".2f") + n_text


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
    """True when some gate check of the run folder did not pass, failed or undecided
    (`harness run` and `harness gate` then exit 1: undecided never ships)."""
    gates = read_gates(run_dir)
    return bool(len(gates)) and bool((verdicts_of(gates) != "pass").any())


def gates_head(verdicts: pd.Series) -> str:
    """`every gate check passed`, or the counts of the others: `1 of 4 gate checks failed,
    2 undecided`."""
    failed, undecided = int((verdicts == "fail").sum()), int((verdicts == "undecided").sum())
    if not failed and not undecided:
        return "every gate check passed"
    parts = [f"{failed} failed"] if failed else []
    parts += [f"{undecided} undecided"] if undecided else []
    return f"{len(verdicts) - failed - undecided} of {len(verdicts)} gate checks passed, " + (
        ", ".join(parts)
    )


def family_line(gates: pd.DataFrame) -> str:
    """The gates' error over the whole run, from gates.csv's `level` and `family`: under Holm
    (`stats.family: holm`, the default) one budget for the family's bounds, beside what the
    same bounds would risk per check; else each tested bound errs with probability <= 1 - its
    level, so the chance that any verdict is wrong is at most their sum (Bonferroni). "" without
    interval checks or a level column (an older gates.csv)."""
    if "level" not in gates.columns:
        return ""
    checked = gates[pd.to_numeric(gates["level"], errors="coerce").notna()]
    if checked.empty:
        return ""
    bounds = checked["min"].notna().astype(int) + checked["max"].notna().astype(int)
    family = checked["family"].astype(str) if "family" in checked.columns else None
    if family is not None and (family == "holm").any():
        return _holm_line(checked, bounds, family)
    errors = (1 - checked["level"].astype(float)) * bounds
    each = sorted({f"{100 * (1 - v):.3g} %" for v in checked["level"].astype(float)})
    total = min(float(errors.sum()), 1.0)
    return (
        f"{int(bounds.sum())} bounds tested, each wrong with probability <= {' or '.join(each)}; "
        f"the chance that any verdict is wrong is <= {100 * total:.3g} % (their sum"
        + ("" if total < 0.0501 else "; stats.family: holm bounds it by 1 - stats.level")
        + ")"
    )


def _holm_line(checked: pd.DataFrame, bounds: pd.Series, family: pd.Series) -> str:
    """`Holm over 8 bounds (stats.family: holm): the chance that any of their verdicts is
    wrong is <= 5 % (per check at stats.level it would be <= 40 %)`, and the bounds outside."""
    inside = family == "holm"
    alpha = 1 - float(checked.loc[inside, "family_level"].iloc[0])
    m = int(bounds[inside].sum())
    line = (
        f"Holm over {m} bounds (stats.family: holm): the chance that any of their verdicts is "
        f"wrong is <= {100 * alpha:.3g} % (per check, stats.family: none, it would be "
        f"<= {100 * min(m * alpha, 1.0):.3g} %)"
    )
    outside = ~inside
    if outside.any():
        each = sorted({f"{100 * (1 - v):.3g} %" for v in checked.loc[outside, "level"]})
        line += (
            f"; {int(bounds[outside].sum())} bounds outside it (no one-sided bounds at other "
            f"levels), each wrong with probability <= {' or '.join(each)}"
        )
    return line


VERDICT_MARKUP = {
    "pass": "[green]PASS[/]",
    "fail": "[bold red]FAIL[/]",
    "undecided": "[bold yellow]UNDECIDED[/]",
}


def print_gates(run_dir: Path, console=None) -> None:
    """One line per gate check (PASS, FAIL in red, UNDECIDED in yellow, each detail with the
    interval and its n), under the counts; nothing without gates."""
    from rich.markup import escape

    gates = read_gates(run_dir)
    if gates.empty:
        return
    console = _console(console)
    verdicts = verdicts_of(gates)
    console.print(f"[bold]Gates:[/] {gates_head(verdicts)} (gates.csv, junit.xml)")
    if family := family_line(gates):
        console.print(f"  {escape(family)}")
    several = gates["model"].nunique() > 1
    for row, verdict in zip(gates.to_dict("records"), verdicts, strict=True):
        where = f" [{row['model']}]" if several else ""
        mark = VERDICT_MARKUP.get(verdict, escape(verdict))
        console.print(f"  {mark} {escape(gate_name(row) + where)}: {escape(row['detail'])}")


def read_prescription(run_dir: Path) -> list:
    """The rows of the run folder's prescription.csv, which the report writes ([] where there
    is none: no rule was judged, or the folder predates it)."""
    path = Path(run_dir) / "prescription.csv"
    if not path.is_file() or not path.stat().st_size:
        return []
    frame = pd.read_csv(path, dtype={"model": str, "item": str, "rule": str},
                        keep_default_na=False, na_values=[""])  # fmt: skip
    text = ["sentence", "basis", "fix", "rejected", "breaks_axis", "breaks_note", "error_control"]
    text = [c for c in text if c in frame.columns]  # the last two: not in older files
    frame[text] = frame[text].fillna("")
    return [PrescriptionRow(**row) for row in frame.to_dict("records")]


def print_prescription(run_dir: Path, console=None) -> None:
    """The prescription first: per rule of each item, does it hold, where it breaks, what
    fixes it at what cost (harness.report.prescription); nothing where no rule was judged."""
    from rich.markup import escape
    from rich.table import Table

    rows = read_prescription(run_dir)
    if not rows:
        return
    console = _console(console)
    several = len({r.model for r in rows}) > 1
    table = Table(title=f"What breaks and what fixes it: {escape(headline(rows))}",
                  title_justify="left")  # fmt: skip
    for header in HEADERS:
        table.add_column(header)
    for row in rows:
        table.add_row(*(escape(c) for c in cells(row, several)))
    console.print(table)
    if line := error_control_line(rows):
        console.print(escape(line))


def sampling_line(run_dir: Path) -> str:
    """How a sequential run sampled (manifest.json `sequential`): "" for a fixed count."""
    path = Path(run_dir) / "manifest.json"
    record = json.loads(path.read_text()).get("sequential") if path.is_file() else None
    return sampling_summary(record)


def sampling_summary(record: dict | None) -> str:
    """The terminal's and the report's one line on manifest.json's `sequential` record."""
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


def undecided_line(summary: pd.DataFrame) -> str:
    """The conditions with more than UNDECIDED_SHARE of their windows without a verdict
    ("" when none): their AUC stands for the decided windows only."""
    if "undecided_window_share" not in summary.columns:
        return ""
    over = summary[summary["undecided_window_share"] > UNDECIDED_SHARE]
    if over.empty:
        return ""
    parts = [
        f"{r.item}/{r.policy} {100 * r.undecided_window_share:.1f} %" for r in over.itertuples()
    ]
    return "Windows without a verdict (left out of the AUC; see the report): " + ", ".join(parts)


def print_summary(run_dir: Path, console=None) -> None:
    """Print the gate verdicts and the summary table of a finished run folder, then the
    report's path."""
    from rich.table import Table

    console = _console(console)
    print_prescription(run_dir, console)
    print_gates(run_dir, console)
    if line := sampling_line(run_dir):
        console.print(line, markup=False)
    path = Path(run_dir) / "summary.csv"
    summary = pd.read_csv(path) if path.is_file() else pd.DataFrame()
    models = sorted(summary[summary["auc"].notna()]["model"].unique()) if len(summary) else []
    title = f"{Path(run_dir).name}: adherence and decay per condition"
    table = Table(title=title + (f" ({models[0]})" if len(models) == 1 else ""))
    headers = ["model"] if len(models) > 1 else []
    headers += [
        "item",
        "policy",
        "adherence AUC, all rules [95% CI]",
        "half-life (t)",
        "token overhead",
    ]
    for header in (*headers, "alpha [95% CI]"):
        table.add_column(header, no_wrap=True)
    for row_cells in summary_rows(summary, with_model=len(models) > 1) if models else []:
        table.add_row(*row_cells)
    console.print(table)
    if line := undecided_line(summary):
        console.print(line, markup=False)
    if line := read_truncation_line(run_dir):
        console.print(line, markup=False)
    # plain print: a console would wrap a long path at its width
    print(f"report: {Path(run_dir) / 'report.html'}", flush=True)


__all__ = [
    "gates_failed", "print_gates", "print_prescription", "print_summary", "read_gates",
    "sampling_line", "summary_rows",
]  # fmt: skip
