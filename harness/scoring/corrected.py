"""Adherence corrected for the instrument: what the share of passing windows (turns) would be
if the check never misread text (docs/architecture.md, "Estimators: corrected").

A check with sensitivity Se (it passes a compliant text) and specificity Sp (it fails a
violating one) reports, for a true pass rate p, the raw rate a = Se p + (1 - Sp)(1 - p). The
Rogan-Gladen estimate inverts that, p = (a + Sp - 1) / (Se + Sp - 1), clipped to [0, 1];
Se and Sp come from the check's confusion counts on labelled text (`CheckRates`).

Interval (Bonferroni over three parts): the raw rate's own interval (harness.stats: the
per-sample bounded-mean interval of AUC, the exact binomial one of a(k)) at level
1 - alpha/2, and the exact binomial intervals of Se and Sp at 1 - alpha/4 each. When all three
cover (probability >= 1 - alpha by the union bound, at every n), the true p lies in the range
of the Rogan-Gladen map over the box they span; for Se + Sp > 1 on the whole box the map is
monotone in each of a, Se and Sp, so the box's corners give that range. A box that reaches
Se + Sp <= 1 (a check no better than a coin on part of it) gives [0, 1]. The truth p is then
the mean over samples of the true per-sample AUC (share of passing turns), provided the check's
errors do not depend on the sample given the text's true verdict (non-differential error).
bench/corrected.py measures the coverage and width at n = 4..64.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness import results
from harness.scoring.all_rules import missing_verdicts
from harness.stats import (
    Interval,
    binomial_interval,
    check_level,
    mean_interval,
    none_interval,
)

TASK_CONDITION, RUN_SAMPLE = list(results.TASK_CONDITION), list(results.RUN_SAMPLE)

# shares of alpha given to the sampling interval and to each of Se and Sp: sampling error
# dominates at the n users run (4-64 samples against hundreds of labelled texts)
SAMPLING_SHARE, RATE_SHARE = 0.5, 0.25


@dataclass(frozen=True)
class CheckRates:
    """One check's verdicts on labelled text: the label is the truth (compliant or not)."""

    check: str  # the check's id as windows.csv names it, e.g. `language:fr`
    true_pass: int  # labelled compliant, the check passed
    false_fail: int  # labelled compliant, the check failed
    true_fail: int  # labelled violating, the check failed
    false_pass: int  # labelled violating, the check passed
    abstained: int = 0  # labelled texts the check could not decide (not in Se or Sp)
    source: str = ""  # where the labels come from, e.g. the set's file

    def sensitivity(self, level: float) -> Interval:
        return _rate(self.true_pass, self.true_pass + self.false_fail, level)

    def specificity(self, level: float) -> Interval:
        return _rate(self.true_fail, self.true_fail + self.false_pass, level)


def _rate(k: int, n: int, level: float) -> Interval:
    if n <= 0:
        return none_interval(math.nan, 0, "no text with that label")
    low, high = binomial_interval(np.array([k]), np.array([n]), level=level)
    return Interval(k / n, float(low[0]), float(high[0]), int(n), "clopper-pearson")


def sampling_level(level: float) -> float:
    """The level the raw rate's interval is formed at, inside a corrected one of `level`."""
    return 1 - (1 - check_level(level)) * SAMPLING_SHARE


def rate_level(level: float) -> float:
    """The level of each of the Se and Sp intervals inside a corrected one of `level`."""
    return 1 - (1 - check_level(level)) * RATE_SHARE


def rogan_gladen(a, se: float, sp: float) -> np.ndarray:
    """(a + Sp - 1) / (Se + Sp - 1) clipped to [0, 1]; NaN where Se + Sp <= 1."""
    youden = se + sp - 1
    a = np.asarray(a, dtype=float)
    if not youden > 0:
        return np.full(a.shape, np.nan)
    return np.clip((a + sp - 1) / youden, 0.0, 1.0)


def corrected_bounds(
    raw: np.ndarray, raw_low: np.ndarray, raw_high: np.ndarray, rates: CheckRates, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Elementwise corrected (estimate, low, high, method) of raw rates whose (low, high) were
    formed at `sampling_level(level)` (see the module docstring)."""
    se, sp = rates.sensitivity(rate_level(level)), rates.specificity(rate_level(level))
    raw = np.asarray(raw, dtype=float)
    if se.n == 0 or sp.n == 0:
        nan = np.full(raw.shape, np.nan)
        return nan, nan, nan, f"none ({rates.check}: no labelled {'pass' if se.n == 0 else 'fail'})"
    estimate = rogan_gladen(raw, se.estimate, sp.estimate)
    share = (
        f"{100 * sampling_level(level):g} %, se/sp clopper-pearson at {100 * rate_level(level):g} %"
    )
    method = f"rogan-gladen (raw interval at {share}, n_se = {se.n}, n_sp = {sp.n})"
    if not se.low + sp.low > 1:  # part of the box is a check no better than chance
        low, high = np.zeros(raw.shape), np.ones(raw.shape)
        return estimate, low, high, method + ", se + sp <= 1 in the box: [0, 1]"
    corners = [(s, p) for s in (se.low, se.high) for p in (sp.low, sp.high)]
    low = np.min([rogan_gladen(raw_low, s, p) for s, p in corners], axis=0)
    high = np.max([rogan_gladen(raw_high, s, p) for s, p in corners], axis=0)
    undefined = np.isnan(np.asarray(raw_low, float)) | np.isnan(np.asarray(raw_high, float))
    return estimate, np.where(undefined, np.nan, low), np.where(undefined, np.nan, high), method


def corrected_interval(
    raw: Interval, rates: CheckRates | None, level: float, why: str = ""
) -> Interval:
    """The corrected estimate of one raw rate whose interval is at `sampling_level(level)`;
    `rates` None: no correction (NaN ends, the method says `why`)."""
    if rates is None:
        return none_interval(math.nan, raw.n, why or "no validation data")
    est, low, high, method = corrected_bounds(
        np.array([raw.estimate]), np.array([raw.low]), np.array([raw.high]), rates, level
    )
    return Interval(float(est[0]), float(low[0]), float(high[0]), raw.n, method)


def deciding_rates(
    checks: set[str], rates: Mapping[str, CheckRates] | None
) -> tuple[CheckRates | None, str]:
    """The rates that correct a condition whose verdicts come from `checks`, or None and why:
    the correction is defined for one deciding check (several combine their errors in ways a
    per-check validation does not measure)."""
    if not rates:
        return None, "no validation data"
    if len(checks) != 1:
        return None, f"{len(checks)} checks decide the verdicts, the correction needs one"
    (check,) = checks
    if check not in rates:
        return None, f"no validation data for {check}"
    return rates[check], ""


def corrected_mean(values, raw: Interval, deciders, rates, level: float, anytime: bool) -> Interval:
    """The corrected mean of per-sample values in [0, 1] (their raw interval `raw` at
    `level`), for a condition whose verdicts came from the check ids `deciders`."""
    check_rates, why = deciding_rates(deciders if isinstance(deciders, set) else set(), rates)
    if check_rates is not None:
        raw = mean_interval(values, level=sampling_level(level), anytime=anytime)
    return corrected_interval(raw, check_rates, level, why)


# ---------------------------------------------------------------- no silent abstention
def window_abstentions(windows: pd.DataFrame) -> pd.DataFrame:
    """Per condition: windows (a sample's window with a window-scope check row), those no
    check decided or where a rule's verdict is missing (`harness.scoring.all_rules`), and the
    check ids that decided some window (`deciders`, a set)."""
    w = windows[(windows["scope"] == "window") & (windows["window"] >= 0)]
    decided = w["passed"].notna()
    keys = [*TASK_CONDITION, *RUN_SAMPLE, "window"]
    flags = w.assign(decided=decided, whole=~missing_verdicts(w)).groupby(
        keys, sort=True, dropna=False
    )
    per_window = flags["decided"].any() & flags["whole"].all()
    counts = per_window.groupby(TASK_CONDITION, sort=True).agg(["size", "sum"])
    checks = w[decided & (w["check"].astype(str) != "all")] if "check" in w else w.iloc[0:0]
    deciders = checks.groupby(TASK_CONDITION, sort=True)["check"].agg(lambda c: set(map(str, c)))
    out = pd.DataFrame({"windows": counts["size"], "undecided": counts["size"] - counts["sum"]})
    return out.join(deciders.rename("deciders"), how="left")


def abstention_fields(abstain: dict) -> dict:
    total, undecided = int(abstain.get("windows", 0)), int(abstain.get("undecided", 0))
    share = undecided / total if total else math.nan
    return dict(windows_total=total, undecided_windows=undecided, undecided_window_share=share)
