"""alpha <-> behaviour across conditions -> correlation.csv.

For each (x, y) column pair of summary.csv, over the conditions where both are finite:
Spearman and Pearson coefficients. The conditions are not independent units: the conditions of
one item share its text and checks, and sample k of every policy shares its seed. The
independent unit is the item, so the intervals resample whole items (percentile bootstrap over
items, `unit_intervals`; below 4 items no interval, the method says so) and the permutation
p-value of Spearman's rho moves whole items' blocks of y against x (`block_permutation_p`:
exact over all k! orders when k! <= n_perm, so with 3 items p >= 1/6; NaN when the items have
unequal numbers of conditions). Fewer than 3 conditions or a constant x or y gives a NaN row,
never an error. Censored half-lives are NaN in summary.csv and so drop out of the half_life
rows (the most persistent conditions: read those with care).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from harness.results import CorrelationRow, result_frame
from harness.stats import (
    DEFAULT_DRAWS,
    DEFAULT_LEVEL,
    Interval,
    correlation_interval,
    none_interval,
)
from harness.stats.adjust import holm
from harness.stats.bootstrap import bootstrap_interval, resample_indices

COLUMNS = CorrelationRow.columns()
Y_DEFAULT = ("auc", "final", "half_life")
MIN_N = 3
MIN_UNITS = 4  # independent units (items, records) below which no interval is formed
# Resamples per vectorised call: bounds memory at a few (BATCH, n) arrays.
BATCH = 4096


def spearman_pearson(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """[Spearman rho, Pearson r] along `axis`; NaN where x or y is constant there.

    Vectorised: x, y of shape (..., n) give shape (2, ...). Ties (repeated conditions in a
    bootstrap resample) get average ranks.
    """
    with warnings.catch_warnings():
        # A constant resample has no correlation: NaN, dropped from the CI, is the answer.
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        r = stats.pearsonr(x, y, axis=axis).statistic
        ranks_x, ranks_y = stats.rankdata(x, axis=axis), stats.rankdata(y, axis=axis)
        rho = stats.pearsonr(ranks_x, ranks_y, axis=axis).statistic
    return np.stack([rho, r])


def _nan_row(x: str, y: str, n: int, why: str) -> dict:
    row = {"x": x, "y": y, "n": n, **{c: math.nan for c in COLUMNS[3:]}}
    return row | {"spearman_method": f"none ({why})", "pearson_method": f"none ({why})"}


def _permutation_p(x, y, n_perm: int, rng) -> float:
    """y re-paired against a fixed x; |rho| as the statistic makes the test two-sided.

    Only y is permuted (one sample of type "pairings"), so scipy enumerates all n! pairings
    exactly when n! <= n_perm instead of the (n!)^2 of permuting both.
    """

    def abs_rho(y_perm, axis=-1):
        return np.abs(spearman_pearson(np.broadcast_to(x, y_perm.shape), y_perm, axis=axis)[0])

    result = stats.permutation_test(
        (y,), abs_rho, permutation_type="pairings", vectorized=True, n_resamples=n_perm,
        alternative="greater", batch=BATCH, rng=rng,
    )  # fmt: skip
    return float(result.pvalue)


def correlate(
    x: np.ndarray,
    y: np.ndarray,
    *,
    n_perm: int = 10_000,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    names: tuple[str, str] = ("x", "y"),
    units: np.ndarray | None = None,
    unit: str = "items",
) -> dict:
    """One correlation.csv row for paired values (non-finite pairs dropped). `units`: the
    independent unit of each point (its item): intervals resample whole units and the
    permutation moves whole units (`unit_intervals`, `block_permutation_p`); None: the points
    are independent (Fisher-z, permutation of points)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = len(x)
    if n < MIN_N:
        return _nan_row(*names, n, f"n < {MIN_N}")
    spearman, pearson = (float(v) for v in spearman_pearson(x, y))
    if math.isnan(pearson) or math.isnan(spearman):  # constant x or y
        return _nan_row(*names, n, "constant values")
    rng = np.random.default_rng(seed)
    if units is not None:
        units = np.asarray(units)[keep]
        rho, r = unit_intervals(x, y, units, unit, level=level, seed=seed)
        p = block_permutation_p(x, y, units, n_perm, rng)
    else:
        rho = correlation_interval(spearman, n, kind="spearman", level=level)
        r = correlation_interval(pearson, n, kind="pearson", level=level)
        p = _permutation_p(x, y, n_perm, rng)
    return {
        "x": names[0], "y": names[1], "n": n, **rho.row("spearman"), **r.row("pearson"),
        "perm_p": p,
    }  # fmt: skip


def unit_intervals(
    x: np.ndarray,
    y: np.ndarray,
    units: np.ndarray,
    unit: str,
    *,
    level: float,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> tuple[Interval, Interval]:
    """Spearman and Pearson over the points (x, y) with percentile intervals that resample
    whole units (every point of a drawn unit comes along: points of one item, or of one
    record, are not independent). Fewer than MIN_UNITS units: no interval, the method says so.
    The point estimates are over all points; a resample whose x or y is constant drops out."""
    labels, inverse = np.unique(np.asarray(units).astype(str), return_inverse=True)
    rho, r = (float(v) for v in spearman_pearson(x, y))
    k = len(labels)
    if k < MIN_UNITS:
        why = f"{k} {unit} < {MIN_UNITS}: the points are not independent"
        return none_interval(rho, k, why), none_interval(r, k, why)
    rng = np.random.default_rng(seed)
    counts = np.zeros((draws, k))  # times each unit is drawn: the points' frequency weights
    np.add.at(counts, (np.arange(draws)[:, None], resample_indices(k, draws, rng)), 1.0)
    weights = counts[:, inverse]  # (draws, points)
    boot = np.stack([
        _weighted_pearson(_weighted_ranks(x, weights), _weighted_ranks(y, weights), weights),
        _weighted_pearson(np.broadcast_to(x, weights.shape), np.broadcast_to(y, weights.shape),
                          weights),
    ], axis=1)  # fmt: skip
    method = f"percentile-bootstrap over {k} {unit} (approximate)"
    return tuple(  # type: ignore[return-value]
        bootstrap_interval(est, boot[:, j], n=k, level=level, method=method, min_finite=draws // 2)
        for j, est in enumerate((rho, r))
    )


def _weighted_ranks(v: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(draws, points): each point's average rank within the resample where point i appears
    weights[d, i] times (ties, duplicates included, share their mean rank)."""
    values, group = np.unique(v, return_inverse=True)
    per_value = np.zeros((len(weights), len(values)))
    np.add.at(per_value.T, group, weights.T)  # resampled count of each distinct value
    below = np.cumsum(per_value, axis=1) - per_value
    return (below + (per_value + 1) / 2)[:, group]


def _weighted_pearson(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson r per row of frequency-weighted points; NaN where a or b is constant."""
    total = w.sum(axis=1, keepdims=True)
    da = a - (w * a).sum(axis=1, keepdims=True) / total
    db = b - (w * b).sum(axis=1, keepdims=True) / total
    cov, va, vb = ((w * da * db).sum(1), (w * da * da).sum(1), (w * db * db).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.sqrt(va * vb)
    return np.where((va > 1e-12) & (vb > 1e-12), r, np.nan)


def block_permutation_p(x, y, units, n_perm: int, rng) -> float:
    """Two-sided p of Spearman's |rho| permuting whole units' blocks of y against x (units of
    equal size, points in their given order within a unit): exact over all k! orders when
    k! <= n_perm, else (1 + hits) / (1 + n_perm). NaN for unequal units or fewer than 3."""
    labels, inverse = np.unique(np.asarray(units).astype(str), return_inverse=True)
    blocks = [np.nonzero(inverse == i)[0] for i in range(len(labels))]
    if len(blocks) < MIN_N or len({len(b) for b in blocks}) != 1:
        return math.nan
    order = np.concatenate(blocks)
    xs, yb = x[order], np.stack([y[b] for b in blocks])  # (k, m)
    observed = abs(spearman_pearson(xs, yb.ravel())[0])
    k = len(blocks)
    if math.factorial(k) <= n_perm:
        perms = np.array(list(itertools.permutations(range(k))))
    else:
        perms = np.stack([rng.permutation(k) for _ in range(n_perm)])
    stat = np.abs(spearman_pearson(np.broadcast_to(xs, (len(perms), xs.size)),
                                   yb[perms].reshape(len(perms), -1))[0])  # fmt: skip
    hits = int(np.sum(stat >= observed - 1e-12))
    exact = math.factorial(k) <= n_perm
    return hits / len(perms) if exact else (1 + hits) / (1 + n_perm)


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
    n_perm: int = 10_000,
    level: float = DEFAULT_LEVEL,
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
            rows.append(_nan_row(xn, yn, 0, "no such column"))
            continue
        x = pd.to_numeric(summary[xn], errors="coerce").to_numpy(dtype=np.float64)
        y = pd.to_numeric(summary[yn], errors="coerce").to_numpy(dtype=np.float64)
        units = summary["item"].astype(str).to_numpy()  # conditions of one item share it
        rows.append(
            correlate(x, y, n_perm=n_perm, level=level, seed=seed + i, names=(xn, yn), units=units)
        )
    frame = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "perm_p_holm"])
    # many (x, y) pairs are tested at once: each p-value adjusted over all of them
    frame["perm_p_holm"] = holm(frame["perm_p"].to_numpy(dtype=np.float64))
    return result_frame(CorrelationRow, frame)
