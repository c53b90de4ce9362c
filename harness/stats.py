"""SHIM until branch `stats` lands: a betting interval for a bounded mean (Waudby-Smith &
Ramdas, hedged capital with predictable plug-in bets), fixed-n or anytime-valid."""

from __future__ import annotations

import math

import numpy as np

GRID = np.linspace(0.0005, 0.9995, 1000)


def _bets(x: np.ndarray, alpha: float, anytime: bool) -> np.ndarray:
    n = len(x)
    i = np.arange(1, n + 1)
    mu = (0.5 + np.cumsum(x)) / (i + 1)
    var = (0.25 + np.cumsum((x - mu) ** 2)) / (i + 1)
    prev = np.concatenate([[0.25], var[:-1]])
    scale = i * np.log1p(i) if anytime else np.full(n, float(n))
    return np.sqrt(2 * math.log(2 / alpha) / (prev * scale))


def mean_interval(values, *, level: float, lower: float, upper: float, anytime: bool = False):
    """(low, high) of the mean of values in [lower, upper], in their order (NaN with n < 2)."""
    x = (np.asarray(values, dtype=float) - lower) / (upper - lower)
    if len(x) < 2:
        return math.nan, math.nan
    alpha = 1 - level
    lam = _bets(x, alpha, anytime)[:, None]
    m = GRID[None, :]
    up = np.cumsum(np.log1p(np.minimum(lam, 0.5 / m) * (x[:, None] - m)), axis=0)
    down = np.cumsum(np.log1p(-np.minimum(lam, 0.5 / (1 - m)) * (x[:, None] - m)), axis=0)
    wealth = np.maximum(up, down) + math.log(0.5)
    if anytime:
        out = (wealth >= math.log(1 / alpha)).any(axis=0)
    else:
        out = wealth[-1] >= math.log(1 / alpha)
    inside = GRID[~out]
    if len(inside) == 0:
        inside = np.array([x.mean()])
    low, high = max(0.0, inside.min() - 0.0005), min(1.0, inside.max() + 0.0005)
    return lower + low * (upper - lower), lower + high * (upper - lower)
