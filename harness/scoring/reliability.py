"""Ability and reliability of one condition from its per-sample adherence (docs/architecture.md,
"Adherence": pass^r, aptitude, unreliability).

- pass^r: the probability that r independent repeats all pass, where a sample passes when every
  decided position of it in the fixed t-range passes (its per-sample AUC is 1: every scored
  window passes). With pass probability p it is p^r; estimate p_hat^r, interval [L^r, U^r] of
  the exact binomial interval [L, U] of p (a monotone map keeps the coverage exactly; anytime:
  the beta-binomial confidence sequence's ends). Only for r <= n: fewer samples than r repeats
  "cannot tell" (NaN, the method says why).
- aptitude and unreliability as "LLMs Get Lost in Multi-Turn Conversation" (Laban et al., 2025,
  arXiv 2505.06120) defines them over the per-sample scores: aptitude = the 90th percentile,
  unreliability = the 90th minus the 10th percentile. Intervals: distribution-free
  order-statistic intervals of each percentile (`harness.stats.quantile_interval`), the
  difference's from both at level 1 - alpha/2 (Bonferroni). An interval that spans the whole
  range [0, 1] says nothing: "cannot tell" (NaN ends) instead. Quantile intervals are fixed-n:
  a sequential run (anytime) gets "cannot tell" for both.
"""

from __future__ import annotations

import math

import numpy as np

from harness.stats import (
    Interval,
    binomial_interval,
    mean_interval,
    none_interval,
    quantile_interval,
)

PASS_REPEATS = (1, 3, 5)  # pass^r columns pass_1, pass_3, pass_5
APTITUDE_Q, FLOOR_Q = 0.9, 0.1


def pass_rate_interval(passes, *, level: float, anytime: bool = False) -> Interval:
    """The interval of p from per-sample pass indicators (1/0, NaN dropped): exact binomial
    (the beta quantiles of `binomial_interval`, as `mean_interval` on 0/1 data), or the
    beta-binomial confidence sequence when anytime."""
    x = np.asarray(passes, dtype=float)
    x = x[~np.isnan(x)]
    if anytime or len(x) == 0:
        return mean_interval(x, level=level, anytime=anytime, value_type="binary")
    low, high = binomial_interval(np.array(x.sum()), np.array(len(x)), level=level)
    return Interval(float(x.mean()), float(low), float(high), len(x), "clopper-pearson")


def pass_power_interval(passes, r: int, *, level: float, anytime: bool = False) -> Interval:
    """pass^r of per-sample pass indicators (1/0, NaN dropped)."""
    return pass_power(pass_rate_interval(passes, level=level, anytime=anytime), r)


# C(c, r) / C(n, r) is unbiased at a fixed n only: where the run stopped because its gates
# decided, n depends on the passes seen. Exact over the shipped design's paths (looks x1.3 from
# 4 to 157, a gate at 0.8 on the same 0/1 passes; docs/performance.md, "pass^r in sequential
# runs"), its relative bias for r = 3 runs from -48 % (p = 0.3) through -30 % (0.6) and 0 (0.8)
# to +8 % (0.9); the interval's ends are the confidence sequence's and keep their coverage
SEQUENTIAL_BIAS = (
    "biased by the sequential stop (r = 3, shipped design, gate 0.8: -48 % to +8 % of p^r "
    "over p in [0.3, 0.95]); the interval is not"
)


def pass_power(rate: Interval, r: int) -> Interval:
    """pass^r from the interval of the pass rate p (the mean of n 0/1 samples): the interval
    p^r on both ends (monotone), the estimate C(c, r) / C(n, r) of c passes, unbiased at a fixed
    n (p^r of the observed rate is biased up: +75 % at n = 4, p = 0.5, r = 3); in a sequential
    run its method states the stop's bias (SEQUENTIAL_BIAS). The estimate can sit below
    low^r at small n (C(2, 3) = 0); the interval's low end then moves down to it."""
    if rate.n < r:
        return none_interval(math.nan, rate.n, f"cannot tell: n = {rate.n} < r = {r} repeats")
    passes = round(rate.estimate * rate.n)
    estimate = math.comb(passes, r) / math.comb(rate.n, r)
    method = f"{rate.method} of p, to the power {r}; estimate C(c, r) / C(n, r)"
    if rate.method.endswith("-cs"):  # a sequential run: n itself depends on the passes seen
        method += f"; {SEQUENTIAL_BIAS}"
    return Interval(estimate, min(rate.low**r, estimate), rate.high**r, rate.n, method)


def _informative(ci: Interval, span: tuple[float, float], what: str) -> Interval:
    """The interval, its method saying `cannot tell` where it spans the whole range. It keeps
    its ends (the range): dropping them left only the narrow intervals, whose coverage alone
    fell to 3 of 9 where a quantile sits on a jump of a discrete distribution (unreliability,
    sticky samples, n = 64, p = 0.9: bench/coverage.py), while the intervals written, the wide
    included, cover at their level."""
    if ci.low <= span[0] and ci.high >= span[1]:
        why = f"cannot tell at n = {ci.n}: {what} spans [0, 1]"
        return Interval(ci.estimate, span[0], span[1], ci.n, f"{ci.method}; {why}")
    return ci


def aptitude_interval(scores, *, level: float, anytime: bool = False) -> Interval:
    """The 90th percentile of per-sample adherence in [0, 1]."""
    n = int(np.isfinite(np.asarray(scores, dtype=float)).sum())
    if anytime:
        return none_interval(math.nan, n, "cannot tell: quantile intervals are fixed-n")
    ci = quantile_interval(scores, APTITUDE_Q, level=level)
    return _informative(ci, (0.0, 1.0), "the interval") if n else ci


def unreliability_interval(scores, *, level: float, anytime: bool = False) -> Interval:
    """90th minus 10th percentile of per-sample adherence in [0, 1]."""
    n = int(np.isfinite(np.asarray(scores, dtype=float)).sum())
    if anytime:
        return none_interval(math.nan, n, "cannot tell: quantile intervals are fixed-n")
    if n == 0:
        return none_interval(math.nan, 0, "n = 0")
    each = 1 - (1 - level) / 2  # both percentiles hold at once
    top = quantile_interval(scores, APTITUDE_Q, level=each)
    floor = quantile_interval(scores, FLOOR_Q, level=each)
    ci = Interval(
        top.estimate - floor.estimate,
        max(0.0, top.low - floor.high),
        top.high - floor.low,
        n,
        "difference of order-statistic intervals (bonferroni over 2)",
    )
    return _informative(ci, (0.0, 1.0), "the interval")


def reliability_fields(scores, *, level: float, anytime: bool = False) -> dict:
    """The pass_<r>, aptitude and unreliability columns (each with _low, _high, _n, _method) of
    one condition from its per-sample AUCs (NaN: a sample with no decided position)."""
    scores = np.asarray(scores, dtype=float)
    passes = np.where(np.isnan(scores), np.nan, (scores >= 1.0).astype(float))
    fields: dict = {}
    rate = pass_rate_interval(passes, level=level, anytime=anytime)
    for r in PASS_REPEATS:
        fields.update(pass_power(rate, r).row(f"pass_{r}"))
    fields.update(aptitude_interval(scores, level=level, anytime=anytime).row("aptitude"))
    fields.update(unreliability_interval(scores, level=level, anytime=anytime).row("unreliability"))
    return fields
