"""alpha <-> behaviour done within items, and the prompt's trace vs its behavioural effect ->
linkage.csv.

correlation.csv correlates alpha and adherence across conditions, which mixes items: a French
item and a lowercase item differ in both for reasons of their own. Here:
- `alpha_auc_item`: per item, Spearman of each probed sample's own alpha (mean over layers
  1..L of its rel_l2 fits in fits.csv) against that sample's adherence AUC (its own
  token-weighted share of passing positions), across the item's samples of every policy.
  Sample k of every policy shares its seed, so the unit is the sample index: the interval
  resamples sample indices with all their policies' points (`correlation.unit_intervals`;
  below 4 sample indices no interval, the method says so);
- `alpha_auc_within`: their stratified mean over items (items with >= 3 samples and varying
  alpha and AUC), its interval the mean of the items' intervals, each at level 1 - alpha/I
  (Bonferroni over the I items, so all hold at once);
- `alpha_auc_across`: correlation.csv's cross-condition coefficient, repeated beside them;
- `kl_dependence_item`: per item, Spearman of each forked record's next-token KL at a fork
  against its own dependence there, across fork positions and policies; the positions of one
  record (and sample k of each policy) are not independent, so the interval resamples records
  (sample indices).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness import results
from harness.analysis.correlation import MIN_N, unit_intervals
from harness.results import LinkageRow, result_frame
from harness.scoring.adherence import TASK_CONDITION, sample_values
from harness.scoring.passes import window_passes
from harness.stats import DEFAULT_LEVEL, Interval, none_interval

LINKAGE_COLUMNS = LinkageRow.columns()
RECORD = list(results.RECORD)


def sample_alpha_auc(fits: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """One row per probed sample: alpha (mean over layers 1..L) and auc (the sample's own
    token-weighted share of passing positions, `harness.scoring.adherence.sample_values`)."""

    if fits.empty or windows.empty:
        return pd.DataFrame(columns=[*RECORD, "alpha", "auc"])
    f = fits[(fits["metric"] == "rel_l2") & (fits["layer"] >= 1) & (fits["pair"] != "all")]
    f = f.assign(sample=f["pair"].str.rsplit("/", n=1).str[-1].astype(int))
    alpha = f.groupby(RECORD)["alpha"].mean().rename("alpha")
    frames = []
    for _, cond in window_passes(windows).groupby(TASK_CONDITION, sort=True):
        keys = cond.groupby(["run_id", "seed", "sample"], sort=True)[RECORD[:3]].first()
        frames.append(keys.reset_index().assign(auc=sample_values(cond)[0]))
    auc = pd.concat(frames).groupby(RECORD)["auc"].mean() if frames else pd.Series(dtype=float)
    both = pd.concat([alpha, auc.rename("auc")], axis=1, join="inner").reset_index()
    return both.dropna(subset=["alpha", "auc"])


def _rho_interval(x, y, units, unit: str, level: float) -> Interval:
    """Spearman with an interval resampling whole units (`unit_intervals`)."""
    if len(x) < MIN_N:
        return none_interval(np.nan, len(x), f"n < {MIN_N}")
    rho = unit_intervals(np.asarray(x, float), np.asarray(y, float), units, unit, level=level)[0]
    return Interval(rho.estimate, rho.low, rho.high, len(x), rho.method)


def within_items(samples: pd.DataFrame, level: float) -> list[dict]:
    rows, groups = [], []
    for (model, item), group in samples.groupby(["model", "item"], sort=True):
        x, y = group["alpha"].to_numpy(float), group["auc"].to_numpy(float)
        # sample k of every policy shares its seed: the sample index is the unit
        ci = _rho_interval(x, y, group["sample"].to_numpy(), "sample indices", level)
        rows.append(_link("alpha_auc_item", model, item, "alpha", "auc", 1, ci))
        if np.isfinite(ci.estimate):
            groups.append((model, x, y, group["sample"].to_numpy()))
    for model in sorted({g[0] for g in groups}):
        mine = [(x, y, u) for m, x, y, u in groups if m == model]
        each_level = 1 - (1 - level) / len(mine)
        each = [_rho_interval(x, y, u, "sample indices", each_level) for x, y, u in mine]
        mean = Interval(
            float(np.mean([c.estimate for c in each])),
            float(np.mean([c.low for c in each])),
            float(np.mean([c.high for c in each])),
            sum(len(x) for x, _, _ in mine),
            f"mean of item intervals ({each[0].method}; bonferroni over {len(mine)} items)",
        )
        rows.append(_link("alpha_auc_within", model, "", "alpha", "auc", len(mine), mean))
    return rows


def kl_dependence(points: pd.DataFrame, level: float) -> list[dict]:
    """Per item: Spearman of each record's next-token KL at a fork against its own dependence
    there (`carried.record_points`), over fork positions and policies; the positions of one
    record are not independent, so the interval resamples records."""
    rows = []
    if points.empty:
        return rows
    use = points.dropna(subset=["kl", "dependence"])
    for model, item in points[["model", "item"]].drop_duplicates().itertuples(index=False):
        mine = use[(use["model"] == model) & (use["item"] == item)]
        x, y = mine["kl"].to_numpy(float), mine["dependence"].to_numpy(float)
        records = mine["sample"].astype(str).to_numpy()  # one record per sample index
        ci = _rho_interval(x, y, records, "records", level)
        rows.append(_link("kl_dependence_item", model, item, "kl", "dependence", 1, ci))
    return rows


def _link(kind, model, item, x, y, items, ci: Interval) -> dict:
    values = [kind, model, item, x, y, ci.n, items, ci.estimate, ci.low, ci.high, ci.method]
    return dict(zip(LINKAGE_COLUMNS, values, strict=True))


def linkage_frame(
    fits: pd.DataFrame,
    windows: pd.DataFrame,
    correlation: pd.DataFrame,
    points: pd.DataFrame,
    *,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """linkage.csv; `points`: the forks' per-record kl and dependence (`record_points`)."""
    rows = within_items(sample_alpha_auc(fits, windows), level)
    across = correlation[(correlation["x"] == "alpha_mean") & (correlation["y"] == "auc")]
    for rec in across.to_dict("records") if not correlation.empty else []:
        method = rec.get("spearman_method", "")
        ci = Interval(rec["spearman"], rec["spearman_low"], rec["spearman_high"], rec["n"], method)
        rows.append(_link("alpha_auc_across", "", "", "alpha_mean", "auc", np.nan, ci))
    rows += kl_dependence(points, level)
    return result_frame(LinkageRow, pd.DataFrame(rows, columns=LINKAGE_COLUMNS))
