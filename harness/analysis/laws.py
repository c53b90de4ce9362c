"""Which law does a curve follow? Decay to zero against a floor or an equilibrium
(docs/architecture.md, "Estimators: laws").

Three candidate laws of a curve y(x) (x: token position t or turn k):
- `power-zero`:      y = c x^-rate                  (the no-hair theorem: influence vanishes)
- `power-floor`:     y = floor + c x^-rate          (decays like a power law, to a floor)
- `exp-equilibrium`: y = floor + c e^(-rate (x - x0)) (a restoring force: a stable equilibrium,
  "Drift No More?", arXiv 2510.07777), x0 the first position.

Each law is fitted by least squares, profiled over a grid of its rate (for a fixed rate the law
is linear in floor and c: a 2 x 2 solve per grid value, all curves and grid values in one array
operation). `relative` space weighs each point by 1 / y^2 (relative error: mechanism curves span
decades); `absolute` space weighs points equally (behaviour: shares in [0, 1]).

The law is chosen by out-of-sample error, never in-sample fit (the floored laws nest the power
law to zero, so they always fit at least as well in sample):
- `tail`: fit the first half of the curve (x <= x_min + (x_max - x_min) / 2) and predict the rest;
  the error is the RMS residual over the tail, in the fit's space.
- `leave-one-unit-out` (behaviour with >= 3 samples): fit the mean curve of the other units,
  predict the held-out unit's 0/1 curve; each unit's error is its mean binomial deviance (the
  error column and the rivals' screen). The choice itself is the binomial floor test of
  `harness.analysis.law_binomial` (a fixed 5 % of squared error never cleared 0/1 noise, and a
  sign-flip test of held-out deviances spent most of the signal: issue 54).
- `leave-one-pair-out` (mechanism curves with >= PAIRED_MIN_UNITS pairs): fit the mean curve of
  the other pairs, predict the held-out pair's log curve after removing its own level (pairs
  differ in level by ~25 %: bench/laws.py); each pair's error is its mean squared log residual.
  A floored law replaces the power law to zero only when it predicts the held-out pairs better
  in a one-sided sign-flip test over the pairs at PAIRED_LEVEL: the per-pair differences carry
  the curve's noise, so the margin scales with it (a fixed 5 % margin on errors dominated by a
  pair's own noise let few floors through; docs/performance.md, "Which law?").
Positive curves (relative space) take a floored law only with a positive floor: a divergence
that levels off below zero is a decay to zero fitted to noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.stats.sign_flip import sign_flip_p

LAW_ZERO = "power-zero"
LAW_FLOOR = "power-floor"
LAW_EQUILIBRIUM = "exp-equilibrium"
LAWS = (LAW_ZERO, LAW_FLOOR, LAW_EQUILIBRIUM)
FLOORED = (LAW_FLOOR, LAW_EQUILIBRIUM)
# the exponential decay to zero: not a row of laws.csv, but a null of the per-set test. An
# exponential drop is a decay to zero the power law fits badly: tested against the power law
# alone, a floored exponential "beat" it in 6-15 % of such sets (issue 54)
EXP_ZERO = "exp-zero"
ZERO_LAWS = (LAW_ZERO, EXP_ZERO)
TEST_LAWS = (*LAWS, EXP_ZERO)
_EXP_SHAPED = (LAW_EQUILIBRIUM, EXP_ZERO)

# power-law exponents tried (a rise is a negative exponent). A floored power law decays to its
# floor: its exponent is positive (a negative one is a line or a rise that crosses its "floor",
# e.g. 0.765 - 0.00084 t), and it skips rate < 0.01, where x^-rate is constant and collinear
# with the floor
ALPHA_GRID = np.round(np.arange(-1.0, 3.0001, 0.01), 4)
FLOOR_ALPHA_GRID = ALPHA_GRID[ALPHA_GRID >= 0.01]
# exponential rates, in units of 1 / (x_max - x_min) of the curve fitted
EXP_GRID = np.geomspace(0.05, 50.0, 140)
COARSE = 5  # the coarse pass of a fit tries every 5th rate of the grid
MARGIN = 0.05  # a floored law must predict 5 % better than the power law to zero
# `vanishes` needs the data to rule out a floor this share of the initial value, and `settles`
# needs the floor's interval to reach at least it: a floor below it is a decay the data cannot
# tell from one to zero (exponential drops to zero claimed floors of a median 0.05 % of the
# initial value and read `settles` in 6-15 % of sets: issue 54)
FLOOR_RULED_OUT = 0.1
# rolling origin: the x range is fitted up to each cut (a share of it) and predicted beyond
TAIL_CUTS = (0.3, 0.4, 0.5, 0.6, 0.7)
PAIRED_MIN_UNITS = 4  # leave-one-pair-out needs pairs enough for a paired test
PAIRED_LEVEL = 0.1  # one-sided; set by bench/laws.py (docs/performance.md, "Which law?")
DEV_CLIP = 0.01  # a 0/1 prediction's floor and ceiling in the deviance: one window's cost <= 9.2
_EPS = 1e-300


@dataclass(frozen=True)
class LawParams:
    """Fitted parameters, each (B,) over B curves fitted together; sse the weighted residual."""

    floor: np.ndarray
    scale: np.ndarray
    rate: np.ndarray
    sse: np.ndarray


def weights(y: np.ndarray, space: str) -> np.ndarray:
    """Per-point weights: 1 / y^2 (relative) or 1 (absolute); 0 where y is unusable."""
    ok = np.isfinite(y)
    if space == "relative":
        ok &= y > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(ok, 1.0 / np.where(ok, y, 1.0) ** 2, 0.0)
    return ok.astype(np.float64)


def _grid(law: str, x: np.ndarray) -> np.ndarray:
    """The rates a law is profiled over, for a curve at positions x."""
    if law in _EXP_SHAPED:
        return EXP_GRID / max(float(x.max() - x.min()), 1.0)
    return ALPHA_GRID if law == LAW_ZERO else FLOOR_ALPHA_GRID


def _shape(law: str, rates: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The law's shape function at x for each rate: rates (...,) -> (..., n)."""
    if law in _EXP_SHAPED:
        return np.exp(-rates[..., None] * (x - x.min()))
    return np.exp(-rates[..., None] * np.log(x))


def _solve(law: str, w: np.ndarray, y0: np.ndarray, g: np.ndarray):
    """(floor, scale, sse), each (B, G), of the linear fit at every rate: g is (G, n), shared
    by the B curves, or (B, G, n), one grid per curve."""
    wy = w * y0
    if g.ndim == 2:
        sgy, sgg, sg = wy @ g.T, w @ (g * g).T, w @ g.T
    else:
        sgy = np.einsum("bn,bgn->bg", wy, g)
        sgg = np.einsum("bn,bgn->bg", w, g * g)
        sg = np.einsum("bn,bgn->bg", w, g)
    syy = (wy * y0).sum(axis=1)[:, None]
    if law in ZERO_LAWS:
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = sgy / sgg
        return np.zeros_like(scale), scale, syy - scale * sgy
    s1 = w.sum(axis=1)[:, None]
    sy = wy.sum(axis=1)[:, None]
    det = s1 * sgg - sg * sg
    with np.errstate(divide="ignore", invalid="ignore"):  # det 0: a rate collinear with the floor
        floor = (sgg * sy - sg * sgy) / det
        scale = (s1 * sgy - sg * sy) / det
        sse = syy - floor * sy - scale * sgy
    return floor, scale, np.where(np.abs(det) > 1e-12 * np.maximum(s1 * sgg, _EPS), sse, np.inf)


def _best(sse: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Per row, the index of the least sse; among rates that fit equally well (a curve that
    is 0 throughout fits every rate) the one nearest 0, so a flat curve reads as flat."""
    sse = np.where(np.isfinite(sse), sse, np.inf)
    least = sse.min(axis=1, keepdims=True)
    tied = sse <= least + 1e-12 * np.maximum(np.abs(least), 1e-300)
    return np.argmin(np.where(tied, np.abs(rates), np.inf), axis=1)


def fit_law(law: str, x: np.ndarray, y: np.ndarray, space: str) -> LawParams:
    """Least-squares fit of `law` to each row of y (B, n) (or one curve (n,)) at x (n,): the
    rate grid at every COARSE-th value first, then every value within COARSE steps of each
    curve's best (the profile is smooth in the rate; the full grid costs 5 x more)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    w = weights(y, space)
    y0 = np.where(w > 0, y, 0.0)
    rates = _grid(law, x)
    coarse = np.arange(0, len(rates), COARSE)
    sse = _solve(law, w, y0, _shape(law, rates[coarse], x))[2]
    best = coarse[_best(sse, np.broadcast_to(rates[coarse], sse.shape))]  # (B,)
    fine = np.clip(best[:, None] + np.arange(-COARSE, COARSE + 1)[None, :], 0, len(rates) - 1)
    floor, scale, sse = _solve(law, w, y0, _shape(law, rates[fine], x))  # (B, 2 COARSE + 1)
    pick = _best(sse, rates[fine])
    rows = np.arange(y.shape[0])
    enough = (w > 0).sum(axis=1) >= (2 if law in ZERO_LAWS else 3)

    def chosen(a: np.ndarray) -> np.ndarray:
        return np.where(enough, a[rows, pick], np.nan)

    return LawParams(chosen(floor), chosen(scale), chosen(rates[fine]), chosen(sse))


def grid_shapes(law: str, x: np.ndarray, step: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(rates, shapes (G, n)) of every `step`-th rate of a law's grid at x: computed once for
    the many weighted fits of one curve (`fit_grid`)."""
    x = np.asarray(x, dtype=np.float64)
    rates = _grid(law, x)[::step]
    return rates, _shape(law, rates, x)


def fit_grid(law: str, y: np.ndarray, w: np.ndarray, grid: tuple) -> LawParams:
    """Weighted least-squares fit of `law` to each row of y (B, n) with per-point weights w
    (B, n) (0: left out) over the whole rate grid (`grid_shapes`) in one pass: the binomial
    fits of behaviour curves (`law_binomial`) reweigh each step, and one matrix product over
    the whole grid costs less there than `fit_law`'s coarse-then-fine pass per curve."""
    rates, shapes = grid
    y0 = np.where(w > 0, y, 0.0)
    floor, scale, sse = _solve(law, w, y0, shapes)
    pick = _best(sse, np.broadcast_to(rates, sse.shape))
    rows = np.arange(y0.shape[0])
    enough = (w > 0).sum(axis=1) >= (2 if law in ZERO_LAWS else 3)
    every = (floor, scale, np.broadcast_to(rates, sse.shape), sse)
    return LawParams(*(np.where(enough, a[rows, pick], np.nan) for a in every))


def predict(law: str, params: LawParams, x: np.ndarray, x0: float) -> np.ndarray:
    """(B, n) values of the fitted laws at x; x0 is the first position of the fitted curve."""
    x = np.asarray(x, dtype=np.float64)[None, :]
    rate = params.rate[:, None]
    log_shape = -rate * (x - x0) if law in _EXP_SHAPED else -rate * np.log(x)
    return params.floor[:, None] + params.scale[:, None] * np.exp(log_shape)


def initial_value(law: str, params: LawParams, x_min: float) -> np.ndarray:
    """(B,) each fitted law's value at x_min: what a floor's share is measured against."""
    shape = 1.0 if law in _EXP_SHAPED else float(x_min) ** -params.rate
    return params.floor + params.scale * shape


def _rms(y: np.ndarray, pred: np.ndarray, space: str) -> np.ndarray:
    """RMS residual per row, over the points usable in `space` (NaN when none is)."""
    w = weights(y, space)
    resid = np.where(w > 0, (np.where(w > 0, y, 0.0) - pred), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt((w * resid * resid).sum(axis=-1) / (w > 0).sum(axis=-1))


def tail_errors(x: np.ndarray, y: np.ndarray, space: str) -> dict[str, float]:
    """Each law's error predicting the tail of the mean curve y (n,): for every cut in
    TAIL_CUTS, fit x <= cut and take the RMS residual beyond it; the errors are averaged over
    the cuts (rolling origin: one cut's error is one draw of the curve's noise)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    out = {law: [] for law in LAWS}
    for share in TAIL_CUTS:
        cut = x.min() + share * (x.max() - x.min())
        train, test = x <= cut, x > cut
        if train.sum() < 4 or not test.any():
            continue
        for law in LAWS:
            params = fit_law(law, x[train], y[train], space)
            pred = predict(law, params, x[test], float(x[train].min()))
            out[law].append(float(_rms(y[test][None, :], pred, space)[0]))
    return {law: float(np.mean(e)) if e else math.nan for law, e in out.items()}


def held_out_errors(x: np.ndarray, units: np.ndarray, space: str) -> dict[str, float]:
    """Each law's RMS error predicting each unit's curve (units: (U, n), NaN = no value) from
    the mean curve of the other units, over all held-out points."""
    units = np.asarray(units, dtype=np.float64)
    n = units.shape[0]
    others = np.stack([_nan_mean(np.delete(units, i, axis=0)) for i in range(n)])  # (U, n)
    out = {}
    for law in LAWS:
        params = fit_law(law, x, others, space)
        pred = predict(law, params, x, float(np.min(x)))
        w = weights(units, space)
        resid = np.where(w > 0, np.where(w > 0, units, 0.0) - pred, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[law] = float(np.sqrt((w * resid * resid).sum() / (w > 0).sum()))
    return out


def held_out_unit_deviance(x: np.ndarray, units: np.ndarray) -> dict[str, np.ndarray]:
    """Per law (TEST_LAWS), each 0/1 unit's (U,) mean binomial deviance predicting its curve
    from the mean curve of the other units (predictions clipped to [DEV_CLIP, 1 - DEV_CLIP]);
    NaN for a unit with no usable point. The likelihood of 0/1 verdicts: a squared error puts a
    20 % floor's gain at a few % of the error of the noise around it, the deviance weighs a
    prediction near 0 for windows that pass as the log of its odds."""
    units = np.asarray(units, dtype=np.float64)
    others = np.stack([_nan_mean(np.delete(units, i, axis=0)) for i in range(units.shape[0])])
    ok = np.isfinite(units)
    y = np.where(ok, units, 0.0)
    out = {}
    for law in TEST_LAWS:
        pred = predict(law, fit_law(law, x, others, "absolute"), x, float(np.min(x)))
        p = np.clip(np.where(np.isfinite(pred), pred, 0.5), DEV_CLIP, 1.0 - DEV_CLIP)
        dev = -2.0 * (y * np.log(p) + (1.0 - y) * np.log(1.0 - p))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[law] = np.where(ok, dev, 0.0).sum(axis=1) / ok.sum(axis=1)
    return out


def held_out_log_errors(x: np.ndarray, units: np.ndarray) -> dict[str, np.ndarray]:
    """Per law, each unit's (U,) mean squared log error predicting its curve (units: (U, n)
    > 0, NaN = no value) from the mean curve of the other units, the unit's own level (its
    mean log residual) removed; NaN for a unit with fewer than 3 usable points."""
    units = np.asarray(units, dtype=np.float64)
    others = np.stack([_nan_mean(np.delete(units, i, axis=0)) for i in range(units.shape[0])])
    ok = np.isfinite(units) & (units > 0)
    log_y = np.log(np.where(ok, units, 1.0))
    out = {}
    for law in TEST_LAWS:
        pred = predict(law, fit_law(law, x, others, "relative"), x, float(np.min(x)))
        good = ok & np.isfinite(pred) & (pred > 0)
        resid = np.where(good, log_y - np.log(np.where(good, pred, 1.0)), 0.0)
        count = good.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            level = resid.sum(axis=1) / count
            sq = np.where(good, resid - level[:, None], 0.0) ** 2
            err = sq.sum(axis=1) / count
        # a law that cannot predict a point the data has loses the unit outright
        out[law] = np.where(count >= 3, np.where(count < ok.sum(axis=1), np.inf, err), np.nan)
    return out


def paired_p(per_unit: dict[str, np.ndarray], floors: dict[str, float] | None) -> float:
    """One-sided p-value that a floored law (a candidate where `floors` gives it a finite floor
    above 0; law_table passes only floors that matter) predicts the held-out units better than
    decay to zero: per floored law, a sign-flip test over the units (`harness.stats.sign_flip`)
    of its error differences from each law to zero (power and exponential), the larger p of the
    two (the floor must beat every decay to zero: intersection-union), then the least p over
    the floored laws times their number (Bonferroni: picking the better is part of the
    decision). NaN with fewer than 3 units with finite errors; 1.0 with no candidate law (the
    set stays in the run's Holm family, whose size must not depend on which sets happened to
    fit a floor)."""
    keep = np.isfinite(per_unit[LAW_ZERO])
    if keep.sum() < 3:
        return math.nan
    candidates = [law for law in FLOORED if floors is None or floors.get(law, math.nan) > 0]
    zeros = [z for z in ZERO_LAWS if z in per_unit]
    ps = [max(sign_flip_p(per_unit[z][keep] - per_unit[law][keep]) for z in zeros)
          for law in candidates]  # fmt: skip
    return min(1.0, len(FLOORED) * min(ps)) if ps else 1.0


def paired_rivals(per_unit: dict[str, np.ndarray], level: float) -> list[str]:
    """The floored laws the units left out cannot tell from the best law (least summed error):
    a one-sided sign-flip test over the units that the law predicts worse does not pass at
    `level` (the set's share of the run's budget: law_verdict.run_share). These
    are the chooser's tolerance: `vanishes` must rule out each one's floor. (A paired t-test
    here was not valid: held-out error differences are skewed and heavy-tailed, issue 54.)"""
    keep = np.isfinite(per_unit[LAW_ZERO])
    if keep.sum() < 3:
        return []
    sums = {law: float(np.sum(per_unit[law][keep])) for law in LAWS}
    finite = {law: v for law, v in sums.items() if math.isfinite(v)}
    if not finite:
        return []
    best = min(finite, key=finite.get)
    return [
        law
        for law in FLOORED
        if law in finite
        and (law == best or sign_flip_p(per_unit[law][keep] - per_unit[best][keep]) >= level)
    ]


def choose_paired(per_unit: dict[str, np.ndarray], floors: dict[str, float]) -> str | None:
    """Leave-one-unit-out choice: the floored law (positive floor) with the least summed error
    replaces the power law to zero when its sign-flip test over the units passes at
    PAIRED_LEVEL. None when
    the power law to zero has no finite error. The choice names the law that predicts best; a
    verdict of `settles` needs `paired_p` after the run's correction (law_verdict.verdict)."""
    zero = per_unit[LAW_ZERO]
    keep = np.isfinite(zero)
    if keep.sum() < 2:
        return None
    candidates = [law for law in FLOORED if floors.get(law, math.nan) > 0]
    if not candidates:
        return LAW_ZERO
    best = min(candidates, key=lambda law: float(np.sum(per_unit[law][keep])))
    p = sign_flip_p(zero[keep] - per_unit[best][keep])
    return best if p < PAIRED_LEVEL else LAW_ZERO


def choose(errors: dict[str, float], floors: dict[str, float] | None = None) -> str | None:
    """The law with the least out-of-sample error; a floored law only when it beats the power
    law to zero by MARGIN (a tie goes to fewer parameters) and, where `floors` is given
    (positive curves), its floor is above 0. None when no error is finite."""
    if floors is not None:
        errors = {law: e if law not in FLOORED or floors.get(law, math.nan) > 0 else math.nan
                  for law, e in errors.items()}  # fmt: skip
    finite = {law: e for law, e in errors.items() if math.isfinite(e)}
    if not finite:
        return None
    zero = finite.get(LAW_ZERO, math.inf)
    floored = {law: e for law, e in finite.items() if law in FLOORED}
    best = min(floored, key=floored.get) if floored else None
    if best is not None and floored[best] < (1.0 - MARGIN) * zero:
        return best
    return LAW_ZERO if math.isfinite(zero) else best


def _nan_mean(units: np.ndarray) -> np.ndarray:
    ok = np.isfinite(units)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, units, 0.0).sum(axis=0) / ok.sum(axis=0)


def mean_curve(units: np.ndarray) -> np.ndarray:
    """The mean over units (rows) of the finite values at each point."""
    return _nan_mean(np.atleast_2d(np.asarray(units, dtype=np.float64)))


def boot_params(
    x: np.ndarray, units: np.ndarray, space: str, draws: int, seed: int = 0
) -> dict[str, LawParams]:
    """Each law's parameters fitted to `draws` resampled mean curves (units drawn with
    replacement: the interval rests on the units, pairs or samples)."""
    units = np.atleast_2d(np.asarray(units, dtype=np.float64))
    rng = np.random.default_rng(seed)
    n = units.shape[0]
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=draws).astype(np.float64)  # (B, U)
    ok = np.isfinite(units)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (counts @ np.where(ok, units, 0.0)) / (counts @ ok)  # (B, n)
    return {law: fit_law(law, x, means, space) for law in LAWS}
