"""bench/coverage.py's other cells: conversations (`turn_curves`, `conversation_summary`),
fork dependence (`carried.dependence_interval`), judge calibration (`judge_calibration`) and
sequential decisions (`sample_values` + `mean_interval(anytime=True)` + the gates'
`interval_verdict`; and the one-sided e-process bounds `one_sided_bounds(anytime=True)` that
an auc gate of a sequential run reads).

Truths:
- conversations: 8 turns (window w = turn w + 1), two items per run (model m<r>). pressure:
  turns 1-4 pass at 0.9 and 5-8 (pressure from turn 5) at 0.6 in item i0, 0.8 throughout in
  i1; a(k) at k = 2 = 0.9, mean = 0.75, pressure change = -0.3 (i0) and -0.15 pooled (item
  `all`); for independent turns, S(4) = 0.9^4 and the first failing turn's median = 5 (the
  first k with P(failed by k) >= 1/2). breaks (hazard h per turn): a(2) = (1 - h)^2, mean
  the mean of (1 - h)^k, S(4) = (1 - h)^4, median the first k with 1 - (1 - h)^k >= 1/2.
- forks: per record a propensity b ~ U(0.3, 1); its `with` draws pass at b, its `without`
  draws at b (1 - s): dependence = E[b] s = 0.65 s (records the unit, draws within one).
- calibration: the code check passes a window at rate 0.7; the judge passes it at Se = 0.9
  when the code passed and at 1 - Sp = 0.2 when it failed: sensitivity 0.9, specificity 0.8,
  accuracy p_o = 0.7 x 0.9 + 0.3 x 0.8 and kappa (p_o - p_e) / (1 - p_e) of those window
  rates. `independent`: windows drawn apart; `sticky`: one draw per record for all its
  windows (a judge and a code check reading the same text the same way all along).
- sequential: gate `auc >= 0.8`, true rate p near it; samples in batches of 4 up to 64, the
  confidence sequence looked at after each batch, stopping at the first decided look. A
  decision is wrong when it contradicts the truth (fail at p > 0.8, pass at p < 0.8); the
  fixed-n interval peeked at the same way is printed beside it, not judged (it is not
  anytime-valid and makes no such claim).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from _cover import Cell, MissingMetric, coverage_cell, decision_cell
from _cover import columns as bounds
from _simulated import WINDOWS, breaks, flat, window_rows

from harness.analysis.calibration import judge_calibration
from harness.analysis.carried import dependence_interval
from harness.analysis.conversations import conversation_summary, turn_curves
from harness.analysis.gates import interval_verdict
from harness.scoring.adherence import sample_values
from harness.scoring.passes import window_passes
from harness.stats import DEFAULT_LEVEL as LEVEL
from harness.stats import mean_interval
from harness.stats.sided import Bounds, one_sided_bounds

PRESSURE_FROM = 5  # the first pressure turn
RATES = {"i0": (0.9, 0.6), "i1": (0.8, 0.8)}  # item: (before, after) pass rate
BOUND, BATCH, SEQ_MAX = 0.8, 4, 64


def turn_rows(passes: np.ndarray, item: str) -> pd.DataFrame:
    """turns.csv rows: run r is model m<r>, window w is turn w + 1."""
    w = window_rows(passes)
    return w.assign(
        model="m" + w["item"].str[1:], item=item, turn=w["window"] + 1, history="generated",
        pressure=w["window"] + 1 >= PRESSURE_FROM, conversation_id="",
    )  # fmt: skip


def by_model(frame: pd.DataFrame, item: str, reps: int, what: str) -> pd.DataFrame:
    rows = frame[frame["item"] == item].set_index("model")
    models = [f"m{r:05d}" for r in range(reps)]
    missing = sorted(set(models) - set(rows.index))
    if missing:
        raise MissingMetric(f"{what}: no row of item {item} for {len(missing)} runs")
    return rows.loc[models].reset_index()


def conversation_cells(process: str, n: int, reps: int, rng) -> list[Cell]:
    """a(k), S(k), mean, first failing turn, pressure change (per item and pooled)."""
    label = f"{process} n={n}"
    if process.startswith("breaks"):
        h, *cut = (float(part.split("=")[1]) for part in process.split()[1:])
        turns = turn_rows(breaks(rng.random((reps, n)), h), "i0").assign(pressure=False)
        if cut:  # a share of the replies, at random, has no verdict (cut at the token limit)
            gone = rng.random(len(turns)) < cut[0]
            turns = turns.assign(passed=turns["passed"].astype(object).where(~gone, None))
        alive = (1 - h) ** np.arange(1, WINDOWS + 1)
        k_med = int(np.nonzero(1 - alive >= 0.5)[0][0]) + 1 if (1 - alive >= 0.5).any() else 99
        truths = {"a": alive[1], "survival": alive[3], "mean": alive.mean(),
                  "first_fail_median": float(k_med)}  # fmt: skip
    else:
        parts = []
        for item, (before, after) in RATES.items():
            u, _ = flat(process, reps, n, rng)
            rate = np.where(np.arange(WINDOWS) < PRESSURE_FROM - 1, before, after)
            parts.append(turn_rows(u < rate[None, None, :], item))
        turns = pd.concat(parts, ignore_index=True)
        truths = {"a": 0.9, "mean": 0.75, "pressure_delta": -0.3, "pooled": -0.15}
        if process == "independent":
            truths |= {"survival": 0.9**4, "first_fail_median": float(PRESSURE_FROM)}
    curves = turn_curves(turns)
    at = {k: by_model(curves[curves["turn"] == k], "i0", reps, f"a(k) at k = {k}") for k in (2, 4)}
    cells = [coverage_cell("conversations", "a(k)", label, *bounds(at[2], "a", "a(k)"),
                           truths["a"])]  # fmt: skip
    if "survival" in truths:
        s = bounds(at[4], "survival", "S(k)")
        cells.append(coverage_cell("conversations", "S(k)", label, *s, truths["survival"]))
    table = conversation_summary(turns, pd.DataFrame())
    row = by_model(table, "i0", reps, "conversations.csv")
    for metric in ("mean", "first_fail_median", "pressure_delta"):
        if metric in truths:
            b = bounds(row, metric, "conversations.csv")
            cells.append(coverage_cell("conversations", metric, label, *b, truths[metric]))
    if "pooled" in truths:
        pooled = by_model(table, "all", reps, "conversations.csv pooled")
        b = bounds(pooled, "pressure_delta", "conversations.csv pooled")
        cells.append(coverage_cell("conversations", "pressure_delta (pooled)", label, *b,
                                   truths["pooled"]))  # fmt: skip
    return cells


def fork_cells(n: int, draws: int, effect: float, reps: int, rng) -> list[Cell]:
    """The dependence interval of n records x draws per arm."""
    base = rng.uniform(0.3, 1.0, size=(reps, n, 1))
    with_arm = (rng.random((reps, n, draws)) < base).astype(float)
    without = (rng.random((reps, n, draws)) < base * (1 - effect)).astype(float)
    cis = [dependence_interval(with_arm[r], without[r]) for r in range(reps)]
    low, high = np.array([c.low for c in cis]), np.array([c.high for c in cis])
    label = f"records={n} draws={draws} s={effect}"
    return [coverage_cell("forks", "dependence", label, low, high, 0.65 * effect)]


SE, SP, CODE_RATE = 0.9, 0.8, 0.7


def calibration_truths() -> dict[str, float]:
    p_o = CODE_RATE * SE + (1 - CODE_RATE) * SP
    p_j = CODE_RATE * SE + (1 - CODE_RATE) * (1 - SP)
    p_e = p_j * CODE_RATE + (1 - p_j) * (1 - CODE_RATE)
    kappa = (p_o - p_e) / (1 - p_e)
    return {"sensitivity": SE, "specificity": SP, "accuracy": p_o, "kappa": kappa}


def calibration_cells(process: str, n: int, reps: int, rng) -> list[Cell]:
    """calibration.csv's accuracy, kappa (one rule), sensitivity and specificity."""
    shape = (reps, n, 1 if process == "sticky" else WINDOWS)
    code = rng.random(shape) < CODE_RATE
    judge = np.where(code, rng.random(shape) < SE, rng.random(shape) >= SP)
    code, judge = (np.broadcast_to(x, (reps, n, WINDOWS)) for x in (code, judge))
    frames = [window_rows(code).assign(check="code"), window_rows(judge).assign(check="judge:j")]
    windows = pd.concat(frames, ignore_index=True)
    windows = windows.assign(model="m" + windows["item"].str[1:], item="i0")
    table = by_model(judge_calibration(windows), "i0", reps, "calibration.csv")
    label = f"{process} records={n}"
    return [
        coverage_cell("calibration", metric, label, *bounds(table, metric, "calibration.csv"),
                      truth)
        for metric, truth in calibration_truths().items()
    ]  # fmt: skip


LOOKS = range(BATCH, SEQ_MAX + 1, BATCH)


def _decide(cis: list) -> tuple[str, int]:
    """(verdict at the first decided look, else undecided at the last; samples drawn). Each
    look is an Interval (low, high) or one-sided Bounds (lcb, ucb), the ends a gate reads."""
    for m, ci in zip(LOOKS, cis, strict=False):
        low, high = (ci.lcb, ci.ucb) if isinstance(ci, Bounds) else (ci.low, ci.high)
        verdict = interval_verdict(low, high, BOUND, None)
        if verdict != "undecided":
            return verdict, m
    return "undecided", SEQ_MAX


def _peeked(values: np.ndarray) -> str:
    """The fixed-n interval looked at after every batch, stopping at the first decision."""
    for m in LOOKS:
        ci = mean_interval(values[:m])
        verdict = interval_verdict(ci.low, ci.high, BOUND, None)
        if verdict != "undecided":
            return verdict
    return "undecided"


def sequential_cells(process: str, p: float, reps: int, rng) -> list[Cell]:
    """Wrong decisions of the confidence sequence near the bound, and its path coverage."""
    u, keep = flat(process, reps, SEQ_MAX, rng)
    passes = window_passes(window_rows(u < p, keep=keep))
    values = np.empty((reps, SEQ_MAX))
    for r, (_, cond) in enumerate(passes.groupby("item", sort=True)):
        values[r] = sample_values(cond)[0]  # samples in their index order: arrival order
    wrong_verdict = "fail" if p > BOUND else "pass"
    label = f"{process} p={p} (gate auc >= {BOUND})"
    # every look of the confidence sequence: its decision and whether all of them held p
    cis = [[mean_interval(values[r, :m], anytime=True) for m in LOOKS] for r in range(reps)]
    runs = [_decide(c) for c in cis]
    wrong = np.array([v == wrong_verdict for v, _ in runs])
    peeked_wrong = np.mean([_peeked(values[r]) == wrong_verdict for r in range(reps)])
    extra = {
        "decided": f"{np.mean([v != 'undecided' for v, _ in runs]):.2f}",
        "mean n": f"{np.mean([m for _, m in runs]):.1f}",
        "fixed-n peeked (not judged): wrong": f"{peeked_wrong:.3f}",
    }
    cells = [decision_cell("sequential", "decision", label, wrong, extra)]
    # what an auc gate decides on since gates are one-sided: the one-sided e-process bounds
    sided = [
        _decide([one_sided_bounds(values[r, :m], level=LEVEL, anytime=True) for m in LOOKS])
        for r in range(reps)
    ]
    wrong_sided = np.array([v == wrong_verdict for v, _ in sided])
    extra_sided = {
        "decided": f"{np.mean([v != 'undecided' for v, _ in sided]):.2f}",
        "mean n": f"{np.mean([m for _, m in sided]):.1f}",
    }
    cells.append(decision_cell("sequential", "decision (one-sided gate)", label, wrong_sided,
                               extra_sided))  # fmt: skip
    held = [all(ci.low <= p <= ci.high for ci in c) for c in cis]
    width = float(np.mean([c[-1].width for c in cis]))  # at the last look, n = 64
    cells.append(Cell("sequential", "path coverage", label, int(sum(held)), reps, width))
    return cells
