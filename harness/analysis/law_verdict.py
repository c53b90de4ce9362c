"""The verdict of a chosen laws.csv row (`vanishes`, `settles`, `flat`, `grows`, `cannot
tell`), and the run's budget for it: how wide a set's intervals read (`run_widening`), its share
for the screen of rivals (`run_share`) and the floored rivals `vanishes` must rule out
(`close_floored`). The rows come from `harness.analysis.law_table`; docs/architecture.md,
"Estimators: laws"."""

from __future__ import annotations

import math

from scipy.stats import norm

from harness.analysis import laws as L
from harness.analysis.laws import FLOOR_RULED_OUT

# `flat` needs the exponent's interval inside +-FLAT_BAND: over t in [16, 320] an exponent of
# 0.1 moves a curve by 26 %, so a flat reading promises less than that (an interval holding 0
# but wider, e.g. [-0.60, 3.00], is "cannot tell")
FLAT_BAND = 0.1
# `vanishes` rules a floor out with a percentile bootstrap over the units, too narrow over 4
# (256 resamples): 4-pair floors of 10-25 % read `vanishes` in 1-2 % of runs under correlated
# noise (bench/laws.py --noise-models), none from 8
VANISH_MIN_UNITS = 6


def close_floored(
    rows: list[dict], per_unit: dict | None = None, level: float = 0.001
) -> list[dict]:
    """The floored laws of one set within the chooser's tolerance of the best law: those the
    units left out cannot tell from it at `level` (`laws.paired_rivals`, >= 3 units), else
    those whose error is <= best / (1 - MARGIN). `vanishes` must rule out every one of their
    floors."""
    if per_unit is not None:
        rivals = L.paired_rivals(per_unit, level)
        return [r for r in rows if r["law"] in rivals]
    finite = [r["error"] for r in rows if math.isfinite(r["error"])]
    if not finite:
        return []
    bar = min(finite) / (1.0 - L.MARGIN)
    return [r for r in rows if r["law"] in L.FLOORED and math.isfinite(r["error"])
            and r["error"] <= bar]  # fmt: skip


def run_widening(alpha: float, sets: int) -> float:
    """How much wider than its per-set interval (two-sided, level 1 - alpha) a set's verdict
    interval is: the run's budget alpha is split over its `sets` sets with an interval
    (Bonferroni), half of each set's share to its intervals and half to the screen of rivals
    (`run_share`), and the percentile interval's distances from the point are scaled by the
    ratio of normal quantiles (draws of a few hundred hold no percentile at 0.05 / 600)."""
    return float(norm.ppf(1 - run_share(alpha, sets) / 2) / norm.ppf(1 - alpha / 2))


def run_share(alpha: float, sets: int) -> float:
    """Each of a run's `sets` sets' share of the false-verdict budget alpha for one of its two
    uses (intervals, the rivals' screen): alpha / (2 sets)."""
    return alpha / (2 * max(sets, 1))


def _wide(row: dict, name: str, widen: float) -> tuple[float, float]:
    """(low, high) of a row's interval of `name` widened `widen` times from its point on each
    side (never narrower than the per-set interval)."""
    point = row.get(name, math.nan)
    low, high = row.get(f"{name}_low", math.nan), row.get(f"{name}_high", math.nan)
    if widen == 1.0 or not math.isfinite(point):
        return low, high
    return (low - (widen - 1) * max(point - low, 0.0), high + (widen - 1) * max(high - point, 0.0))


def verdict(row: dict, close: list[dict], alpha: float, widen: float = 1.0) -> tuple[str, str]:
    """(verdict, reason) of a chosen row: `vanishes` (power law to zero, exponent interval
    above 0, >= VANISH_MIN_UNITS units, and every floored law in `close` rules out a floor of
    FLOOR_RULED_OUT of its fitted initial value), `settles` (a floored law falling to its
    floor: rate and scale above 0, the chooser's test Holm-adjusted over the run below
    `alpha`, and the floor's interval above zero and reaching no lower than FLOOR_RULED_OUT of
    the fitted initial value; a floor interval wholly below that share reads as `_low_floor`
    says), `flat` (the exponent's interval inside
    +-FLAT_BAND), `grows` (interval below -FLAT_BAND), else `cannot tell` with the reason.
    `vanishes`, `flat` and `grows` read the intervals `widen` times wider (`run_widening`: the
    run's one budget; `settles` spends it through law_p_holm)."""
    if not math.isfinite(row["rate_low"]):
        return "cannot tell", f"no interval ({row['method']})"
    lo, hi = _wide(row, "rate", widen)
    if row["law"] == L.LAW_ZERO:
        # a rise must clear the flat band, as a flat reading must stay inside it: a curve flat
        # in truth has its exponent's interval below 0 in 2.5 % of sets, a false `grows` in
        # most runs of hundreds of sets (bench/laws.py --runs); below -FLAT_BAND almost never
        if hi < -FLAT_BAND:
            return "grows", ""
        if hi < 0:
            return "cannot tell", (f"a rise, but the exponent's interval [{lo:.2f}, {hi:.2f}] "
                                   f"reaches into the flat band +-{FLAT_BAND}")  # fmt: skip
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
            high = _wide(f, "floor", widen)[1]
            if not (math.isfinite(high) and high < bar):
                return "cannot tell", (
                    f"{f['law']} predicts as well as the data can tell from the best law and "
                    f"its floor interval at the run's level reaches {_sig(high)}, not below "
                    f"{FLOOR_RULED_OUT:.0%} of the initial value ({_sig(bar)})")  # fmt: skip
        if not close:
            return "cannot tell", "no floored law could be fitted to rule a floor out"
        return "vanishes", ""
    if not (row["rate"] > 0 and row["scale"] > 0):
        return "cannot tell", "the floored law does not fall to its floor (rate or scale <= 0)"
    bar = FLOOR_RULED_OUT * fitted_initial(row)
    if row["floor_high"] < bar:
        return _low_floor(row, close, bar, widen)
    p = row["law_p_holm"]
    if not (math.isfinite(p) and p < alpha):
        return "cannot tell", (f"the floored law's gain over decay to zero has Holm-adjusted "
                               f"p = {_sig(p)}, not below {alpha:g}")  # fmt: skip
    if not (row["floor_p"] < alpha):
        return "cannot tell", f"the floor's interval reaches 0 (floor_p = {_sig(row['floor_p'])})"
    if not row["floor_low"] >= bar:
        return "cannot tell", (f"the floor's interval reaches {_sig(row['floor_low'])}, below "
                               f"{FLOOR_RULED_OUT:.0%} of the initial value ({_sig(bar)}): a "
                               "floor that small is not told from a decay to zero")  # fmt: skip
    return "settles", ""


def _low_floor(row: dict, close: list[dict], bar: float, widen: float) -> tuple[str, str]:
    """The verdict of a chosen floored law whose floor interval lies below FLOOR_RULED_OUT of
    the initial value: `vanishes` under its rules (the fall's rate interval above 0, >=
    VANISH_MIN_UNITS units, every close floored law's floor ruled out too), else `cannot
    tell`."""
    why = (f"a decay to a floor below {FLOOR_RULED_OUT:.0%} of the initial value (interval up "
           f"to {_sig(row['floor_high'])}, under {_sig(bar)})")  # fmt: skip
    if not _wide(row, "rate", widen)[0] > 0 or row["n"] < VANISH_MIN_UNITS:
        return "cannot tell", f"{why}, but {row['n']} units or its rate cannot rule out a level"
    for f in close:
        if not _wide(f, "floor", widen)[1] < FLOOR_RULED_OUT * fitted_initial(f):
            return "cannot tell", f"{why}, but {f['law']} predicts as well and may hold one"
    return "vanishes", ""


def fitted_initial(row: dict) -> float:
    """A fitted law's value at x_min: the scale the floor is measured against (the mean curve's
    first point carries that point's noise; a heavy-tailed draw there made a 10 % floor look
    like 8 %)."""
    shape = 1.0 if row["law"] == L.LAW_EQUILIBRIUM else row["x_min"] ** -row["rate"]
    return row["floor"] + row["scale"] * shape


def _sig(v: float) -> str:
    return f"{v:.2g}" if math.isfinite(v) else "n/a"
