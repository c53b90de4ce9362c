"""alpha <-> behaviour done within items, and the prompt's trace vs its behavioural effect ->
linkage.csv.

correlation.csv correlates alpha and adherence across conditions, which mixes items: a French
item and a lowercase item differ in both for reasons of their own. Here:
- `alpha_auc_item`: per item, Spearman of each probed sample's own alpha (mean over layers
  1..L of its rel_l2 fits in fits.csv) against that sample's adherence AUC (mean window pass),
  across the item's samples of every policy;
- `alpha_auc_within`: their stratified mean over items (items with >= 3 samples and varying
  alpha and AUC), its interval the mean of the items' Fisher-z intervals, each at level
  1 - alpha/I (Bonferroni over the I items, so all hold at once);
- `alpha_auc_across`: correlation.csv's cross-condition coefficient, repeated beside them;
- `kl_dependence_item`: per item, Spearman of the next-token KL at the fork against the
  dependence (carried.csv) across fork positions and policies.
Per-item rows carry the Fisher-z interval of their Spearman rho (`harness.stats.
correlation_interval`; NaN with a method saying why below 4 points).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness import results
from harness.analysis.correlation import MIN_N, spearman_pearson
from harness.results import LinkageRow, result_frame
from harness.scoring.adherence import window_passes
from harness.stats import DEFAULT_LEVEL, Interval, correlation_interval, none_interval

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


def _rho_interval(x: np.ndarray, y: np.ndarray, level: float) -> Interval:
    if len(x) < MIN_N:
        return none_interval(np.nan, len(x), f"n < {MIN_N}")
    return correlation_interval(_rho(x, y), len(x), kind="spearman", level=level)


def within_items(samples: pd.DataFrame, level: float) -> list[dict]:
    rows, groups = [], []
    for (model, item), group in samples.groupby(["model", "item"], sort=True):
        x, y = group["alpha"].to_numpy(float), group["auc"].to_numpy(float)
        ci = _rho_interval(x, y, level)
        rows.append(_link("alpha_auc_item", model, item, "alpha", "auc", 1, ci))
        if np.isfinite(ci.estimate):
            groups.append((model, x, y))
    for model in sorted({g[0] for g in groups}):
        mine = [(x, y) for m, x, y in groups if m == model]
        each = [_rho_interval(x, y, 1 - (1 - level) / len(mine)) for x, y in mine]
        mean = Interval(
            float(np.mean([c.estimate for c in each])),
            float(np.mean([c.low for c in each])),
            float(np.mean([c.high for c in each])),
            sum(len(x) for x, _ in mine),
            f"mean of item intervals ({each[0].method}; bonferroni over {len(mine)} items)",
        )
        rows.append(_link("alpha_auc_within", model, "", "alpha", "auc", len(mine), mean))
    return rows


def kl_dependence(carried: pd.DataFrame, level: float) -> list[dict]:
    rows = []
    if carried.empty:
        return rows
    use = carried.dropna(subset=["kl", "dependence"])
    for model, item in carried[["model", "item"]].drop_duplicates().itertuples(index=False):
        points = use[(use["model"] == model) & (use["item"] == item)]
        x, y = points["kl"].to_numpy(float), points["dependence"].to_numpy(float)
        ci = _rho_interval(x, y, level)
        rows.append(_link("kl_dependence_item", model, item, "kl", "dependence", 1, ci))
    return rows


def _link(kind, model, item, x, y, items, ci: Interval) -> dict:
    values = [kind, model, item, x, y, ci.n, items, ci.estimate, ci.low, ci.high, ci.method]
    return dict(zip(LINKAGE_COLUMNS, values, strict=True))


def linkage_frame(
    fits: pd.DataFrame,
    windows: pd.DataFrame,
    correlation: pd.DataFrame,
    carried: pd.DataFrame,
    *,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    rows = within_items(sample_alpha_auc(fits, windows), level)
    across = correlation[(correlation["x"] == "alpha_mean") & (correlation["y"] == "auc")]
    for rec in across.to_dict("records") if not correlation.empty else []:
        method = rec.get("spearman_method", "")
        ci = Interval(rec["spearman"], rec["spearman_low"], rec["spearman_high"], rec["n"], method)
        rows.append(_link("alpha_auc_across", "", "", "alpha_mean", "auc", np.nan, ci))
    rows += kl_dependence(carried, level)
    return result_frame(LinkageRow, pd.DataFrame(rows, columns=LINKAGE_COLUMNS))
