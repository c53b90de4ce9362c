"""bench/coverage.py's adherence cells: summary.csv (`adherence_summary`), a(t)
(`adherence_curves`) and policies.csv (`compare_policies`) on simulated windows.csv rows.

Truths (every sample has 8 windows of 64 tokens, t in [0, 511]; T = each sample's own last
t_end, the harness's default without a run config):
- flat processes at pass rate p: a(t) = p at every t (read at t = 64, a point every sample
  has), AUC = final = p; pass^r = P(a sample passes every window it has)^r, from the process
  (sticky p, independent p^8, markov 0.7 p (0.7 + 0.3 p)^7, mixed the average of sticky and
  independent, early stop E[p^L] over its L = 2..8 windows); aptitude and unreliability the
  0.9 quantile and the 0.9 - 0.1 quantiles (inf{x: F(x) >= q}) of the per-sample AUC's law,
  where it is known exactly (sticky: Bernoulli(p); independent: the token-weighted share of
  the 2^8 window patterns, window 0 weighing 63 positions and the others 64).
- breaks (hazard h) and fades (rate p0 d^w): a(w) = P(window w passes); AUC the token-weighted
  mean of a(w) over positions 1..511 (window 0 covers 63 of them), final the mean of a(6),
  a(7) (positions 384..511); half-life the first checkpoint t_j (1 + floor(j 511 / 8) = 64 j,
  j >= 1) with a(t_j) < a(t_0) / 2, inf when none; survival median the smallest t_start 64 w
  with P(failed by window w) >= 1/2 (beyond the run: 64 w past 511, which only an interval
  ending at inf holds).
- policies: per run a model with two items; item i0's `restate` passes at p and `none` at
  p - 0.2 on the same draws (the harness's seed pairing), item i1's `none` at p - 0.1: delta
  AUC = delta final = 0.2 (i0), the pooled row (item `all`) 0.15; half_life_capped delta 0
  (a flat a(t) never halves: both capped at the same last checkpoint). Breaks: `restate` at
  hazard h, `none` at min(2h, 0.9): the deltas of the truths above, a never-halving
  half-life capped at the last checkpoint, 448.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from _cover import Cell, MissingMetric, columns, coverage_cell
from _simulated import TOKENS, WINDOWS, breaks, fade_rates, flat, window_rows

from harness.analysis.policies import compare_policies
from harness.scoring.adherence import adherence_summary
from harness.scoring.curves import adherence_curves

GAP = 0.2
A_AT = TOKENS  # a(t) is read at t = 64 (window 1), which every simulated sample has
LAST = 7 * TOKENS  # the last checkpoint, 1 + floor(7 x 511 / 8)
WEIGHTS = np.array([TOKENS - 1] + [TOKENS] * (WINDOWS - 1), float)  # positions 1..511


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    rows = adherence_summary(frame)
    return pd.DataFrame([r.model_dump() for r in rows])


def per_item(frame: pd.DataFrame, items: list[str], what: str) -> pd.DataFrame:
    """frame's rows in the order of `items` (one per run); a missing item is an error."""
    got = frame.set_index("item")
    missing = sorted(set(items) - set(got.index))
    if missing:
        raise MissingMetric(f"{what}: no row for {len(missing)} runs (e.g. {missing[0]})")
    return got.loc[items].reset_index()


def pass_truth(process: str, p: float) -> float:
    """P(a sample passes every window it has) under a flat process at p."""
    sticky, independent = p, p**WINDOWS
    return {
        "sticky": sticky,
        "independent": independent,
        "markov 0.7": p * (0.7 + 0.3 * p) ** (WINDOWS - 1),
        "mixed": (sticky + independent) / 2,
        "early stop": float(np.mean([p**k for k in range(2, WINDOWS + 1)])),
    }[process]


def auc_quantile(process: str, p: float, q: float) -> float | None:
    """The q-quantile inf{x: F(x) >= q} of the per-sample AUC's law where it is known exactly:
    sticky 0 or 1; independent windows the token-weighted share over all 2^8 patterns."""
    if process == "sticky":
        return 0.0 if 1 - p >= q else 1.0
    if process != "independent":
        return None
    patterns = (np.arange(2**WINDOWS)[:, None] >> np.arange(WINDOWS)[None, :]) & 1
    values = patterns @ WEIGHTS / WEIGHTS.sum()
    k = patterns.sum(axis=1)
    probs = p**k * (1 - p) ** (WINDOWS - k)
    order = np.argsort(values, kind="stable")
    cdf = np.cumsum(probs[order])
    return float(values[order][np.nonzero(cdf >= q - 1e-12)[0][0]])


def reliability_cells(table: pd.DataFrame, process: str, p: float, label: str) -> list[Cell]:
    out = []
    for r in (1, 3):
        truth = pass_truth(process, p) ** r
        out.append(coverage_cell("adherence", f"pass_{r}", label,
                                 *columns(table, f"pass_{r}", "summary.csv"), truth))  # fmt: skip
    top, floor = auc_quantile(process, p, 0.9), auc_quantile(process, p, 0.1)
    if top is not None:
        for metric, truth in (("aptitude", top), ("unreliability", top - floor)):
            bounds = columns(table, metric, "summary.csv")
            out.append(coverage_cell("adherence", metric, label, *bounds, truth))
    return out


def two_items(passes_p, passes_b0, passes_b1, keep) -> pd.DataFrame:
    """windows.csv rows of a policy comparison: run r is model m<r> with items i0, i1."""
    frames = []
    for item, base in (("i0", passes_b0), ("i1", passes_b1)):
        for policy, passes in (("restate", passes_p), ("none", base)):
            rows = window_rows(passes, policy, keep=keep)
            run = rows["item"].str[1:]
            frames.append(rows.assign(model="m" + run, item=item))
    return pd.concat(frames, ignore_index=True)


def policy_cells(frame: pd.DataFrame, truths: dict, label: str, reps: int) -> list[Cell]:
    """truths: {(metric, item): truth} over policies.csv's restate rows."""
    pol = compare_policies(frame, None)
    pol = pol[pol["policy"] == "restate"].set_index(["model", "item", "metric"])
    models = [f"m{r:05d}" for r in range(reps)]
    out = []
    for (metric, item), truth in truths.items():
        keys = [(m, item, metric) for m in models]
        missing = [k for k in keys if k not in pol.index]
        if missing:
            raise MissingMetric(f"policies.csv: no {metric} row of item {item} for {missing[0]}")
        rows = pol.loc[keys].reset_index()
        name = f"delta {metric}" + (" (pooled)" if item == "all" else "")
        out.append(coverage_cell("policies", name, label, *columns(rows, "delta", name), truth))
    return out


def flat_cells(process: str, n: int, p: float, policies: bool, reps: int, rng) -> list[Cell]:
    """AUC, final, a(t), pass^r, aptitude, unreliability and (`policies`) the policy deltas
    at rate p."""
    label = f"{process} n={n} p={p}"
    u, keep = flat(process, reps, n, rng)
    frame = window_rows(u < p, keep=keep)
    items = [f"r{r:05d}" for r in range(reps)]
    table = per_item(summary(frame), items, "summary.csv")
    curves = adherence_curves(frame)
    at = per_item(curves[curves["t"] == A_AT], items, f"a(t) at t = {A_AT}")
    cells = [coverage_cell("adherence", "a(t)", label, *columns(at, "a", "a(t)"), p)]
    for metric in ("auc", "final"):
        bounds = columns(table, metric, "summary.csv")
        cells.append(coverage_cell("adherence", metric, label, *bounds, p))
    cells += reliability_cells(table, process, p, label)
    if not policies:
        return cells
    u2, keep2 = flat(process, reps, n, rng)
    pair = two_items(u2 < p, u2 < p - GAP, u2 < p - GAP / 2, keep2)
    truths = {("auc", "i0"): GAP, ("final", "i0"): GAP, ("auc", "all"): 0.75 * GAP,
              ("half_life_capped", "i0"): 0.0}  # fmt: skip
    return cells + policy_cells(pair, truths, label, reps)


def curve_truths(rates: np.ndarray, failed_by: np.ndarray) -> dict[str, float]:
    """AUC, final, half-life, survival median of a curve a(w) (WINDOWS,) and P(failed by
    window w) (WINDOWS,), as the module docstring defines them."""
    below = np.nonzero(rates[1:] < rates[0] / 2)[0]
    reached = np.nonzero(failed_by >= 0.5)[0]
    return dict(
        auc=float(np.dot(WEIGHTS, rates) / WEIGHTS.sum()),
        final=float(rates[-2:].mean()),
        half_life=float(TOKENS * (below[0] + 1)) if len(below) else math.inf,
        survival_median=float(TOKENS * reached[0]) if len(reached) else float(TOKENS * WINDOWS),
        a=float(rates[1]),
    )


def break_truths(hazard: float) -> dict[str, float]:
    rates = (1 - hazard) ** np.arange(1, WINDOWS + 1)  # a(w) = P(break after window w)
    truths = curve_truths(rates, 1 - rates)
    if truths["survival_median"] >= TOKENS * WINDOWS:  # median break window from the law
        w = math.ceil(math.log(0.5) / math.log1p(-hazard)) - 1
        truths["survival_median"] = float(TOKENS * w)
    return truths


def fade_truths(p0: float, decay: float) -> dict[str, float]:
    rates = fade_rates(p0, decay)
    return curve_truths(rates, 1 - np.cumprod(rates))


def capped(half_life: float) -> float:
    return min(half_life, float(LAST))


def survival_cells(kind: str, n: int, param: tuple, reps: int, rng) -> list[Cell]:
    """AUC, final, a(t), half-life and survival median of a decaying curve (breaks: param
    (h,); fades: (p0, d)); breaks also the policy deltas of hazard h against min(2h, 0.9)."""
    shape = f"h={param[0]}" if kind == "breaks" else f"p0={param[0]} d={param[1]}"
    label = f"{kind} n={n} {shape}"
    u = rng.random((reps, n))
    if kind == "breaks":
        passes, truths = breaks(u, param[0]), break_truths(param[0])
    else:
        passes = rng.random((reps, n, WINDOWS)) < fade_rates(*param)[None, None, :]
        truths = fade_truths(*param)
    frame = window_rows(passes)
    items = [f"r{r:05d}" for r in range(reps)]
    table = per_item(summary(frame), items, "summary.csv")
    curves = adherence_curves(frame)
    at = per_item(curves[curves["t"] == A_AT], items, f"a(t) at t = {A_AT}")
    cells = [coverage_cell("adherence", "a(t)", label, *columns(at, "a", "a(t)"), truths["a"])]
    for metric in ("auc", "final", "half_life", "survival_median"):
        bounds = columns(table, metric, "summary.csv")
        cells.append(coverage_cell("survival", metric, label, *bounds, truths[metric]))
    if kind == "breaks":
        base_h = min(2 * param[0], 0.9)
        base = break_truths(base_h)
        pair = two_items(passes, breaks(u, base_h), breaks(u, base_h), None)
        delta = {
            ("auc", "i0"): truths["auc"] - base["auc"],
            ("final", "i0"): truths["final"] - base["final"],
            ("half_life_capped", "i0"): capped(truths["half_life"]) - capped(base["half_life"]),
        }
        cells += policy_cells(pair, delta, label, reps)
    return cells
