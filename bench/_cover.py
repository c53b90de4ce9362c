"""The coverage benches' verdict (bench/coverage.py, bench/corrected.py): a cell is a share of
simulated runs whose interval held the truth (or, for a decision cell, that did not decide
wrongly); the bench fails when a cell lies significantly below the nominal level or below a
floor.

- Per cell, a one-sided exact binomial test of H0 "the cell's rate >= NOMINAL" (scipy's
  `binomtest`, alternative "less"); Holm's step-down over every cell of the run
  (`harness.stats.adjust.holm`) at FAMILY (5 %).
- A floor on each cell's observed rate: 0.93 for an interval's coverage and 0.95 for a
  decision (a wrong-decision rate <= 5 %) at the full 200 runs per cell. A quick run's cells
  rest on few runs, where a correct interval at exactly 95 % would fall below 0.93 by chance
  alone (at 40 runs, 37 of 40 or fewer has probability 0.32), so its floor is `quick_floor`:
  the lowest rate a cell at exactly 95 % reaches with probability >= 1 - 0.001 (per cell;
  over the quick run's 37 cells a false alarm below 4 % in all; 0.825 at 40 runs). An
  interval of half the width (coverage 0.10-0.45 in the quick cells) stays far below it.
- The full run's fixed floor trips by chance too: at 200 runs a cell at exactly 95 % falls
  below 0.93 with probability 0.08, one at 0.967 with 0.003 (docs/performance.md), so over
  ~540 cells some cell trips on some seed. Hence the top-up (`needs_top_up`, `pool`): a cell
  below its floor, or whose one-sided p-value before Holm is below FAMILY, is re-run with
  TOP_UP times its runs more (bench/coverage.py, at a seed derived from the run's seed and the
  scenario), and its verdict (floor and Holm) is read on the pooled runs. Why this keeps
  Holm's family error: every cell's extra runs exist, seeded, whether drawn or not; a cell
  that is not topped up has p >= FAMILY, which Holm never rejects, so a cell fails only on
  the p-value (or floor) of its pooled runs, whose law is that of a fixed run of the pooled
  size: P(p' <= u) <= u for every u < FAMILY, the only levels Holm tests at. A broken interval
  stays below (its pooled rate is its rate).
- A run with no interval formed (NaN ends: the harness says "cannot tell") claims nothing and
  is reported apart: a cell's coverage is over the runs that formed an interval, the share
  without one printed (`none`); a cell that formed none is listed, not judged. An empty
  interval (a running intersection the data emptied: it rejected the truth) is a miss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from harness.stats.adjust import holm

NOMINAL = 0.95  # the harness's default level, stats.level
FAMILY = 0.05  # Holm's family-wise level over the cells
FLOOR, DECISION_FLOOR = 0.93, 0.95  # full run: coverage, 1 - wrong-decision rate
QUICK_TAIL = 0.001  # a quick cell's chance of a false alarm at exactly NOMINAL
EMPTY = "empty running intersection"  # harness.stats' method of an interval the data emptied
TOP_UP = 4  # a flagged cell gets this many times its runs more (200 + 800 in the full run)


class MissingMetric(LookupError):
    """A table lacks a column (or rows) the bench needs: a metric would drop out unseen."""


@dataclass
class Cell:
    family: str  # e.g. "adherence", "survival"
    metric: str  # e.g. "auc", "delta auc"
    scenario: str  # what was simulated, e.g. "sticky n=16 p=0.9"
    held: int  # runs whose interval held the truth (decision cells: did not decide wrongly)
    runs: int
    width: float = math.nan  # mean width of the formed intervals
    none: float = 0.0  # share of runs with no interval formed
    decision: bool = False
    extra: dict = field(default_factory=dict)
    first_runs: int = 0  # runs before a top-up (0: not topped up)

    @property
    def rate(self) -> float:
        return self.held / self.runs if self.runs else math.nan

    def p_value(self) -> float:
        """One-sided exact binomial p of `held` under rate NOMINAL (H1: the rate is lower)."""
        if not self.runs:
            return 1.0  # never formed an interval: nothing to judge (printed apart)
        return float(stats.binomtest(self.held, self.runs, NOMINAL, "less").pvalue)


def columns(frame: pd.DataFrame, metric: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of `metric` in `frame` (<metric>_low, <metric>_high); a missing column or an
    empty table is an error, never a metric left out. A row whose method says its running
    intersection was empty (the data rejected every mean, the truth with them) comes back as
    the empty interval (inf, -inf): a miss, not "no interval"."""
    need = [f"{metric}_low", f"{metric}_high"]
    missing = [c for c in need if c not in frame.columns]
    if missing or frame.empty:
        have = ", ".join(map(str, frame.columns)) or "none"
        why = f"no column {', '.join(missing)}" if missing else "no rows"
        raise MissingMetric(f"{what}: {why} for metric {metric!r} (columns: {have})")
    low, high = frame[need[0]].to_numpy(float), frame[need[1]].to_numpy(float)
    method = f"{metric}_method"
    if method in frame.columns:
        empty = frame[method].astype(str).str.contains(EMPTY, regex=False).to_numpy()
        low, high = np.where(empty, np.inf, low), np.where(empty, -np.inf, high)
    return low, high


def coverage_cell(
    family: str, metric: str, scenario: str, low, high, truth
) -> Cell:  # fmt: skip
    """A cell from one interval per run and the truth (a number, or one per run; inf allowed:
    an interval ending at inf holds an infinite truth). An empty interval (low > high) is a
    miss. NaN ends: no interval formed, reported apart: the coverage is over the runs that
    formed one (`none` their share; a cell that never formed one has runs 0 and is not judged)
    so a metric formed in 1 run of 40 does not print 1.000 on the other 39."""
    low, high = np.asarray(low, float), np.asarray(high, float)
    truth = np.broadcast_to(np.asarray(truth, float), low.shape)
    formed = ~(np.isnan(low) | np.isnan(high))
    tol = 1e-9
    inside = (low <= truth + tol) & ((truth - tol <= high) | (high == truth)) & (low <= high)
    held = int((inside & formed).sum())
    with np.errstate(invalid="ignore"):
        widths = (high - low)[formed & (low <= high)]
    finite = widths[np.isfinite(widths)]  # an interval ending at inf: printed apart
    width = float(finite.mean()) if len(finite) else math.inf if len(widths) else math.nan
    return Cell(family, metric, scenario, held, int(formed.sum()), width, float((~formed).mean()))


def decision_cell(family: str, metric: str, scenario: str, wrong, extra: dict) -> Cell:
    """A cell of decisions, one per run: `wrong` True where the run decided wrongly."""
    wrong = np.asarray(wrong, bool)
    return Cell(family, metric, scenario, int((~wrong).sum()), len(wrong), decision=True,
                extra=extra)  # fmt: skip


def quick_floor(runs: int) -> float:
    """The rate a cell at exactly NOMINAL stays at or above with probability >= 1 - QUICK_TAIL
    over `runs` runs: k / runs for the largest k with P(Bin(runs, NOMINAL) < k) <= QUICK_TAIL."""
    k = int(stats.binom.ppf(QUICK_TAIL, runs, NOMINAL))
    while stats.binom.cdf(k - 1, runs, NOMINAL) > QUICK_TAIL:
        k -= 1
    return k / runs


def floors(quick: bool, runs: int) -> tuple[float, float]:
    """(coverage floor, decision floor) of a run."""
    if quick:
        f = quick_floor(runs)
        return f, f
    return FLOOR, DECISION_FLOOR


def needs_top_up(cell: Cell, quick: bool = False) -> bool:
    """Below its floor, or its one-sided p-value (before Holm) below FAMILY; in a quick run
    any cell below NOMINAL: 40 runs cannot tell an 80 % interval labelled 95 % (coverage
    0.87-0.90 on the quick cells, discrete) from a right one, its 200 pooled runs can. A cell
    left alone still has p >= FAMILY, so Holm's family error is kept (the argument above)."""
    if not cell.runs:
        return False
    if quick and cell.rate < NOMINAL:
        return True
    floor = floors(quick, cell.runs)[int(cell.decision)]
    return cell.rate < floor or cell.p_value() < FAMILY


def pool(first: Cell, more: Cell) -> Cell:
    """One cell from two sets of runs of the same cell (widths and no-interval shares
    weighted by runs)."""
    if (first.family, first.metric, first.scenario) != (more.family, more.metric, more.scenario):
        raise ValueError(f"cannot pool {first.scenario!r} with {more.scenario!r}")
    runs = first.runs + more.runs

    def mean(a: float, b: float) -> float:
        return (a * first.runs + b * more.runs) / runs if runs else math.nan

    return Cell(
        first.family, first.metric, first.scenario, first.held + more.held, runs,
        mean(first.width, more.width), mean(first.none, more.none), first.decision,
        first.extra, first.runs,
    )  # fmt: skip


def failures(cells: list[Cell], quick: bool = False) -> list[str]:
    """One line per failing cell: significantly below NOMINAL after Holm, or below its floor."""
    if not cells:
        raise MissingMetric("no cell was measured")
    adjusted = holm(np.array([c.p_value() for c in cells]))
    out = []
    for cell, p in zip(cells, adjusted, strict=True):
        if not cell.runs:
            continue  # no run formed an interval: listed by `verdict`, not judged
        floor = floors(quick, cell.runs)[int(cell.decision)]
        what = "1 - wrong-decision rate" if cell.decision else "coverage"
        name = f"{cell.family} {cell.metric} [{cell.scenario}]"
        if p < FAMILY:
            out.append(f"{name}: {what} {cell.rate:.3f} below {NOMINAL} (Holm p = {p:.2g})")
        elif cell.rate < floor:
            out.append(f"{name}: {what} {cell.rate:.3f} below the floor {floor:.3f}")
    return out


def print_cells(cells: list[Cell]) -> None:
    """Each cell's coverage and mean width, grouped by family and metric."""
    keys = list(dict.fromkeys((c.family, c.metric) for c in cells))
    for family, metric in keys:
        group = [c for c in cells if (c.family, c.metric) == (family, metric)]
        head = "1 - wrong-decision rate" if group[0].decision else "coverage, mean width"
        print(f"\n{family} / {metric}: {head}")
        for c in group:
            if c.decision:
                extra = ", ".join(f"{k} {v}" for k, v in c.extra.items())
                print(f"  {c.scenario:<40} {c.rate:.3f}  ({extra})")
            else:
                none = f"  no interval {c.none:.2f}" if c.none else ""
                print(f"  {c.scenario:<40} {c.rate:.3f}  {c.width:7.3f}{none}")


def verdict(cells: list[Cell], quick: bool = False) -> int:
    """Print the verdict over every cell; the exit code (0: every cell passes, 1: not)."""
    bad = failures(cells, quick)
    runs = min((c.first_runs or c.runs for c in cells if c.runs), default=0)
    cover, decide = floors(quick, runs)
    judged = [c for c in cells if c.runs] or cells
    worst = min(judged, key=lambda c: c.rate)
    print(
        f"\n{len(cells)} cells, {runs} runs each (a topped-up cell: its pooled runs); fails "
        f"when a cell is below {NOMINAL} by a one-sided exact binomial test with Holm over the "
        f"cells at {FAMILY}, or below the floor ({cover:.3f} coverage, {decide:.3f} for "
        "decisions)"
    )
    print(f"worst cell: {worst.family} {worst.metric} [{worst.scenario}] {worst.rate:.3f}"
          f" ({worst.held} of {worst.runs} runs)")  # fmt: skip
    for c in cells:
        if not c.runs:
            print(f"not judged (no run formed an interval): {c.family} {c.metric} [{c.scenario}]")
    topped = [c for c in cells if c.first_runs]
    why = f"below the floor, p < {FAMILY} before Holm" + (f" or below {NOMINAL}" if quick else "")
    print(f"topped up ({why} at first): {len(topped)}")
    for c in topped:
        print(f"  {c.family} {c.metric} [{c.scenario}]: {c.held} of {c.runs} = {c.rate:.3f}"
              f" over {c.first_runs} + {c.runs - c.first_runs} runs")  # fmt: skip
    for line in bad:
        print(f"FAIL {line}")
    print("verdict: " + ("pass" if not bad else f"fail ({len(bad)} cells)"))
    return 1 if bad else 0
