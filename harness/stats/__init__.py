"""Confidence intervals for the harness's verdicts: valid at every n, including 4.

Every interval the harness writes is an `Interval`: estimate, low, high, the number of units it
rests on (`n`) and the method that made it. The methods (docs/architecture.md, "Statistics"):

- `clopper-pearson`: the exact binomial interval (scipy's `binomtest(...).proportion_ci`,
  method "exact") when every value sits on one of the two bounds, e.g. per-sample pass/fail.
- `betting`: the hedged-capital betting confidence interval for the mean of values bounded in
  [lower, upper] (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by
  betting", JRSS-B 2024, Theorem 3 with the predictable plug-in bets tuned to the sample size,
  section 4). Its coverage is guaranteed by Ville's inequality for any distribution on the
  bounds, at every n; the running intersection over the prefixes is taken (still valid: Ville
  bounds the whole path).
- anytime (`anytime=True`): time-uniform confidence sequences, valid however often the data are
  looked at and whenever sampling stops. The method is fixed before the data by the metric's
  declared value type (`value_type`), never by the values observed (a fractional value moving a
  running sequence onto a fresh method made the error bound 2 alpha):
  - `beta-binomial-cs` (`value_type="binary"`: a per-unit pass/fail, e.g. a(t) at a point,
    pass^r, the survival share): the conjugate beta-binomial mixture martingale (Robbins'
    mixture) at the full alpha, exact-ish on 0/1 data; a declared-binary metric given a value
    off {0, 1} is an error.
  - `beta-binomial-cs+betting-cs` (`value_type="fraction"`, the default: per-sample AUC and
    final, differences): the beta-binomial sequence and the hedged betting sequence (bets of
    paper eq. 26) each at alpha/2, intersected (Bonferroni: both hold at once with probability
    >= 1 - alpha). The beta-binomial likelihood ratio is a supermartingale for any [0, 1] data
    (x -> (q/p)^x ((1-q)/(1-p))^(1-x) is convex, so its mean under any law on [0, 1] with mean
    p is at most 1), but on fractional data it spends the variance of 0/1 data at that mean;
    the betting sequence adapts to the variance. On 0/1 data the intersection is 2-8 % wider
    than the beta-binomial sequence alone at alpha (docs/performance.md).
  Each is evaluated as the running intersection up to the n given, so the values must come in
  the order they were sampled; an empty intersection (the data contradict every mean) gives
  no interval (NaN ends, method `none (empty running intersection)`), never [0, 1].
- `percentile-bootstrap` (`harness.stats.bootstrap.bootstrap_interval`): what remains
  resampled (e.g. a block bootstrap of one curve's noise), with one implementation, level and
  number of draws.

Capital processes are evaluated on a grid of candidate means, and the interval's ends are
rounded outward to the grid's next rejected point, so the grid only ever widens it.
NaN values are units without a value: they are dropped and not counted in `n`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import special, stats

DEFAULT_LEVEL = 0.95
DEFAULT_DRAWS = 2000
GRID = 2001  # candidate means on [0, 1]: steps of 0.0005, the most the grid can widen an end
TRUNCATION = 0.9  # c in (0, 1): bets at most c/m (c/(1-m)) keep the capital positive; 0.9
# measured narrower than the paper's 1/2 or 3/4 at n = 4..64 (validity holds for any c < 1)
PRIOR = 0.5  # beta-binomial mixture Beta(a, a): Jeffreys' prior
_EPS = 1e-12
BINARY_CS = "beta-binomial-cs"  # anytime, value type "binary"
FRACTION_CS = "beta-binomial-cs+betting-cs"  # anytime, value type "fraction": each at alpha/2
ValueType = Literal["fraction", "binary"]


@dataclass(frozen=True)
class Interval:
    estimate: float  # point estimate (NaN when n == 0)
    low: float
    high: float
    n: int  # the units it rests on
    method: str  # e.g. "clopper-pearson", "betting", "betting-cs", "none (n < 2)"

    @property
    def width(self) -> float:
        return self.high - self.low

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high

    def row(self, metric: str, *, method_column: str | None = None) -> dict[str, object]:
        """{metric, metric_low, metric_high, metric_n, <method column>} for a CSV row; the
        method column is `metric_method` unless named (e.g. "method" in single-metric rows)."""
        return {
            metric: self.estimate,
            f"{metric}_low": self.low,
            f"{metric}_high": self.high,
            f"{metric}_n": self.n,
            method_column or f"{metric}_method": self.method,
        }


def none_interval(estimate: float, n: int, why: str) -> Interval:
    """An interval that cannot be formed: NaN ends and a method that says why."""
    return Interval(float(estimate), math.nan, math.nan, int(n), f"none ({why})")


def check_level(level: float) -> float:
    if not 0.0 < level < 1.0 or not math.isfinite(level):
        raise ValueError(f"interval level must lie strictly between 0 and 1, got {level}")
    return float(level)


def _clean(values, lower: float, upper: float) -> np.ndarray:
    """Finite values rescaled to [0, 1]; NaN dropped; out-of-range values are an error."""
    if not upper > lower:
        raise ValueError(f"upper bound {upper} must exceed lower bound {lower}")
    x = np.asarray(values, dtype=float).ravel()
    x = x[~np.isnan(x)]
    tol = 1e-9 * (upper - lower)
    if np.any(x < lower - tol) or np.any(x > upper + tol):
        bad = x[(x < lower - tol) | (x > upper + tol)][0]
        raise ValueError(f"value {bad} outside the bounds [{lower}, {upper}]")
    return np.clip((x - lower) / (upper - lower), 0.0, 1.0)


def _is_binary(x: np.ndarray) -> bool:
    return bool(np.all((x == 0.0) | (x == 1.0)))


def mean_interval(
    values: Sequence[float] | np.ndarray,
    *,
    level: float = DEFAULT_LEVEL,
    lower: float = 0.0,
    upper: float = 1.0,
    anytime: bool = False,
    value_type: ValueType = "fraction",
) -> Interval:
    """Interval for the mean of values in [lower, upper] (see the module docstring);
    `value_type` (the metric's, declared before the data) fixes the anytime method."""
    level = check_level(level)
    x = _clean(values, lower, upper)
    n = len(x)
    if n == 0:
        return none_interval(math.nan, 0, "n = 0")
    binary = _is_binary(x)
    if anytime:  # one method per value type, fixed before the data (module docstring)
        (low, high), method = _anytime_interval(x, 1 - level, value_type)
    elif binary:
        ci = stats.binomtest(int(x.sum()), n).proportion_ci(level, method="exact")
        low, high, method = ci.low, ci.high, "clopper-pearson"
    else:
        (low, high), method = _betting(x, 1 - level, False), "betting"
    span = upper - lower
    if math.isnan(low):
        return none_interval(lower + span * float(x.mean()), n, "empty running intersection")
    return Interval(
        lower + span * float(x.mean()), lower + span * low, lower + span * high, n, method
    )


def binomial_interval(
    k: np.ndarray, n: np.ndarray, *, level: float = DEFAULT_LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """Clopper-Pearson (low, high) of k passes in n, elementwise (the beta quantiles scipy's
    exact `proportion_ci` uses); NaN where n == 0."""
    alpha = 1 - check_level(level)
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, stats.beta.ppf(alpha / 2, k, n - k + 1), 0.0)
        high = np.where(k < n, stats.beta.ppf(1 - alpha / 2, k + 1, n - k), 1.0)
    empty = n <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def paired_interval(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    level: float = DEFAULT_LEVEL,
    anytime: bool = False,
    value_type: ValueType = "fraction",
) -> Interval:
    """Interval for the mean of a - b over pairs, each value in [0, 1] (differences in [-1, 1]).
    A pair with either side NaN is dropped."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired values differ in length: {a.shape[0]} and {b.shape[0]}")
    return mean_interval(
        a - b, level=level, lower=-1.0, upper=1.0, anytime=anytime, value_type=value_type
    )


def _grid() -> np.ndarray:
    return np.linspace(0.0, 1.0, GRID)


def _outward(grid: np.ndarray, rejected: np.ndarray) -> tuple[float, float]:
    """The smallest [low, high] containing every grid point not rejected, its ends moved out to
    the next rejected point (the set between two grid points is unknown)."""
    kept = np.nonzero(~rejected)[0]
    if len(kept) == 0:  # a running intersection can be empty (early data far from late):
        return math.nan, math.nan  # no interval, not [0, 1] (mean_interval says why)
    first, last = kept[0], kept[-1]
    return float(grid[max(first - 1, 0)]), float(grid[min(last + 1, len(grid) - 1)])


def _bets(x: np.ndarray, alpha: float, anytime: bool) -> np.ndarray:
    """Predictable plug-in bets lambda_t, t = 1..n (paper eq. 26 for the CS, the fixed-n
    tuning sqrt(2 log(2/alpha) / (n sigma^2)) for the CI), before truncation."""
    n = len(x)
    t = np.arange(1, n + 1)
    mu = (0.5 + np.cumsum(x)) / (t + 1)  # mu_hat_t
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)  # sigma_hat^2_t
    prev = np.concatenate([[0.25], sigma2[:-1]])  # sigma_hat^2_{t-1}: predictable
    scale = t * np.log1p(t) if anytime else np.full(n, float(n))
    return np.sqrt(2 * math.log(2 / alpha) / (prev * scale))


# Each candidate mean is tested on its own (its column of the (n, G) arrays, its row in the
# betting's), so testing them a slice at a time gives the same verdicts while every array
# stays within this many floats (1 MiB: within a core's cache, where 4 MiB slices made the
# betting test of 10,000 samples 1.4x slower) instead of n x 2001 (10,000 samples: 160 MiB
# per array, times the temporaries); up to n = 65 it is one slice.
_CELLS = 2**17


def _column_chunks(m: np.ndarray, n: int):
    step = max(1, _CELLS // max(n, 1))
    for start in range(0, len(m), step):
        yield m[start : start + step]


def check_binary(x: np.ndarray, value_type: str) -> None:
    """A metric declared binary must have only 0/1 values (its method was fixed on that)."""
    if value_type not in ("fraction", "binary"):
        raise ValueError(f"value_type must be 'fraction' or 'binary', got {value_type!r}")
    if value_type == "binary" and not _is_binary(x):
        bad = x[(x != 0.0) & (x != 1.0)][0]
        raise ValueError(f"a metric declared binary (0/1 values) has the value {bad}")


def _anytime_interval(x: np.ndarray, alpha: float, value_type: str):
    """((low, high), method) of the confidence sequence the value type fixes."""
    check_binary(x, value_type)
    if value_type == "binary":
        return _outward(_grid(), _beta_binomial_rejected(x, alpha)), BINARY_CS
    rejected = _beta_binomial_rejected(x, alpha / 2) | _betting_rejected(x, alpha / 2, True)
    return _outward(_grid(), rejected), FRACTION_CS


def _betting(x: np.ndarray, alpha: float, anytime: bool) -> tuple[float, float]:
    """Hedged-capital betting CI (anytime=False) or CS (True) on [0, 1] data, as the running
    intersection over t <= n: m is rejected once max_t K_t(m) >= 1/alpha."""
    return _outward(_grid(), _betting_rejected(x, alpha, anytime))


def _betting_rejected(x: np.ndarray, alpha: float, anytime: bool) -> np.ndarray:
    """The grid points _betting rejects (GRID,)."""
    rejected = []
    for axis, xs, lam, m in betting_slices(x, _bets(x, alpha, anytime)):
        with np.errstate(divide="ignore"):
            log_plus = np.minimum(lam, TRUNCATION / m)  # lambda+, then log K+
            log_minus = np.minimum(lam, TRUNCATION / (1 - m))
        dev = xs - m
        # each array worked in place: the same operations on the same operands as
        # log1p(lam_plus * dev) and log1p(-lam_minus * dev) (-(a b) is (-a) b exactly), without
        # a temporary per step (n = 10,000: these were ~40 % of a logged run's analysis)
        log_plus *= dev
        log_minus *= dev
        np.negative(log_minus, out=log_minus)
        for log in (log_plus, log_minus):
            np.log1p(log, out=log)
            np.cumsum(log, axis=axis, out=log)
        # hedged capital max(K+/2, K-/2) with theta = 1/2, at its largest over t: the largest
        # of either minus log 2 (subtracting a constant keeps the order of floats)
        peak = np.maximum(log_plus.max(axis=axis), log_minus.max(axis=axis)) - math.log(2)
        rejected.append(peak >= math.log(1 / alpha))
    return np.concatenate(rejected)


# From this many values on, a betting test lays its candidate means out by rows, t along each
# row (contiguous); below it, by columns, t down each column (the means contiguous): each the
# faster where it is used (n = 4: rows 1.4x slower; n = 10,000: 1.8x faster with 1 MiB
# slices). A cumulative sum adds the same terms in the same order either way.
_BY_ROWS_FROM = 16


def betting_slices(x: np.ndarray, lam: np.ndarray):
    """(t axis, x, bets, candidate means) per slice of the grid (`_column_chunks`), shaped to
    broadcast in the layout `_BY_ROWS_FROM` chooses for `len(x)` values."""
    by_rows = len(x) >= _BY_ROWS_FROM
    for m in _column_chunks(_grid(), len(x)):
        if by_rows:
            yield 1, x[None, :], lam[None, :], m[:, None]
        else:
            yield 0, x[:, None], lam[:, None], m[None, :]


def _beta_binomial_cs(x: np.ndarray, alpha: float) -> tuple[float, float]:
    """Running intersection of the beta-binomial mixture CS on [0, 1] data: m is rejected once
    B(a + k_t, a + t - k_t) / B(a, a) / (m^k_t (1 - m)^(t - k_t)) >= 1/alpha for some t."""
    return _outward(_grid(), _beta_binomial_rejected(x, alpha))


def _beta_binomial_rejected(x: np.ndarray, alpha: float) -> np.ndarray:
    """The grid points _beta_binomial_cs rejects (GRID,)."""
    t = np.arange(1, len(x) + 1)[:, None]
    k = np.cumsum(x)[:, None]
    log_mix = special.betaln(PRIOR + k, PRIOR + t - k) - special.betaln(PRIOR, PRIOR)
    rejected = []
    for m in _column_chunks(np.clip(_grid(), _EPS, 1 - _EPS), len(x)):
        log_null = k * np.log(m)[None, :] + (t - k) * np.log1p(-m)[None, :]
        rejected.append((log_mix - log_null).max(axis=0) >= math.log(1 / alpha))
    return np.concatenate(rejected)


def quantile_interval(
    values, q: float, *, level: float = DEFAULT_LEVEL, lower: float = 0.0, upper: float = 1.0
) -> Interval:
    """Distribution-free interval of the q-quantile of values in [lower, upper] (the sample
    quantile, numpy's linear rule, as the estimate): [X_(l), X_(u)] with l the largest and u
    the smallest order such that P(Bin(n, q) >= l) and P(Bin(n, q) <= u - 1) are >= 1 - alpha/2
    (valid for any distribution, ties included); X_(0) = lower and X_(n+1) = upper, so a small
    n keeps a valid interval whose end is the range's bound. Method `order-statistic`."""
    level = check_level(level)
    x = np.sort(_clean(values, lower, upper) * (upper - lower) + lower)
    n = len(x)
    if n == 0:
        return none_interval(math.nan, 0, "n = 0")
    tail = (1 - level) / 2
    orders = np.arange(n + 2)  # P(Bin >= l) for l = 0..n+1; P(Bin <= u - 1) for u = 0..n+1
    at_least = stats.binom.sf(orders - 1, n, q)
    at_most = stats.binom.cdf(orders - 1, n, q)
    padded = np.concatenate([[lower], x, [upper]])
    low = padded[np.nonzero(at_least >= 1 - tail)[0].max()]
    high = padded[np.nonzero(at_most >= 1 - tail)[0].min()]
    return Interval(float(np.quantile(x, q)), float(low), float(high), n, "order-statistic")


def correlation_interval(
    r: float, n: int, *, kind: Literal["pearson", "spearman"], level: float = DEFAULT_LEVEL
) -> Interval:
    """Fisher-z interval of a correlation over n units: tanh(atanh(r) +- z / sqrt(n - 3))
    for Pearson (exact under bivariate normality as n grows, the usual small-n choice), with
    Bonett & Wright's variance (1 + r^2 / 2) / (n - 3) for Spearman (Psychometrika 2000).
    A Spearman rho of +-1 (reached with positive probability at small n) is centred at the
    nearest other attainable value, 1 - 12 / (n (n^2 - 1)) (one adjacent swap), so the
    interval is not the degenerate [1, 1]. n < 4 or a NaN r: no interval (NaN ends, a method
    that says why)."""
    level = check_level(level)
    if n < 4 or not math.isfinite(r):
        return none_interval(r, n, "n < 4" if n < 4 else "no correlation")
    var = (1 + r * r / 2) / (n - 3) if kind == "spearman" else 1 / (n - 3)
    z = stats.norm.ppf((1 + level) / 2) * math.sqrt(var)
    cap = 1 - 12 / (n * (n * n - 1)) if kind == "spearman" else 1 - 1e-12
    centre = math.atanh(max(min(r, cap), -cap))
    method = "fisher-z (bonett-wright)" if kind == "spearman" else "fisher-z"
    low = -1.0 if r <= -cap else math.tanh(centre - z)  # an observed +-1 keeps its own end
    high = 1.0 if r >= cap else math.tanh(centre + z)
    return Interval(float(r), low, high, int(n), method)


def verdict(
    interval: Interval, bound: float, side: Literal["min", "max"]
) -> Literal["pass", "fail", "undecided"]:
    """pass when the interval clears the bound (`min`: low >= bound, `max`: high <= bound),
    fail when it lies wholly on the wrong side, undecided when it straddles it (or is NaN)."""
    if side not in ("min", "max"):
        raise ValueError(f"side must be 'min' or 'max', got {side!r}")
    low, high = interval.low, interval.high
    if math.isnan(low) or math.isnan(high):
        return "undecided"
    if side == "min":
        return "pass" if low >= bound else "fail" if high < bound else "undecided"
    return "pass" if high <= bound else "fail" if low > bound else "undecided"
