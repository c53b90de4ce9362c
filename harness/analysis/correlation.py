"""alpha <-> behaviour across conditions -> correlation.csv.

For each (x, y) column pair of summary.csv, over the conditions where both are finite:
Spearman and Pearson coefficients with percentile-bootstrap CIs (conditions resampled with
replacement) and a two-sided permutation p-value of Spearman's rho (y permuted against x;
p = (1 + #{|rho_perm| >= |rho|}) / (1 + n_perm), never 0). Fewer than 3 conditions or a
constant x or y gives a NaN row, never an error. Censored half-lives are NaN in summary.csv
and so drop out of the half_life rows (the most persistent conditions: read those with care).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import rankdata

COLUMNS = [
    "x", "y", "n", "spearman", "spearman_low", "spearman_high",
    "pearson", "pearson_low", "pearson_high", "perm_p",
]  # fmt: skip
Y_DEFAULT = ("auc", "final", "half_life")
MIN_N = 3
# Bootstrap/permutation draws are processed in chunks of this many rows: (chunk, n) arrays.
CHUNK = 4096


def rowwise_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of each row pair. x, y: (B, n) -> (B,); NaN where a row is constant."""
    dx = x - x.mean(axis=-1, keepdims=True)
    dy = y - y.mean(axis=-1, keepdims=True)
    sxx = (dx * dx).sum(axis=-1)
    syy = (dy * dy).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (dx * dy).sum(axis=-1) / np.sqrt(sxx * syy)
    # Relative tolerance: a row of equal values leaves rounding noise, not variance.
    scale_x = (x * x).sum(axis=-1) + 1e-300
    scale_y = (y * y).sum(axis=-1) + 1e-300
    flat = (sxx <= 1e-24 * scale_x) | (syy <= 1e-24 * scale_y)
    return np.clip(np.where(flat, np.nan, r), -1.0, 1.0)


def _nan_row(x: str, y: str, n: int) -> dict:
    return {"x": x, "y": y, "n": n, **{c: math.nan for c in COLUMNS[3:]}}


def _bootstrap(x, y, n_boot, ci, rng) -> tuple[float, float, float, float]:
    """(spearman_low, spearman_high, pearson_low, pearson_high) from resampled conditions."""
    n = len(x)
    sp, pe = [], []
    for start in range(0, n_boot, CHUNK):
        picks = rng.integers(0, n, size=(min(CHUNK, n_boot - start), n))  # (b, n)
        xb, yb = x[picks], y[picks]
        pe.append(rowwise_pearson(xb, yb))
        # Ranks within each resample (ties from repeated conditions get average ranks).
        sp.append(rowwise_pearson(rankdata(xb, axis=1), rankdata(yb, axis=1)))
    q = [50 * (1 - ci), 50 * (1 + ci)]
    out = []
    for draws in (np.concatenate(sp), np.concatenate(pe)):
        draws = draws[np.isfinite(draws)]
        out += list(np.percentile(draws, q)) if len(draws) else [math.nan, math.nan]
    return tuple(float(v) for v in out)


def _perm_p(x, y, observed: float, n_perm: int, rng) -> float:
    rx, ry = rankdata(x), rankdata(y)
    hits = 0
    for start in range(0, n_perm, CHUNK):
        b = min(CHUNK, n_perm - start)
        perm = rng.permuted(np.broadcast_to(ry, (b, len(ry))), axis=1)  # (b, n)
        r = rowwise_pearson(np.broadcast_to(rx, perm.shape), perm)
        # Tolerance: a permutation that ties the observed |rho| up to rounding counts as a hit.
        hits += int((np.abs(r) >= abs(observed) - 1e-12).sum())
    return (1 + hits) / (1 + n_perm)


def correlate(
    x: np.ndarray,
    y: np.ndarray,
    *,
    n_boot: int = 2000,
    n_perm: int = 10_000,
    ci: float = 0.95,
    seed: int = 0,
    names: tuple[str, str] = ("x", "y"),
) -> dict:
    """One correlation.csv row for paired values (non-finite pairs dropped)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = len(x)
    if n < MIN_N:
        return _nan_row(*names, n)
    pearson = float(rowwise_pearson(x[None], y[None])[0])
    spearman = float(rowwise_pearson(rankdata(x)[None], rankdata(y)[None])[0])
    if math.isnan(pearson) or math.isnan(spearman):  # constant x or y
        return _nan_row(*names, n)
    rng = np.random.default_rng(seed)
    sp_lo, sp_hi, pe_lo, pe_hi = _bootstrap(x, y, n_boot, ci, rng)
    return {
        "x": names[0], "y": names[1], "n": n,
        "spearman": spearman, "spearman_low": sp_lo, "spearman_high": sp_hi,
        "pearson": pearson, "pearson_low": pe_lo, "pearson_high": pe_hi,
        "perm_p": _perm_p(x, y, spearman, n_perm, rng),
    }  # fmt: skip


def alpha_columns_of(summary: pd.DataFrame) -> list[str]:
    """alpha_mean and every alpha_L<k> point-estimate column of a summary frame."""
    return [
        c
        for c in summary.columns
        if (c == "alpha_mean" or c.startswith("alpha_L")) and not c.endswith(("_low", "_high"))
    ]


def correlate_alpha_behaviour(
    summary: pd.DataFrame,
    xs: Sequence[str] | None = None,
    ys: Sequence[str] = Y_DEFAULT,
    *,
    n_boot: int = 2000,
    n_perm: int = 10_000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """correlation.csv: one row per (x, y); x defaults to every alpha column of `summary`.

    Row i draws from a generator seeded with seed + i: reproducible for a given seed and
    column order.
    """
    xs = alpha_columns_of(summary) if xs is None else list(xs)
    rows = []
    for i, (xn, yn) in enumerate((xn, yn) for xn in xs for yn in ys):
        if xn not in summary.columns or yn not in summary.columns:
            rows.append(_nan_row(xn, yn, 0))
            continue
        x = pd.to_numeric(summary[xn], errors="coerce").to_numpy(dtype=np.float64)
        y = pd.to_numeric(summary[yn], errors="coerce").to_numpy(dtype=np.float64)
        rows.append(
            correlate(x, y, n_boot=n_boot, n_perm=n_perm, ci=ci, seed=seed + i, names=(xn, yn))
        )
    return pd.DataFrame(rows, columns=COLUMNS)
