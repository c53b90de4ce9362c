"""Behaviour laws by binomial likelihood, and the floor test of a(t) (issue 54).

A behaviour curve is 0/1 verdicts: at each window (or turn) j, k_j of the n_j samples with a
decided verdict pass. Each law of `harness.analysis.laws` is fitted to those counts by binomial
likelihood (identity link: iteratively reweighted least squares, each step weighing a window by
n_j / (p_j (1 - p_j)) at the previous step's fit, the rate profiled over the law's grid as in
`laws.fit_grid`), so a window near 0 or 1, which carries more information, weighs more (a
least-squares fit of the mean curve weighs every window alike, and the fixed 5 % margin on held-
out squared error it was judged by never cleared 0/1 noise: floors of 20-30 % read `settles` in
0 of 100 runs at 16 samples x 48 windows).

The floor test: the likelihood ratio of the best falling floored law (floor, scale and rate
above 0) against the best decay to zero (power law or exponential: the floor must beat both),
`statistic` = deviance(best zero law) - deviance(best floored law). Its null distribution is
not a chi-square (the exponential equilibrium and the power law to zero are not nested, and
the best of two floored laws is taken), so the p-value is a parametric bootstrap: counts drawn
from the fitted best decay to zero, the same statistic refitted on each draw. Draws stop early
(`harness.stats.monte_carlo.sequential_p`) and run up to `max_draws`, which the run sets so
that its smallest p, 1 / (max_draws + 1), can pass Holm over its sets. The level is shown by
simulation: bench/law_calibration.py. The bootstrap draws windows independently given the
fitted curve; a sample's windows that move together (a sample that fails once fails on) would
read as a shape the decay misses, so the observed statistic is divided by the samples' `dispersion`
where it is above 1 (tests/unit/test_law_binomial.py: samples that stop for good). Dividing the
observed statistic alone is conservative where windows are independent (the dispersion, ~1,
is above 1 by chance in about half the sets), and that is what holds the level at the slowest
decay to zero: dividing each draw by its own dispersion too, or neither, read P(p < 0.05) =
0.058-0.062 there (2,000 and 600 sets, power a = 0.5, 16 samples), the parametric bootstrap's
own excess, against 0.045 as built (docs/performance.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import xlogy

from harness.analysis import laws as L
from harness.stats.monte_carlo import sequential_p

IRLS_STEPS = 4  # reweighing steps after the first (equal-weight) fit of a reported fit
TEST_IRLS_STEPS = 2  # the test's: a third moves deviances by < 0.3
P_CLIP = 1e-3  # a fitted share's floor and ceiling in weights and deviance (identity link)
MIN_TEST_DRAWS, MAX_TEST_DRAWS = 400, 20_000
# the test's fits try every TEST_STEP-th rate of the grid (the observed statistic and every
# draw's alike, so the level holds whatever the step): 3 x cheaper draws
TEST_STEP = 3
# the intervals' resamples: every 2nd rate (0.02 in a power law's exponent, 10 % in an
# exponential's rate) and one reweighing: 3 x cheaper, ~200 resamples per behaviour set
BOOT_STEP = 2


@dataclass(frozen=True)
class FloorTest:
    """The floor test of one behaviour set: p-value (1.0 with no falling floored law with a
    floor that matters: `statistic`), the floored law with the least deviance (None without
    one), the statistic (divided by the dispersion where it is above 1), the draws made, each
    law's binomial fit (TEST_LAWS) of the observed counts, and the samples' `dispersion`."""

    p: float
    law: str | None
    statistic: float
    draws: int
    fits: dict[str, L.LawParams]
    dispersion: float = math.nan


def counts(units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(share passing, samples decided) per window of units (U, n) of 1/0 verdicts, NaN = no
    verdict; the share is NaN where no sample has one."""
    units = np.atleast_2d(np.asarray(units, dtype=np.float64))
    ok = np.isfinite(units)
    n = ok.sum(axis=0).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, units, 0.0).sum(axis=0) / n, n


def deviance(share: np.ndarray, n: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Binomial deviance per row (B,) of fitted shares `pred` (B, J) against observed shares
    (B, J) of n (B, J) samples; a fitted share is held inside [P_CLIP, 1 - P_CLIP] (identity
    link: a law may leave [0, 1]), a non-finite one costs inf."""
    used = n > 0
    s = np.where(used, share, 0.0)
    p = np.clip(np.where(np.isfinite(pred), pred, 0.5), P_CLIP, 1.0 - P_CLIP)
    per = xlogy(s, s) - xlogy(s, p) + xlogy(1.0 - s, 1.0 - s) - xlogy(1.0 - s, 1.0 - p)
    dev = 2.0 * np.where(used, n * per, 0.0).sum(axis=-1)
    bad = (used & ~np.isfinite(pred)).any(axis=-1)
    return np.where(bad, np.inf, dev)


def fit_binomial(
    law: str, x: np.ndarray, share: np.ndarray, n: np.ndarray, step: int = 1,
    steps: int = IRLS_STEPS,
) -> L.LawParams:  # fmt: skip
    """Binomial-likelihood fit of `law` to each row of share (B, J) with n (B, J) samples
    decided (or one curve (J,)) over every `step`-th rate of its grid, reweighing `steps`
    times; `sse` holds the deviance."""
    x = np.asarray(x, dtype=np.float64)
    share = np.atleast_2d(np.asarray(share, dtype=np.float64))
    n = np.broadcast_to(np.atleast_2d(np.asarray(n, dtype=np.float64)), share.shape)
    w0 = np.where(np.isfinite(share), n, 0.0)
    grid = L.grid_shapes(law, x, step)
    params = L.fit_grid(law, share, w0, grid)
    x0 = float(x.min())
    for _ in range(steps):
        pred = L.predict(law, params, x, x0)
        p = np.clip(np.where(np.isfinite(pred), pred, 0.5), P_CLIP, 1.0 - P_CLIP)
        params = L.fit_grid(law, share, w0 / (p * (1.0 - p)), grid)
    dev = deviance(share, np.where(w0 > 0, n, 0.0), L.predict(law, params, x, x0))
    return L.LawParams(params.floor, params.scale, params.rate,
                       np.where(np.isfinite(params.rate), dev, np.nan))  # fmt: skip


def fit_all(
    x: np.ndarray, share: np.ndarray, n: np.ndarray, step: int = 1, steps: int = IRLS_STEPS
) -> dict[str, L.LawParams]:
    """Every law of the test (TEST_LAWS) fitted by binomial likelihood."""
    return {law: fit_binomial(law, x, share, n, step, steps) for law in L.TEST_LAWS}


def _test_fits(x: np.ndarray, share: np.ndarray, n: np.ndarray) -> dict[str, L.LawParams]:
    """The test's fits: coarser and fewer steps than a reported fit (`TEST_STEP`)."""
    return fit_all(x, share, n, TEST_STEP, TEST_IRLS_STEPS)


def statistic(fits: dict[str, L.LawParams], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(deviance of the best decay to zero - deviance of the best falling floored law with a
    floor of at least FLOOR_RULED_OUT of its value at x_min, -inf where none is; the index
    into FLOORED of that law) per row. A smaller floor is no candidate: `settles` could not
    read it, and with few samples a decay's sporadic late passes fitted floors of 1-3 % that
    the draws from the fitted decay did not reproduce (P(p < 0.05) = 0.10 at 4 samples)."""
    zero = np.fmin.reduce([np.where(np.isnan(fits[z].sse), np.inf, fits[z].sse)
                           for z in L.ZERO_LAWS])  # fmt: skip
    floored = []
    for law in L.FLOORED:
        f = fits[law]
        with np.errstate(invalid="ignore"):
            initial = L.initial_value(law, f, float(x.min()))
            falling = (f.floor >= L.FLOOR_RULED_OUT * initial) & (f.floor > 0)
            falling &= (f.scale > 0) & (f.rate > 0) & np.isfinite(f.sse)
        floored.append(np.where(falling, f.sse, np.inf))
    dev = np.stack(floored)
    best = np.argmin(dev, axis=0)
    least = dev[best, np.arange(dev.shape[1])]
    with np.errstate(invalid="ignore"):
        stat = np.where(np.isfinite(least) & np.isfinite(zero), zero - least, -np.inf)
    return stat, best


def dispersion(units: np.ndarray, null: np.ndarray) -> float:
    """Between-sample variance of each sample's passes minus the fitted decay's expectation,
    over its variance were the windows independent: ~1 for independent windows, up to the
    number of windows for a sample that adheres until it stops for good. The test divides its
    statistic by it where above 1 (quasi-likelihood: the draws are independent windows, so a
    sample's windows that move together would otherwise read as a shape the decay misses; at
    full persistence P(p < 0.05) was 0.13-0.22)."""
    ok = np.isfinite(units)
    resid = np.where(ok, np.where(ok, units, 0.0) - null[None, :], 0.0).sum(axis=1)
    expected = np.where(ok, null * (1.0 - null), 0.0).sum(axis=1)
    if units.shape[0] < 2 or float(expected.mean()) <= 0:
        return 1.0
    return float(np.var(resid, ddof=1) / expected.mean())


def max_draws(sets: int, alpha: float) -> int:
    """The bootstrap draws the floor test may make in a run of `sets` tested sets: enough for
    its least p-value, 1 / (draws + 1), to pass Holm's first step alpha / sets twice over."""
    return int(min(MAX_TEST_DRAWS, max(MIN_TEST_DRAWS, math.ceil(2 * sets / alpha))))


def floor_test(x: np.ndarray, units: np.ndarray, draws: int, seed: int = 0) -> FloorTest:
    """The floor test of units (U, n) of 1/0 verdicts at x (module docstring)."""
    x = np.asarray(x, dtype=np.float64)
    units = np.atleast_2d(np.asarray(units, dtype=np.float64))
    share, n = counts(units)
    fits = fit_all(x, share, n)
    stat, best = statistic(_test_fits(x, share, n), x)
    observed = float(stat[0])
    if not math.isfinite(observed):
        return FloorTest(1.0, None, observed, 0, fits)
    zero = min(L.ZERO_LAWS, key=lambda z: float(np.nan_to_num(fits[z].sse[0], nan=np.inf)))
    null = np.clip(L.predict(zero, fits[zero], x, float(x.min()))[0], 0.0, 1.0)
    null = np.where(np.isfinite(null), null, 0.5)
    spread = dispersion(units, null)
    observed /= max(spread, 1.0)
    size = n.astype(np.int64)
    rng = np.random.default_rng(seed)

    def draw(b: int) -> np.ndarray:
        k = rng.binomial(size, null, size=(b, len(x))).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return statistic(_test_fits(x, k / size, n), x)[0]

    p, used = sequential_p(observed, draw, draws)
    return FloorTest(p, L.FLOORED[best[0]], observed, used, fits, spread)


def boot_binomial(x: np.ndarray, units: np.ndarray, draws: int, seed: int = 0) -> dict:
    """Each law's binomial fit (LAWS) to `draws` resamples of the samples (drawn with
    replacement, as `laws.boot_params` draws units): the intervals of a behaviour set."""
    units = np.atleast_2d(np.asarray(units, dtype=np.float64))
    rng = np.random.default_rng(seed)
    u = units.shape[0]
    weight = rng.multinomial(u, np.full(u, 1.0 / u), size=draws).astype(np.float64)
    ok = np.isfinite(units)
    n = weight @ ok
    with np.errstate(invalid="ignore", divide="ignore"):
        share = (weight @ np.where(ok, units, 0.0)) / n
    return {law: fit_binomial(law, x, share, n, BOOT_STEP, 1) for law in L.LAWS}
