"""Do the harness's 95 % intervals cover the truth? Simulated runs with a known pass rate,
through the project's own summary code, side by side in one run.

    .venv/bin/python bench/coverage.py [--reps 400] [--quick]

Each simulated sample has 8 windows; every window passes with probability p (so the true a(t),
AUC and final adherence are p). Processes, by how a sample's windows hang together: `sticky`
(a sample complies in every window or in none, as the embedded model does), `markov 0.7` (a
window keeps the previous window's draw with probability 0.7, else draws afresh: in between),
`independent` windows. The rows are windows.csv rows fed to
`harness.scoring.adherence.adherence_summary` (AUC, final) and `adherence_curves` (a(t),
pointwise); paired differences are two policies whose samples share their draws (policy p,
`none` p - 0.2, the harness's seed pairing), fed to `harness.analysis.policies.compare_policies`
(delta AUC). Per cell: coverage (share of runs whose interval holds the truth) and mean width,
with the mean width of the exact binomial (Clopper-Pearson) interval on n pass/fail samples at
p beside it. Sequential: samples arrive in batches of 4 up to 64, and the interval is looked at
after every batch; a run covers when every look held the truth: the confidence sequence
(`anytime=True`) beside the fixed-n interval peeked at the same way.

Goal: every cell >= 0.94; on 0/1 data (sticky) widths within 1.25 x Clopper-Pearson.
Monte-Carlo error of a coverage near 0.95 over R runs: sqrt(0.05 x 0.95 / R) (0.011 at 400).
"""

from __future__ import annotations

import argparse
import inspect
import math
import time

import numpy as np
import pandas as pd
from _simulated import WINDOWS, window_rows
from scipy import stats

from harness.analysis.policies import compare_policies
from harness.scoring.adherence import adherence_curves, adherence_summary

PROCESSES = {"sticky": 1.0, "markov 0.7": 0.7, "independent": 0.0}  # name -> persistence
NS = (4, 8, 16, 32, 64)
PS = (0.5, 0.7, 0.9, 0.95, 0.99)
SEQ_PS = (0.7, 0.9)
BATCH, SEQ_MAX = 4, 64
GAP = 0.2  # paired: `none` passes at p - GAP


def uniforms(rho: float, reps: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n, WINDOWS) uniforms; window w keeps window w-1's with probability rho."""
    u = rng.random((reps, n, WINDOWS))
    keep = rng.random((reps, n, WINDOWS)) < rho
    for w in range(1, WINDOWS):
        u[:, :, w] = np.where(keep[:, :, w], u[:, :, w - 1], u[:, :, w])
    return u


def _bounds(frame: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The interval columns of `metric`, <metric>_low/_high (or the older names)."""
    for low, high in ((f"{metric}_low", f"{metric}_high"), (f"{metric}_lo", f"{metric}_hi")):
        if low in frame.columns:
            return frame[low].to_numpy(float), frame[high].to_numpy(float)
    if metric == "a" and "lo" in frame.columns:
        return frame["lo"].to_numpy(float), frame["hi"].to_numpy(float)
    return None


def _anytime_supported() -> bool:
    return "anytime" in inspect.signature(adherence_summary).parameters


def summary(frame: pd.DataFrame, anytime: bool = False) -> pd.DataFrame:
    rows = adherence_summary(frame, anytime=True) if anytime else adherence_summary(frame)
    return pd.DataFrame([r.model_dump() for r in rows])


def cp_width(n: int, p: float) -> float:
    """Mean width of the Clopper-Pearson interval of k ~ Binomial(n, p) passes in n."""
    k = np.arange(n + 1)
    widths = [
        (lambda ci: ci.high - ci.low)(stats.binomtest(int(j), n).proportion_ci(0.95, "exact"))
        for j in k
    ]
    return float(np.dot(stats.binom.pmf(k, n, p), widths))


def cell(low: np.ndarray, high: np.ndarray, truth: float) -> tuple[float, float]:
    covered = (low <= truth + 1e-12) & (truth - 1e-12 <= high)
    return float(covered.mean()), float(np.nanmean(high - low))


def fixed_cells(reps: int, rng: np.random.Generator) -> list[dict]:
    out = []
    for name, rho in PROCESSES.items():
        for n in NS:
            for p in PS:
                u = uniforms(rho, reps, n, rng)
                frame = window_rows(u < p)
                summ, curves = summary(frame), pd.DataFrame(adherence_curves(frame))
                row = dict(process=name, n=n, p=p, cp=cp_width(n, p))
                for metric, table in (("auc", summ), ("final", summ), ("a", curves)):
                    bounds = _bounds(table, metric)
                    row[metric] = cell(*bounds, p) if bounds else None
                pair = pd.concat([window_rows(u < p, "restate"), window_rows(u < p - GAP)])
                pol = compare_policies(pair, None)
                pol = pol[(pol["metric"] == "auc") & (pol["policy"] == "restate")]
                pol = pol[pol["item"] != "all"]
                delta = pol["delta_low"].to_numpy(), pol["delta_high"].to_numpy()
                row["delta auc"] = cell(*delta, GAP)
                out.append(row)
    return out


def sequential_cells(reps: int, rng: np.random.Generator) -> list[dict]:
    """Coverage over the whole path of looks after every batch, CS vs fixed-n peeked."""
    out = []
    designs = [("fixed-n, peeked", False)] + [("anytime CS", True)] * _anytime_supported()
    for name in ("sticky", "independent"):
        for p in SEQ_PS:
            passes = uniforms(PROCESSES[name], reps, SEQ_MAX, rng) < p
            for design, anytime in designs:
                held = np.ones(reps, dtype=bool)
                for m in range(BATCH, SEQ_MAX + 1, BATCH):
                    low, high = _bounds(summary(window_rows(passes[:, :m]), anytime), "auc")
                    held &= (low <= p) & (p <= high)
                out.append(dict(process=name, p=p, design=design, coverage=float(held.mean())))
    return out


def _fmt(value: tuple[float, float] | None) -> str:
    return "      -      " if value is None else f"{value[0]:.3f} {value[1]:.3f}"


def print_fixed(rows: list[dict]) -> None:
    for metric in ("auc", "final", "a", "delta auc"):
        print(f"\n{metric}: coverage and mean width per cell (exact binomial width in brackets)")
        print(f"{'process':<12} {'n':>3}  " + "  ".join(f"{'p=' + str(p):<19}" for p in PS))
        for process in PROCESSES:
            for n in NS:
                cells = [r for r in rows if r["process"] == process and r["n"] == n]
                text = "  ".join(f"{_fmt(r[metric])} [{r['cp']:.3f}]" for r in cells)
                print(f"{process:<12} {n:>3}  {text}")


def verdict(rows: list[dict], seq: list[dict]) -> None:
    cov = [r[m][0] for r in rows for m in ("auc", "final", "a", "delta auc") if r[m]]
    ratios = [r["auc"][1] / r["cp"] for r in rows if r["process"] == "sticky" and r["auc"]]
    seq_cs = [r["coverage"] for r in seq if r["design"] == "anytime CS"]
    print(
        f"\nlowest coverage over the fixed cells: {min(cov):.3f} (goal >= 0.94); "
        f"sticky (0/1) AUC width / Clopper-Pearson: {min(ratios):.2f}..{max(ratios):.2f} "
        "(goal <= 1.25)"
    )
    if seq_cs:
        print(f"lowest sequential coverage of the confidence sequence: {min(seq_cs):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400, help="simulated runs per cell")
    parser.add_argument("--quick", action="store_true", help="100 runs per cell")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    reps = 100 if args.quick else args.reps
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = fixed_cells(reps, rng)
    print(f"{reps} simulated runs per cell, {WINDOWS} windows per sample; 95 % intervals")
    print_fixed(rows)
    seq = sequential_cells(reps, rng)
    print(f"\nsequential: looked at after every batch of {BATCH} up to {SEQ_MAX}; coverage")
    for r in seq:
        print(f"{r['process']:<12} p={r['p']:<5} {r['design']:<16} {r['coverage']:.3f}")
    verdict(rows, seq)
    print(f"({time.perf_counter() - start:.0f} s; MC error ~{math.sqrt(0.0475 / reps):.3f})")


if __name__ == "__main__":
    main()
