"""laws.csv's verdict rules: when a chosen law reads `vanishes`, `settles`, `flat`, `grows` or
`cannot tell` (docs/architecture.md, "Estimators: laws"), and the floor's one-sided bootstrap
p-value they read."""

from __future__ import annotations

import math

import numpy as np

from harness.analysis import laws as L

# `vanishes` needs the data to rule out a floor this share of the initial value
FLOOR_RULED_OUT = 0.1
# `flat` needs the exponent's interval inside +-FLAT_BAND: over t in [16, 320] an exponent of
# 0.1 moves a curve by 26 %, so a flat reading promises less than that (an interval holding 0
# but wider, e.g. [-0.60, 3.00], is "cannot tell")
FLAT_BAND = 0.1
# `vanishes` rules a floor out with a percentile bootstrap over the units, too narrow over 4
# (256 resamples): 4-pair floors of 10-25 % read `vanishes` in 1-2 % of runs under correlated
# noise (bench/laws.py --noise-models), none from 8
VANISH_MIN_UNITS = 6


def floor_p(floor: float, draws: np.ndarray) -> float:
    """One-sided p-value of floor <= 0 from the bootstrap draws: (1 + the draws at or below 0)
    / (draws + 1), no finer than the draws can support (a normal tail extrapolated from 200
    draws gave 1e-63, and 0 when the draws did not vary)."""
    good = draws[np.isfinite(draws)]
    if len(good) < 10 or not math.isfinite(floor):
        return math.nan
    return float((1 + np.sum(good <= 0)) / (len(good) + 1))


def close_floored(rows: list[dict], per_unit: dict | None = None) -> list[dict]:
    """The floored laws of one set within the chooser's tolerance of the best law: those the
    units left out cannot tell from it (`laws.paired_rivals`, >= 3 units), else those whose
    error is <= best / (1 - MARGIN). `vanishes` must rule out every one of their floors."""
    if per_unit is not None:
        rivals = L.paired_rivals(per_unit)
        return [r for r in rows if r["law"] in rivals]
    finite = [r["error"] for r in rows if math.isfinite(r["error"])]
    if not finite:
        return []
    bar = min(finite) / (1.0 - L.MARGIN)
    return [r for r in rows if r["law"] in L.FLOORED and math.isfinite(r["error"])
            and r["error"] <= bar]  # fmt: skip


def verdict(row: dict, close: list[dict], alpha: float) -> tuple[str, str]:
    """(verdict, reason) of a chosen row: `vanishes` (power law to zero, exponent interval
    above 0, >= VANISH_MIN_UNITS units, and every floored law in `close` rules out a floor of
    FLOOR_RULED_OUT of its fitted initial value), `settles` (a floored law falling to its
    floor: rate and scale above 0, the chooser's test Holm-adjusted over the run below
    `alpha`, and the floor's interval above zero), `flat` (the exponent's interval inside
    +-FLAT_BAND), `grows` (interval below 0), else `cannot tell` with the reason."""
    if not math.isfinite(row["rate_low"]):
        return "cannot tell", f"no interval ({row['method']})"
    lo, hi = row["rate_low"], row["rate_high"]
    if row["law"] == L.LAW_ZERO:
        if hi < 0:
            return "grows", ""
        if lo <= 0:
            if lo >= -FLAT_BAND and hi <= FLAT_BAND:
                return "flat", ""
            return "cannot tell", (f"the exponent's interval [{lo:.2f}, {hi:.2f}] holds 0 but "
                                   f"is not inside the flat band +-{FLAT_BAND}")  # fmt: skip
        if row["n"] < VANISH_MIN_UNITS:
            return "cannot tell", (f"a decay, but {row['n']} units are too few to rule a floor "
                                   f"out (>= {VANISH_MIN_UNITS})")  # fmt: skip
        for f in close:
            bar = FLOOR_RULED_OUT * fitted_initial(f)
            if not (math.isfinite(f["floor_high"]) and f["floor_high"] < bar):
                return "cannot tell", (
                    f"{f['law']} predicts as well as the data can tell from the best law and "
                    f"its floor interval reaches {_sig(f['floor_high'])}, not below "
                    f"{FLOOR_RULED_OUT:.0%} of the initial value ({_sig(bar)})")  # fmt: skip
        if not close:
            return "cannot tell", "no floored law could be fitted to rule a floor out"
        return "vanishes", ""
    if not (row["rate"] > 0 and row["scale"] > 0):
        return "cannot tell", "the floored law does not fall to its floor (rate or scale <= 0)"
    p = row["law_p_holm"]
    if not (math.isfinite(p) and p < alpha):
        return "cannot tell", (f"the floored law's gain over decay to zero has Holm-adjusted "
                               f"p = {_sig(p)}, not below {alpha:g}")  # fmt: skip
    if not (row["floor_p"] < alpha):
        return "cannot tell", f"the floor's interval reaches 0 (floor_p = {_sig(row['floor_p'])})"
    return "settles", ""


def fitted_initial(row: dict) -> float:
    """A fitted law's value at x_min: the scale the floor is measured against (the mean curve's
    first point carries that point's noise; a heavy-tailed draw there made a 10 % floor look
    like 8 %)."""
    shape = 1.0 if row["law"] == L.LAW_EQUILIBRIUM else row["x_min"] ** -row["rate"]
    return row["floor"] + row["scale"] * shape


def _sig(v: float) -> str:
    return f"{v:.2g}" if math.isfinite(v) else "n/a"
