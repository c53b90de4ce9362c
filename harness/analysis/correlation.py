"""alpha <-> behaviour across conditions -> correlation.csv.

For each (x, y) column pair of summary.csv, over the conditions where both are finite:
Spearman and Pearson coefficients with Fisher-z intervals over the n conditions
(`harness.stats.correlation_interval`: Bonett-Wright's variance for Spearman; NaN with a
method saying so below 4 conditions) and a two-sided permutation p-value of
Spearman's rho (`scipy.stats.permutation_test`, y re-paired against x; the statistic is |rho|,
so p = (1 + #{|rho_perm| >= |rho|}) / (1 + n_perm), never 0, or the exact p over all n!
pairings when n! <= n_perm). Fewer than 3 conditions or a constant x or y gives a NaN row,
never an error. Censored half-lives are NaN in summary.csv and so drop out of the half_life
rows (the most persistent conditions: read those with care).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from harness.results import CorrelationRow, result_frame
from harness.stats import DEFAULT_LEVEL, correlation_interval

COLUMNS = CorrelationRow.columns()
Y_DEFAULT = ("auc", "final", "half_life")
MIN_N = 3
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
) -> dict:
    """One correlation.csv row for paired values (non-finite pairs dropped)."""
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
    rho = correlation_interval(spearman, n, kind="spearman", level=level)
    r = correlation_interval(pearson, n, kind="pearson", level=level)
    return {
        "x": names[0], "y": names[1], "n": n, **rho.row("spearman"), **r.row("pearson"),
        "perm_p": _permutation_p(x, y, n_perm, rng),
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
        rows.append(correlate(x, y, n_perm=n_perm, level=level, seed=seed + i, names=(xn, yn)))
    return result_frame(CorrelationRow, pd.DataFrame(rows, columns=COLUMNS))
