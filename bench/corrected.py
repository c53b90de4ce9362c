"""Does the corrected adherence interval cover the truth? Simulated runs with a known true pass
rate and a check with a known error rate, through the project's own code, side by side with
the raw interval in one run.

    .venv/bin/python bench/corrected.py [--reps 400] [--quick]

Each simulated sample has 8 windows (8 turns of a conversation); every window truly complies
with probability p, `sticky` (a sample complies in every window or in none, as the embedded
model does) or `independent`. The check then reads each window on its own: a compliant window
passes with probability Se, a violating one fails with probability Sp. Its Se and Sp are
estimated from a labelled validation set drawn afresh in every run (`labelled` compliant and
violating texts, the check scored on each): what `harness.scoring.corrected.CheckRates` holds.
The windows are windows.csv rows fed to `harness.scoring.adherence.adherence_summary` (AUC
and its corrected estimate) and turns.csv rows fed to
`harness.analysis.conversations.turn_curves` (a(k), pointwise). Each run is an item with its
own check id, so every run carries its own validation draw.

Per cell: coverage of the truth p by the corrected interval and its mean width (a(k) read at
turn 4, one interval per run), beside the raw interval's coverage of p (the raw interval covers
the raw rate Se p + (1 - Sp)(1 - p), not p, so it is shown, not judged) and width. Verdict on
the corrected cells: bench/coverage.py's (bench/_cover.py: a one-sided exact binomial test per
cell, Holm over the cells at 5 %, a floor of 0.93; `--quick`: the quick floor); exits 1 when a
cell fails. Monte-Carlo error of a coverage near 0.95 over R runs: sqrt(0.05 x 0.95 / R)
(0.011 at 400).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import pandas as pd
from _cover import coverage_cell
from _cover import verdict as cover_verdict
from _simulated import WINDOWS, window_rows

from harness.analysis.conversations import turn_curves
from harness.scoring.adherence import adherence_summary
from harness.scoring.corrected import CheckRates

NS = (4, 8, 16, 32, 64)
PS = (0.5, 0.8, 0.95)
# (name, Se, Sp, labelled compliant, labelled violating): a language check on short replies
# validated on one language's replies (~50) against the other languages' (~350); a lenient
# check (passes most violations) on a balanced set
CHECKS = (
    ("short-text language", 0.925, 0.98, 50, 350),
    ("lenient", 0.98, 0.80, 200, 200),
)
PROCESSES = ("sticky", "independent")


def true_verdicts(process: str, reps: int, n: int, p: float, rng) -> np.ndarray:
    """(reps, n, WINDOWS) true compliance."""
    if process == "sticky":
        return np.repeat(rng.random((reps, n, 1)) < p, WINDOWS, axis=2)
    return rng.random((reps, n, WINDOWS)) < p


def read(truth: np.ndarray, se: float, sp: float, rng) -> np.ndarray:
    """The check's verdicts on texts of known truth: each read independently."""
    u = rng.random(truth.shape)
    return np.where(truth, u < se, u >= sp)


def validation(reps: int, se: float, sp: float, pos: int, neg: int, rng) -> dict:
    """One labelled-set draw per run -> {check id: CheckRates}."""
    tp, tf = rng.binomial(pos, se, reps), rng.binomial(neg, sp, reps)
    return {
        f"c{r:05d}": CheckRates(f"c{r:05d}", int(tp[r]), pos - int(tp[r]), int(tf[r]),
                                neg - int(tf[r]))
        for r in range(reps)
    }  # fmt: skip


def turn_rows(passes: np.ndarray) -> pd.DataFrame:
    """turns.csv rows of the same verdicts, window w read as turn w + 1 of a conversation."""
    w = window_rows(passes, check_per_run=True)
    return w.assign(turn=w["window"] + 1, pressure=False, history="generated",
                    conversation_id="")  # fmt: skip


def cover(low, high, truth: float, metric: str = "", label: str = ""):
    """The cell (bench/_cover.py) of one interval per run."""
    return coverage_cell("corrected", metric, label, low, high, truth)


def one_cell(process: str, check: tuple, n: int, p: float, reps: int, rng) -> dict:
    name, se, sp, pos, neg = check
    seen = read(true_verdicts(process, reps, n, p, rng), se, sp, rng)
    rates = validation(reps, se, sp, pos, neg, rng)
    summaries = adherence_summary(window_rows(seen, check_per_run=True), rates=rates)
    auc = pd.DataFrame([r.model_dump() for r in summaries])
    turns = turn_curves(turn_rows(seen), rates=rates)
    turns = turns[turns["turn"] == 4]  # one a(k) interval per run: independent cells
    label = f"{process} {name} n={n} p={p}"
    return dict(
        process=process, check=name, n=n, p=p,
        auc=cover(auc["auc_corrected_low"], auc["auc_corrected_high"], p, "auc", label),
        auc_raw=cover(auc["auc_low"], auc["auc_high"], p),
        a=cover(turns["a_corrected_low"], turns["a_corrected_high"], p, "a(k)", label),
        a_raw=cover(turns["a_low"], turns["a_high"], p),
    )  # fmt: skip


def _fmt(cell) -> str:
    return f"{cell.rate:.3f} {cell.width:.3f}"


def print_cells(rows: list[dict]) -> None:
    for metric in ("auc", "a"):
        label = "per-sample AUC" if metric == "auc" else "a(k), pointwise"
        print(f"\n{label}: corrected coverage of p and mean width | raw coverage of p, width")
        print(f"{'process':<12} {'check':<20} {'n':>3}  " + "  ".join(
            f"{'p=' + str(p):<27}" for p in PS))  # fmt: skip
        for process in PROCESSES:
            for check in CHECKS:
                for n in NS:
                    cells = [r for r in rows if (r["process"], r["check"], r["n"]) ==
                             (process, check[0], n)]  # fmt: skip
                    text = "  ".join(
                        f"{_fmt(r[metric])} | {_fmt(r[metric + '_raw'])}" for r in cells
                    )
                    print(f"{process:<12} {check[0]:<20} {n:>3}  {text}")


def verdict(rows: list[dict], quick: bool = False) -> int:
    """The exit code: bench/_cover.py's verdict over the corrected cells."""
    raw = min(r[m + "_raw"].rate for r in rows for m in ("auc", "a"))
    widths = {n: np.mean([r["auc"].width for r in rows if r["n"] == n]) for n in NS}
    print(f"\nthe raw interval's lowest coverage of p (not judged): {raw:.3f}")
    print("mean corrected AUC width by n: " + ", ".join(f"{n}: {w:.3f}" for n, w in widths.items()))
    return cover_verdict([r[m] for r in rows for m in ("auc", "a")], quick=quick)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400, help="simulated runs per cell")
    parser.add_argument("--quick", action="store_true", help="100 runs per cell")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    reps = 100 if args.quick else args.reps
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = [
        one_cell(process, check, n, p, reps, rng)
        for process in PROCESSES for check in CHECKS for n in NS for p in PS
    ]  # fmt: skip
    print(f"{reps} simulated runs per cell, {WINDOWS} windows (turns) per sample; 95 % intervals")
    for name, se, sp, pos, neg in CHECKS:
        print(f"check {name}: Se {se}, Sp {sp}, validated on {pos} compliant + {neg} violating")
    print_cells(rows)
    code = verdict(rows, quick=args.quick)
    print(f"({time.perf_counter() - start:.0f} s; MC error ~{math.sqrt(0.0475 / reps):.3f})")
    return code


if __name__ == "__main__":
    sys.exit(main())
