"""One-sided bounds for gates, and how many samples would decide one (docs/architecture.md,
"Gates"; the two-sided intervals are `harness.stats`).

A gate asks a one-sided question (is the rate above the bound?), so each of its bounds is tested
one-sided at the gate's full level: `lcb` (a lower confidence bound: the mean is at least lcb
with probability >= level) for `min`, `ucb` for `max`. Each bound errs with probability at most
1 - level, whichever side the truth lies on, where one side of a two-sided interval spends
only half of that (its other half goes to the side the gate does not ask about). The method is
the interval's own, one-sided:

- fixed n, 0/1 values: Clopper-Pearson's one-sided bounds (the Beta quantiles at alpha and
  1 - alpha instead of alpha/2, 1 - alpha/2);
- fixed n, other values: the betting test's one capital process on the side asked (K+ for lcb,
  no hedge), bets tuned for the fixed n at log(1/alpha);
- anytime, value type "binary" (`beta-binomial-cs`): the one-sided beta-binomial mixture
  e-process at the full alpha. For H0: mean <= m it mixes the likelihood ratio
  (q/m)^x ((1-q)/(1-m))^(1-x) over q in (m, 1] only (the Jeffreys prior restricted there,
  renormalised): each such ratio has mean <= 1 under any [0, 1] law with mean <= m, so the
  mixture is a test supermartingale, and Ville's inequality makes
  {m : max_t E_t(m) < 1/alpha} a lower confidence sequence, valid at every look. Restricting
  the prior to the alternative the gate asks about is what makes it tighter than one side of
  the two-sided sequence (whose prior puts mass on both sides).
- anytime, value type "fraction" (`beta-binomial-cs+betting-cs`, per-sample AUC and final):
  that e-process and the betting capital K+ (no hedge, bets of the anytime tuning,
  sqrt(2 log(1/alpha) / (sigma^2 t log(1 + t)))) each at alpha/2; the bound is the tighter of
  the two (both hold at once with probability >= 1 - alpha). The betting part adapts to the
  variance of fractional values, which the beta-binomial part treats as 0/1.

Bounds are taken as running extremes (lcb the running max of the lower bounds, ucb the running
min), so they must come in sampling order; lcb > ucb (the data contradict every mean) gives no
bounds (NaN).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import special, stats

from harness.stats import (
    BINARY_CS,
    FRACTION_CS,
    PRIOR,
    TRUNCATION,
    ValueType,
    _clean,
    _column_chunks,
    _grid,
    _is_binary,
    betting_slices,
    check_binary,
    check_level,
)

Side = Literal["min", "max"]


@dataclass(frozen=True)
class Bounds:
    """One-sided bounds, each at `level`; NaN where none could be formed."""

    lcb: float
    ucb: float
    n: int
    method: str  # the interval's method, tested one-sided
    level: float


def log_evalue_above(k, t, m, prior: float = PRIOR) -> np.ndarray:
    """log E_t(m) of the one-sided beta-binomial mixture against H0: mean <= m, after t values
    summing to k (k may be fractional: values in [0, 1]). Broadcasts over k, t and m."""
    k, t, m = np.asarray(k, float), np.asarray(t, float), np.asarray(m, float)
    m = np.clip(m, 1e-12, 1 - 1e-12)
    with np.errstate(divide="ignore"):
        mixed = special.betaln(prior + k, prior + t - k) - special.betaln(prior, prior)
        tail = np.log(special.betaincc(prior + k, prior + t - k, m))
        norm = np.log(special.betaincc(prior, prior, m))
    return mixed + tail - norm - k * np.log(m) - (t - k) * np.log1p(-m)


def _rejected_below(rejected: np.ndarray) -> float:
    """The lower bound: the last rejected grid point before the first kept one (the set
    between two grid points is unknown, so the end moves out); NaN when none is kept."""
    kept = np.nonzero(~rejected)[0]
    return math.nan if len(kept) == 0 else float(_grid()[max(kept[0] - 1, 0)])


def _ceiling(k: np.ndarray, t: np.ndarray, m: np.ndarray) -> np.ndarray:
    """A cheap upper bound on log E_t(m) (no incomplete beta): the mixture over all q divided
    by the prior mass above m, and the likelihood ratio at the best q (t KL(k/t, m)), whichever
    is less; -inf where k/t <= m (then every ratio with q > m is below 1, so E_t(m) <= 1)."""
    mean = k / t
    with np.errstate(divide="ignore", invalid="ignore"):
        null = k * np.log(m) + (t - k) * np.log1p(-m)
        mixed = special.betaln(PRIOR + k, PRIOR + t - k) - special.betaln(PRIOR, PRIOR)
        mixture = mixed - np.log(special.betaincc(PRIOR, PRIOR, m)) - null
        best = special.xlogy(k, mean) + special.xlogy(t - k, 1 - mean) - null
    return np.where(mean > m, np.minimum(mixture, best), -np.inf)


def _anytime_lcb(x: np.ndarray, alpha: float) -> float:
    """Running max over t <= n of the one-sided CS's lower bound, on the grid (outward): m is
    rejected once E_t(m) >= 1/alpha at some t. Exact on the grid, and fast: a candidate mean
    whose cheap ceiling stays below the threshold at every t is kept without the incomplete
    beta; one whose exact e-value at the ceiling's best t crosses it is rejected; only the
    rest (near the bound) are evaluated at every t."""
    threshold = math.log(1 / alpha)
    t = np.arange(1, len(x) + 1, dtype=float)[:, None]
    k = np.cumsum(x)[:, None]
    m = np.clip(_grid(), 1e-12, 1 - 1e-12)
    rejected = np.zeros(len(m), dtype=bool)
    for start, chunk in _chunks(m, len(x)):
        ceiling = _ceiling(k, t, chunk[None, :])
        open_ = np.nonzero(ceiling.max(axis=0) >= threshold)[0]
        best = ceiling[:, open_].argmax(axis=0)
        first = log_evalue_above(k[best, 0], t[best, 0], chunk[open_]) >= threshold
        rest = open_[~first]
        if len(rest):
            exact = log_evalue_above(k, t, chunk[None, rest]).max(axis=0) >= threshold
            rejected[start + rest[exact]] = True
        rejected[start + open_[first]] = True
    return _rejected_below(rejected)


def _chunks(m: np.ndarray, n: int):
    """(offset, slice) of the candidate means, a slice at a time (harness.stats._CELLS)."""
    offset = 0
    for chunk in _column_chunks(m, n):
        yield offset, chunk
        offset += len(chunk)


def _betting_lcb(x: np.ndarray, alpha: float, anytime: bool = False) -> float:
    """One-sided betting bound: m is rejected once K+_t(m) >= 1/alpha for some t (the betting
    interval's K+ alone, its bets tuned at log(1/alpha) for the fixed n, or for every t when
    anytime, as the two-sided sequence's bets, eq. 26)."""
    n = len(x)
    t = np.arange(1, n + 1)
    mu = (0.5 + np.cumsum(x)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)
    prev = np.concatenate([[0.25], sigma2[:-1]])  # sigma_hat^2_{t-1}: predictable
    scale = t * np.log1p(t) if anytime else np.full(n, float(n))
    lam = np.sqrt(2 * math.log(1 / alpha) / (prev * scale))
    rejected = []
    # as the two-sided test (`harness.stats._betting_rejected`): its layout, the bets turned
    # into the log capital in place, the same operations on the same operands
    for axis, xs, bets, m in betting_slices(x, lam):
        with np.errstate(divide="ignore"):
            capital = np.minimum(bets, TRUNCATION / m)  # the bets, then the log capital
        capital *= xs - m
        np.log1p(capital, out=capital)
        np.cumsum(capital, axis=axis, out=capital)
        rejected.append(capital.max(axis=axis) >= math.log(1 / alpha))
    return _rejected_below(np.concatenate(rejected))


def _lcb(x: np.ndarray, alpha: float, anytime: bool, binary: bool, value_type: str) -> float:
    if anytime and value_type == "binary":
        return _anytime_lcb(x, alpha)
    if anytime:  # both at alpha/2; NaN (every mean rejected) in either: no bound
        return max(_anytime_lcb(x, alpha / 2), _betting_lcb(x, alpha / 2, anytime=True))
    if binary:
        k = int(x.sum())
        return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, len(x) - k + 1))
    return _betting_lcb(x, alpha)


def one_sided_bounds(
    values: Sequence[float] | np.ndarray,
    *,
    level: float,
    lower: float = 0.0,
    upper: float = 1.0,
    anytime: bool = False,
    value_type: ValueType = "fraction",
) -> Bounds:
    """lcb and ucb of the mean of values in [lower, upper], each one-sided at `level`;
    `value_type` (the metric's, declared before the data) fixes the anytime method."""
    alpha = 1 - check_level(level)
    x = _clean(values, lower, upper)
    n = len(x)
    if n == 0:
        return Bounds(math.nan, math.nan, 0, "none (n = 0)", level)
    binary = _is_binary(x)
    if anytime:
        check_binary(x, value_type)
        method = BINARY_CS if value_type == "binary" else FRACTION_CS
    else:
        method = "clopper-pearson" if binary else "betting"
    lcb = _lcb(x, alpha, anytime, binary, value_type)
    ucb = 1.0 - _lcb(1.0 - x, alpha, anytime, binary, value_type)
    if not lcb <= ucb:  # NaN, or the running bounds crossed
        return Bounds(math.nan, math.nan, n, "none (empty running intersection)", level)
    span = upper - lower
    return Bounds(lower + span * lcb, lower + span * ucb, n, method, level)


def _decides(mean: float, n: np.ndarray, bound: float, alpha: float):
    """Whether n values of this mean (0/1-like: the variance a mean in [0, 1] can have at most)
    put the fixed-n one-sided bound on the mean's side of `bound`, elementwise in n."""
    above = mean > bound  # the bound that can decide: lcb >= bound if above, else ucb < bound
    k = mean * n if above else (1 - mean) * n  # mirror: ucb < b is lcb of 1 - x > 1 - b
    b = bound if above else 1 - bound
    with np.errstate(invalid="ignore"):
        lcb = np.where(k > 0, stats.beta.ppf(alpha, np.maximum(k, 1e-12), n - k + 1), 0.0)
    return lcb >= b if above else lcb > b


@functools.lru_cache(maxsize=64)
def _least_passes(bound: float, alpha: float, max_n: int) -> np.ndarray:
    """Per t = 1..max_n, the least (real) pass count k at which E_t(bound) >= 1/alpha (inf
    where even k = t does not reach it): bisection on k, log E_t increasing in k (every ratio
    (q/m)^k ((1-q)/(1-m))^(t-k) with q > m grows with k). Read-only (cached)."""
    threshold, t = math.log(1 / alpha), np.arange(1, max_n + 1, dtype=float)
    low, high = np.zeros_like(t), t.copy()
    for _ in range(40):  # to t / 2^40
        mid = (low + high) / 2
        up = log_evalue_above(mid, t, bound) >= threshold
        low, high = np.where(up, low, mid), np.where(up, mid, high)
    least = np.where(log_evalue_above(t, t, bound) >= threshold, high, np.inf)
    least.setflags(write=False)
    return least


def _median_decision(p: float, n: int, b: float, alpha: float, max_n: int) -> int | None:
    """The smallest N > n by which the one-sided sequence, looked at after every sample,
    decides (either way) with probability >= 1/2, the n values seen summing to p n and each
    later one 0/1 with mean p: exact, the law of the new passes carried forward one sample at a
    time with the decided paths taken out. (Holding the mean instead gives the n at which the
    mean path decides, later than most paths do: a walk that runs ahead crosses first.)"""
    pass_at = _least_passes(b, alpha, max_n)  # lcb >= b: the passes reach it
    fail_at = _least_passes(1 - b, alpha, max_n)  # ucb < b: the fails reach it
    mass, decided = np.ones(1), 0.0  # mass[j]: undecided with j passes among the new values
    for t in range(n + 1, max_n + 1):
        mass = np.append(mass * (1 - p), 0.0) + np.append(0.0, mass * p)
        j = np.arange(t - n + 1)
        done = (p * n + j >= pass_at[t - 1]) | ((1 - p) * n + (t - n - j) >= fail_at[t - 1])
        decided += mass[done].sum()
        mass[done] = 0.0
        if decided >= 0.5:
            return t
    return None


def samples_to_decide(
    mean: float,
    n: int,
    *,
    bound: float,
    level: float,
    lower: float = 0.0,
    upper: float = 1.0,
    anytime: bool = False,
    intersected: bool = False,
    max_n: int = 1024,
) -> int | None:
    """About how many samples would decide a one-sided bound now undecided at n: the smallest
    N > n at which the same bound (same method, same level) on N values with the observed mean
    would lie on the mean's side of `bound` (fixed n), or by which the sequence looked at after
    every sample decides with probability >= 1/2 (anytime: the median decision n of paths
    continuing at that mean, see _median_decision). Order-neutral: only the mean and N enter, never
    the order the n values came in (a running intersection made from a guessed order can
    reject the mean itself), and always more than n (the check is undecided at n). The values
    are taken as 0/1-like, the most variance a mean in [0, 1] allows, so for fractional values
    it errs towards more samples. `intersected`: the bounds are the fraction type's
    (beta-binomial-cs+betting-cs), whose beta-binomial part runs at alpha/2. None: the mean on
    the bound (no N decides it), or no N <= max_n does. bench/samples_needed.py checks it
    against simulated decisions."""
    alpha = (1 - check_level(level)) / (2 if anytime and intersected else 1)
    p = (mean - lower) / (upper - lower)
    b = (bound - lower) / (upper - lower)
    if not math.isfinite(p) or math.isclose(p, b, abs_tol=1e-12) or max_n <= n:
        return None
    p = min(max(p, 0.0), 1.0)
    if anytime:
        return _median_decision(p, n, b, alpha, max_n)
    grid = np.arange(n + 1, max_n + 1, dtype=float)
    hit = np.nonzero(_decides(p, grid, b, alpha))[0]
    return int(grid[hit[0]]) if len(hit) else None
