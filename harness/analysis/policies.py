"""Each reminder policy vs `none` -> policies.csv.

Per (model, item) and pooled over items (item = "all"): adherence AUC and final (the means of
the per-sample values of `harness.scoring.adherence.sample_values`) and half-life (the mean
curve's at the fixed checkpoints) of every policy,
the difference to the baseline policy with a paired interval (harness.stats), the token overhead
(injected + restated) / generated, and whether the policy is on the Pareto frontier of
its paired AUC gain over the baseline (higher is better) vs token overhead (lower is better)
among the policies of that (model, item). The baseline's own rows carry delta 0. A policy's
`value` and `none_value` are both taken over the samples (and, pooled, the items) the two
policies share, so a policy run on fewer items is never set against the baseline's mean over
all of its items; compare policies by `delta`, not by one policy's `value` against another's.

Pairing: sample index k of every policy within an item shares its seed, so the unit is the
pair (policy sample k, baseline sample k), over the indices both have. AUC and final: the
bounded-mean interval of the per-pair differences of the per-sample values, in [-1, 1]
(`paired_interval`). half_life_capped: the difference of the two conditions' half-life
intervals (each the band inversion of `harness.scoring.adherence`, at level 1 - alpha/2 so
both hold at once), capped as the metric is. The pooled row averages the per-item metrics over
the items where both are finite; its interval averages the items' intervals, each at level
1 - alpha/I over the I items (Bonferroni: all hold at once, so their average holds).

The half-life metric here is `half_life_capped`, so that policies that never halve stay
comparable: a censored half-life (a(t) never fell below a(first)/2) becomes the last window
checkpoint seen, a lower bound. It has its own name because summary.csv's `half_life` is NaN when
censored (with `half_life_censored` saying so); with a(first) = 0 there is nothing to halve
and both stay NaN. Token overhead is NaN, and the row off the frontier, when
token counts are missing.

Quality beside the gain (`with_quality`): each policy's perplexity ratio, degeneration
difference and quality rule from quality.csv (harness.analysis.quality), so a gain bought with
garbage text reads as such in the same row; pooled, the worst item's ratio and every item's rule.
"""

from __future__ import annotations

import math
import warnings
from contextlib import contextmanager

import numpy as np
import pandas as pd

from harness.analysis.summary import tokens_by_condition, window_verdicts
from harness.results import RUN_SAMPLE, PolicyRow, result_frame
from harness.scoring.adherence import (
    curve_metrics,
    half_life_interval,
    half_life_points,
    sample_values,
)
from harness.stats import DEFAULT_LEVEL, Interval, none_interval, paired_interval

COLUMNS = PolicyRow.columns()
METRICS = ("auc", "half_life_capped", "final")
POOLED = "all"


@contextmanager
def _quiet():
    """Silence numpy's "mean of empty slice": an all-NaN column is an expected NaN here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# ---------------------------------------------------------------------------- curve metrics
def batch_curve_metrics(t: np.ndarray, curves: np.ndarray) -> np.ndarray:
    """`curve_metrics` for many a(t) curves at once, with the restricted half-life.

    t: (G,), curves: (B, G) with NaN where undetermined -> (B, 3): auc, half_life, final.
    """
    valid = ~np.isnan(curves)  # (B, G)
    k = valid.sum(axis=1)  # (B,)
    a = np.where(valid, curves, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = a.sum(axis=1) / k
        first = np.take_along_axis(a, valid.argmax(axis=1)[:, None], axis=1)[:, 0]  # (B,)
        below = valid & (a < first[:, None] / 2)
        last = t[valid.shape[1] - 1 - valid[:, ::-1].argmax(axis=1)]  # last determined t
        half = np.where(below.any(axis=1), t[below.argmax(axis=1)], last)
        half = np.where(first > 0, half, np.nan)
        quarter = np.maximum(1, np.ceil(k / 4))
        from_end = np.cumsum(valid[:, ::-1], axis=1)[:, ::-1]  # determined points at or after
        final = np.where(valid & (from_end <= quarter[:, None]), a, 0.0).sum(axis=1) / quarter
    out = np.stack([auc, half, final], axis=1)
    out[k == 0] = np.nan
    return out


def point_metrics(t: np.ndarray, matrix: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(3,): auc, restricted half_life, final: the means of the per-sample values (S, 2) and
    the half-life of the mean curve of a (S, K) pass matrix at the checkpoints t."""
    with _quiet():
        a = np.nanmean(matrix, axis=0) if len(matrix) else np.full(len(t), np.nan)
        auc, final = np.nanmean(values, axis=0) if len(values) else (math.nan, math.nan)
    m = curve_metrics(t, a)
    half = m["half_life"]
    if m["half_life_censored"] and m["a_first"] > 0:
        half = float(t[~np.isnan(a)][-1])
    elif not m["a_first"] > 0:
        half = math.nan
    return np.array([auc, half, final])


# ---------------------------------------------------------------------------- pareto
def pareto_front(score: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """True for points no other point beats (score >=, cost <=, one strictly); NaN -> False."""
    score = np.asarray(score, dtype=np.float64)
    cost = np.asarray(cost, dtype=np.float64)
    ok = np.isfinite(score) & np.isfinite(cost)
    s, c = score[:, None], cost[:, None]  # row i vs column j: does j dominate i?
    dominates = (score[None] >= s) & (cost[None] <= c) & ((score[None] > s) | (cost[None] < c))
    dominated = (dominates & ok[None, :]).any(axis=1)
    return ok & ~dominated


# ---------------------------------------------------------------------------- comparison
def _matrices(verdicts: pd.DataFrame, horizon: float | None) -> dict:
    """{(model, item): {policy: (checkpoints (K,), matrix (S, K), sample ids (S,), per-sample
    auc and final (S, 2))}}: each sample's values from its own windows (`sample_values`)."""
    out: dict = {}
    for (model, item, policy), cond in verdicts.groupby(["model", "item", "policy"], sort=True):
        # One row per sample (run_id, seed, sample), in pass_matrix's order (sorted keys):
        # pairing across policies is by that key (a sample index shares its seed). Kept, not
        # blanked: two runs' sample 0 are two samples, not one.
        cond = cond.assign(**{c: v for c, v in (("run_id", ""), ("seed", 0)) if c not in cond})
        points, matrix = half_life_points(cond, horizon)
        values = np.stack(sample_values(cond, horizon), axis=1)
        ids = sorted(cond[list(RUN_SAMPLE)].drop_duplicates().itertuples(index=False, name=None))
        out.setdefault((str(model), str(item)), {})[str(policy)] = (points, matrix, ids, values)
    return out


def _capped_half_life(t: np.ndarray, matrix: np.ndarray, level: float) -> Interval:
    """half_life_capped's interval: the band inversion's, with inf capped at the last t."""
    ci = half_life_interval(t, matrix, level=level)
    determined = t[~np.isnan(matrix).all(axis=0)]
    # the last determined point; none (every window undetermined): nothing to cap
    last = float(determined[-1]) if len(determined) else np.inf
    return Interval(ci.estimate, min(ci.low, last), min(ci.high, last), ci.n, ci.method)


def _deltas(grid, mp, vp, b_grid, mb, vb, level: float) -> list[Interval]:
    """Intervals of the policy - baseline differences of auc, half_life_capped, final over the
    pairs (rows of mp, vp and mb, vb are the same sample indices)."""
    (auc_p, final_p), (auc_b, final_b) = vp.T, vb.T
    half_level = 1 - (1 - level) / 2  # two intervals that must hold at once
    hp, hb = _capped_half_life(grid, mp, half_level), _capped_half_life(b_grid, mb, half_level)
    half = Interval(
        hp.estimate - hb.estimate, hp.low - hb.high, hp.high - hb.low, len(mp),
        f"difference of half-life intervals ({hp.method}; bonferroni over 2)",
    )  # fmt: skip
    return [
        paired_interval(auc_p, auc_b, level=level),
        half,
        paired_interval(final_p, final_b, level=level),
    ]


def _compare(per_policy: dict, baseline: str, level: float) -> dict:
    """{policy: (value (3,), none_value (3,), pairs)} for one (model, item); pairs: what the
    delta intervals need, (grid, mp, vp, b_grid, mb, vb), or None without a baseline."""
    base = per_policy.get(baseline)
    out = {}
    for policy, (grid, matrix, ids, values) in per_policy.items():
        b_index = {key: i for i, key in enumerate(base[2])} if base is not None else {}
        rows = [i for i, key in enumerate(ids) if key in b_index]
        if not rows:
            out[policy] = (point_metrics(grid, matrix, values), np.full(3, np.nan), None)
            continue
        b_grid, b_matrix, b_ids, b_values = base
        b_rows = [b_index[ids[i]] for i in rows]
        mp, vp, mb, vb = matrix[rows], values[rows], b_matrix[b_rows], b_values[b_rows]
        value, none_value = point_metrics(grid, mp, vp), point_metrics(b_grid, mb, vb)
        out[policy] = (value, none_value, (grid, mp, vp, b_grid, mb, vb))
    return out


def _intervals(result: tuple, level: float, itself: bool = False) -> list[Interval]:
    value, none_value, pairs = result
    if itself and pairs is not None:  # the baseline against itself: 0 by definition
        return [Interval(0.0, 0.0, 0.0, len(pairs[1]), "identity (the baseline itself)")] * 3
    if pairs is None:
        return [none_interval(math.nan, 0, "no baseline samples to pair with")] * 3
    return _deltas(*pairs, level)


def _pool(results: list[tuple], level: float, itself: bool) -> tuple:
    """Mean over items of per-item metrics, metric by metric over items with both finite;
    the interval the mean of the items' intervals at level 1 - alpha/I (Bonferroni)."""
    values = np.stack([r[0] for r in results])  # (I, 3)
    nones = np.stack([r[1] for r in results])  # (I, 3)
    ok = np.isfinite(values) & np.isfinite(nones)  # (I, 3)
    n = ok.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(ok, values, 0).sum(0) / n
        none_value = np.where(ok, nones, 0).sum(0) / n
    if not np.isfinite(nones).any():  # no baseline anywhere: report the policy's own mean
        with _quiet():
            value = np.nanmean(values, axis=0)
    pooled = []
    for m in range(3):
        use = [r for r, good in zip(results, ok[:, m], strict=True) if good and r[2]]
        if not use:
            pooled.append(none_interval(math.nan, 0, "no item with a paired baseline"))
            continue
        items = [_intervals(r, 1 - (1 - level) / len(use), itself)[m] for r in use]
        pooled.append(
            Interval(
                float(np.mean([c.estimate for c in items])),
                float(np.mean([c.low for c in items])),
                float(np.mean([c.high for c in items])),
                int(sum(c.n for c in items)),
                f"mean of item intervals ({items[0].method}; bonferroni over {len(use)} items)",
            )
        )
    return value, none_value, pooled


def _rows(model, item, results: dict, overhead: dict) -> list[dict]:
    """results: {policy: (value (3,), none_value (3,), [Interval] * 3)}."""
    policies = sorted(results)
    # the frontier ranks each policy's paired AUC gain over the baseline (on the samples and
    # items both have), never its own AUC: two policies' own values may pool different items
    gain = np.array([results[p][0][0] - results[p][1][0] for p in policies])
    cost = np.array([overhead.get(p, math.nan) for p in policies])
    front = dict(zip(policies, pareto_front(gain, cost), strict=True))
    rows = []
    for p in policies:
        value, none_value, intervals = results[p]
        for m, metric in enumerate(METRICS):
            delta, ci = value[m] - none_value[m], intervals[m]
            bounded = np.isfinite(delta)
            rows.append(
                dict(
                    model=model,
                    item=item,
                    policy=p,
                    metric=metric,
                    value=value[m],
                    none_value=none_value[m],
                    delta=delta,
                    delta_low=ci.low if bounded else math.nan,
                    delta_high=ci.high if bounded else math.nan,
                    n=ci.n,
                    method=ci.method,
                    token_overhead=overhead.get(p, math.nan),
                    pareto=bool(front[p]),
                )  # fmt: skip
            )
    return rows


def _overheads(tokens: pd.DataFrame | None) -> tuple[dict, dict]:
    """({(model, item, policy): overhead}, {(model, policy): pooled overhead})."""
    if tokens is None or tokens.empty:
        return {}, {}
    per = tokens_by_condition(tokens)
    per[["model", "item", "policy"]] = per[["model", "item", "policy"]].astype(str)
    by_item = {
        (m, i, p): float(v)
        for m, i, p, v in per[["model", "item", "policy", "token_overhead"]].itertuples(index=False)
    }
    counts = ["tokens_generated", "tokens_injected", "tokens_restated"]
    sums = per.groupby(["model", "policy"])[counts].sum().astype(float)
    gen = sums["tokens_generated"].where(sums["tokens_generated"] > 0)
    pooled = ((sums["tokens_injected"] + sums["tokens_restated"]) / gen).to_dict()
    return by_item, {k: float(v) for k, v in pooled.items()}


def compare_policies(
    windows: pd.DataFrame | None,
    generations_tokens: pd.DataFrame | None,
    *,
    baseline: str = "none",
    level: float = DEFAULT_LEVEL,
    horizon: float | None = None,
) -> pd.DataFrame:
    """policies.csv rows (columns COLUMNS), sorted by model, item ("all" last), policy
    (baseline first), metric. horizon: the fixed t-range of `sample_values`."""
    if windows is None or windows.empty:
        return result_frame(PolicyRow)
    by_item, pooled_cost = _overheads(generations_tokens)
    per_model: dict[str, dict[str, list]] = {}
    rows = []
    for (model, item), per_policy in _matrices(window_verdicts(windows), horizon).items():
        results = _compare(per_policy, baseline, level)
        cost = {p: by_item.get((model, item, p), math.nan) for p in results}
        with_ci = {p: (r[0], r[1], _intervals(r, level, p == baseline)) for p, r in results.items()}
        rows += _rows(model, item, with_ci, cost)
        for p, r in results.items():
            per_model.setdefault(model, {}).setdefault(p, []).append(r)
    for model, per_policy in per_model.items():
        pooled = {p: _pool(rs, level, p == baseline) for p, rs in per_policy.items()}
        cost = {p: pooled_cost.get((model, p), math.nan) for p in pooled}
        rows += _rows(model, POOLED, pooled, cost)
    out = pd.DataFrame(rows, columns=COLUMNS)
    order = {
        "item": lambda s: s.map(lambda v: (v == POOLED, v)),
        "policy": lambda s: s.map(lambda v: (v != baseline, v)),
        "metric": lambda s: s.map(METRICS.index),
    }
    out = out.sort_values(
        ["model", "item", "policy", "metric"], key=lambda s: order.get(s.name, lambda x: x)(s)
    )
    return result_frame(PolicyRow, out.reset_index(drop=True))


QUALITY = ("perplexity_ratio", "degeneration_delta", "quality_holds")


def _all_hold(values: pd.Series) -> bool | None:
    known = [bool(v) for v in values if v is not None and not pd.isna(v)]
    return all(known) if known else None


def with_quality(policies: pd.DataFrame, quality: pd.DataFrame | None) -> pd.DataFrame:
    """policies.csv rows with quality.csv's QUALITY columns of their (model, item, policy);
    the pooled rows (item "all") get the worst item's perplexity ratio, the mean degeneration
    difference and whether every item's quality holds."""
    if quality is None or quality.empty or policies.empty:
        return policies
    keys = ["model", "item", "policy"]
    per_item = quality[[*keys, *QUALITY]].astype({k: str for k in keys})
    pooled = (
        per_item.groupby(["model", "policy"])
        .agg(
            perplexity_ratio=("perplexity_ratio", "max"),
            degeneration_delta=("degeneration_delta", "mean"),
            quality_holds=("quality_holds", _all_hold),
        )
        .reset_index()
        .assign(item=POOLED)
    )
    table = pd.concat([per_item, pooled[[*keys, *QUALITY]]], ignore_index=True)
    out = policies.drop(columns=[c for c in QUALITY if c in policies]).merge(
        table, on=keys, how="left"
    )
    out["quality_holds"] = (
        out["quality_holds"].astype(object).where(out["quality_holds"].notna(), None)
    )
    return result_frame(PolicyRow, out[COLUMNS])
