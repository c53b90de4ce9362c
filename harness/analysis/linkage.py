"""alpha <-> behaviour done within items, and the prompt's trace vs its behavioural effect ->
linkage.csv.

correlation.csv correlates alpha and adherence across conditions, which mixes items: a French
item and a lowercase item differ in both for reasons of their own. Here:
- `alpha_auc_item`: per item, Spearman of each probed sample's own alpha (mean over layers
  1..L of its rel_l2 fits in fits.csv) against that sample's adherence AUC (mean window pass),
  across the item's samples of every policy;
- `alpha_auc_within`: their stratified mean over items (items with >= 3 samples and varying
  alpha and AUC), CI by bootstrap over samples within items;
- `alpha_auc_across`: correlation.csv's cross-condition coefficient, repeated beside them;
- `kl_dependence_item`: per item, Spearman of the next-token KL at the fork against the
  dependence (carried.csv) across fork positions and policies.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from harness import results
from harness.analysis.correlation import MIN_N, spearman_pearson
from harness.analysis.powerlaw import percentile_ci
from harness.results import LinkageRow, result_frame
from harness.scoring.adherence import window_passes

LINKAGE_COLUMNS = LinkageRow.columns()
RECORD = list(results.RECORD)


def sample_alpha_auc(fits: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """One row per probed sample: alpha (mean over layers 1..L) and auc."""

    if fits.empty or windows.empty:
        return pd.DataFrame(columns=[*RECORD, "alpha", "auc"])
    f = fits[(fits["metric"] == "rel_l2") & (fits["layer"] >= 1) & (fits["pair"] != "all")]
    f = f.assign(sample=f["pair"].str.rsplit("/", n=1).str[-1].astype(int))
    alpha = f.groupby(RECORD)["alpha"].mean().rename("alpha")
    passes = window_passes(windows)
    auc = passes.groupby(RECORD)["passed"].mean().rename("auc")
    both = pd.concat([alpha, auc], axis=1, join="inner").reset_index()
    return both.dropna(subset=["alpha", "auc"])


def _rho(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < MIN_N:
        return np.nan
    return float(spearman_pearson(x, y)[0])


def within_items(samples: pd.DataFrame, n_boot: int, ci: float, seed: int) -> list[dict]:
    rows, groups = [], []
    for (model, item), group in samples.groupby(["model", "item"], sort=True):
        x, y = group["alpha"].to_numpy(float), group["auc"].to_numpy(float)
        rho = _rho(x, y)
        rows.append(_link("alpha_auc_item", model, item, "alpha", "auc", len(x), 1, rho))
        if np.isfinite(rho):
            groups.append((model, x, y))
    for model in sorted({g[0] for g in groups}):
        mine = [(x, y) for m, x, y in groups if m == model]
        point = float(np.mean([_rho(x, y) for x, y in mine]))
        low, high = _stratified_ci(mine, n_boot, ci, seed)
        n = sum(len(x) for x, _ in mine)
        rows.append(
            _link("alpha_auc_within", model, "", "alpha", "auc", n, len(mine), point, low, high)
        )
    return rows


def _stratified_ci(groups, n_boot: int, ci: float, seed: int) -> tuple[float, float]:
    """Mean of within-item rhos over resamples of each item's samples (constant resamples,
    which have no rho, drop out of that resample's mean)."""
    rng = np.random.default_rng(seed)
    per_item = []
    for x, y in groups:
        idx = rng.integers(0, len(x), size=(n_boot, len(x)))
        per_item.append(spearman_pearson(x[idx], y[idx], axis=-1)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample where no item has a rho
        means = np.nanmean(np.vstack(per_item), axis=0)
    return percentile_ci(means, ci)


def kl_dependence(carried: pd.DataFrame) -> list[dict]:
    rows = []
    if carried.empty:
        return rows
    use = carried.dropna(subset=["kl", "dependence"])
    for model, item in carried[["model", "item"]].drop_duplicates().itertuples(index=False):
        points = use[(use["model"] == model) & (use["item"] == item)]
        x, y = points["kl"].to_numpy(float), points["dependence"].to_numpy(float)
        rho = _rho(x, y) if len(x) else np.nan
        rows.append(_link("kl_dependence_item", model, item, "kl", "dependence", len(x), 1, rho))
    return rows


def _link(kind, model, item, x, y, n, items, rho, low=np.nan, high=np.nan) -> dict:
    values = [kind, model, item, x, y, n, items, rho, low, high]
    return dict(zip(LINKAGE_COLUMNS, values, strict=True))


def linkage_frame(
    fits: pd.DataFrame,
    windows: pd.DataFrame,
    correlation: pd.DataFrame,
    carried: pd.DataFrame,
    *,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    rows = within_items(sample_alpha_auc(fits, windows), n_boot, ci, seed)
    across = correlation[(correlation["x"] == "alpha_mean") & (correlation["y"] == "auc")]
    for rec in across.to_dict("records") if not correlation.empty else []:
        rows.append(
            _link(
                "alpha_auc_across",
                "",
                "",
                "alpha_mean",
                "auc",
                rec["n"],
                np.nan,
                rec["spearman"],
                rec["spearman_low"],
                rec["spearman_high"],
            )  # fmt: skip
        )
    rows += kl_dependence(carried)
    return result_frame(LinkageRow, pd.DataFrame(rows, columns=LINKAGE_COLUMNS))
