"""Intervals by resampling units with replacement: the one resampling scheme
(`resample_indices`), a statistic over its draws (`bootstrap_statistic`) and their percentile
interval (`bootstrap_interval`), for what the harness still bootstraps (fits, correlations,
calibration, reliability); the bounded-mean intervals are `harness.stats`'."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.stats import DEFAULT_DRAWS, DEFAULT_LEVEL, Interval, check_level, none_interval


def bootstrap_interval(
    estimate: float,
    draws: np.ndarray,
    *,
    n: int,
    level: float = DEFAULT_LEVEL,
    method: str = "percentile-bootstrap",
    min_finite: int = 1,
    discrete: bool = False,
) -> Interval:
    """Percentile interval of bootstrap draws of a statistic (the one implementation for what
    the harness still resamples). Non-finite draws are left out; fewer than `min_finite`
    finite draws give NaN ends. `discrete`: the ends are drawn values (lower/higher order
    statistics), for statistics on a grid whose draws may be inf."""
    level = check_level(level)
    d = np.asarray(draws, dtype=float).ravel()
    good = d[~np.isnan(d)] if discrete else d[np.isfinite(d)]
    if len(good) < max(min_finite, 1):
        return none_interval(estimate, n, f"{len(good)} usable draws")
    tail = 50.0 * (1 - level)
    if discrete:
        low = np.percentile(good, tail, method="lower")
        high = np.percentile(good, 100 - tail, method="higher")
    else:
        low, high = np.percentile(good, [tail, 100 - tail])
    return Interval(float(estimate), float(low), float(high), int(n), method)


def resample_indices(n: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """(draws, n) indices of units drawn with replacement: the one resampling scheme."""
    return rng.integers(0, n, size=(draws, n))


def bootstrap_statistic(
    units: int,
    statistic: Callable[[np.ndarray], float],
    *,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> np.ndarray:
    """`statistic(indices)` over `draws` resamples of `units` units -> (draws,) values."""
    rng = np.random.default_rng(seed)
    return np.array([statistic(idx) for idx in resample_indices(units, draws, rng)])
