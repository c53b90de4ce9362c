"""Early warning: does the divergence signal predict a failing window beyond position alone?

One row per window of each generated sample (windows.csv verdicts; undetermined windows
dropped). Label: the window failed. Features:
- log rel_l2 at the chosen layers: divergence.csv holds rel_l2 only at a sparse grid of t, so
  log rel_l2 is interpolated linearly in log t (held constant beyond the probed range) at
  POINTS evenly spaced positions of the window's [t_start, t_end] and averaged;
- mean kl and mean delta_logp over the window's positions (nexttoken.csv holds every t);
- log t of the window centre (t_start + t_end) / 2.
Per model, a standardised logistic regression on all features ("divergence+log_t") is compared
with one on log t alone ("log_t"), both on the same windows: out-of-fold scores from GroupKFold
grouped by sample (the probe pair "<item>/<policy>/<sample>": windows of one sample never sit on
both sides of a split), and the AUROC over failing/passing window pairs within each test fold
(the pair-weighted mean of per-fold AUROCs). Pooling all out-of-fold scores into one ranking
instead would compare scores of different fitted models: with an uninformative feature each
fold predicts its training base rate, which is low exactly where the held-out fold fails
often, and the pooled AUROC falls well below 0.5. The interval is a percentile bootstrap over
samples (the fitted scores are kept; resampling samples re-weights their windows), through
`harness.stats.bootstrap.bootstrap_interval`; it is approximate (no small-n guarantee), and its
`method` says so; `n_samples` is its n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.summary import window_verdicts
from harness.results import RECORD, PredictorRow, result_frame
from harness.stats import DEFAULT_DRAWS, DEFAULT_LEVEL
from harness.stats.bootstrap import bootstrap_interval

COLUMNS = PredictorRow.columns()
FULL, BASELINE = "divergence+log_t", "log_t"
SAMPLE_KEYS = list(RECORD)
POINTS = 8  # interpolation points per window
MAX_FOLDS = 5
MIN_WINDOWS = 10
CELLS = 2_000_000  # bootstrap weight-matrix cells per chunk: (rows, n_windows) float64 ~16 MB


# ---------------------------------------------------------------------------- features
def _keyed(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for col in ("model", "item", "policy"):
        frame[col] = frame[col].astype(str)
    frame["sample"] = frame["sample"].astype(np.int64)
    return frame


def _groups(frame: pd.DataFrame, keys: list[str]) -> dict[tuple, np.ndarray]:
    """key -> positional row indices (positions in `frame`, which must have a RangeIndex)."""
    return {
        tuple(k) if isinstance(k, tuple) else (k,): v
        for k, v in frame.groupby(keys, sort=False).indices.items()
    }


def _layer_features(
    wins: pd.DataFrame, divergence: pd.DataFrame | None, layers: Sequence[int]
) -> pd.DataFrame:
    cols = {int(k): np.full(len(wins), np.nan) for k in layers}
    if divergence is not None and not divergence.empty and layers:
        div = _keyed(divergence[divergence["layer"].isin(list(layers))])
        div = div.sort_values([*SAMPLE_KEYS, "layer", "t"]).reset_index(drop=True)
        t_all = div["t"].to_numpy(dtype=np.float64)
        rel_all = div["rel_l2"].to_numpy(dtype=np.float64)
        starts = wins["t_start"].to_numpy(dtype=np.float64)
        ends = wins["t_end"].to_numpy(dtype=np.float64)
        by_sample = _groups(wins, SAMPLE_KEYS)
        for (*key, layer), rows in _groups(div, [*SAMPLE_KEYS, "layer"]).items():
            idx = by_sample.get(tuple(key))
            rel, t = rel_all[rows], t_all[rows]
            ok = np.isfinite(rel) & (rel > 0)  # log of a zero distance says nothing usable
            if idx is None or not ok.any():
                continue
            # (POINTS, W) positions spread over each window, interpolated in log t, averaged.
            grid = np.linspace(starts[idx], ends[idx], POINTS)
            vals = np.interp(np.log(grid), np.log(t[ok]), np.log(rel[ok]))  # (POINTS, W)
            cols[int(layer)][idx] = vals.mean(axis=0)
    return pd.DataFrame({f"log_rel_l2_L{k}": v for k, v in cols.items()}, index=wins.index)


def _token_features(wins: pd.DataFrame, nexttoken: pd.DataFrame | None) -> pd.DataFrame:
    cols = {c: np.full(len(wins), np.nan) for c in ("kl", "delta_logp")}
    if nexttoken is not None and not nexttoken.empty:
        nt = _keyed(nexttoken).sort_values([*SAMPLE_KEYS, "t"]).reset_index(drop=True)
        t_all = nt["t"].to_numpy()
        values = {c: nt[c].to_numpy(dtype=np.float64) for c in cols}
        starts, ends = wins["t_start"].to_numpy(), wins["t_end"].to_numpy()
        by_sample = _groups(wins, SAMPLE_KEYS)
        for key, rows in _groups(nt, SAMPLE_KEYS).items():
            idx = by_sample.get(key)
            if idx is None:
                continue
            t = t_all[rows]
            lo = np.searchsorted(t, starts[idx], side="left")  # (W,)
            hi = np.searchsorted(t, ends[idx], side="right")
            for col, out in cols.items():
                v = values[col][rows]
                fin = np.isfinite(v)
                sums = np.concatenate([[0.0], np.cumsum(np.where(fin, v, 0.0))])  # (T+1,)
                counts = np.concatenate([[0], np.cumsum(fin)])
                n = counts[hi] - counts[lo]
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[idx] = np.where(n > 0, (sums[hi] - sums[lo]) / n, np.nan)
    return pd.DataFrame(cols, index=wins.index)


def window_features(
    windows: pd.DataFrame,
    divergence: pd.DataFrame | None,
    nexttoken: pd.DataFrame | None,
    layers: Sequence[int],
) -> pd.DataFrame:
    """One row per determinable window: model, item, policy, sample, window, t_start, t_end,
    failed, log_t, log_rel_l2_L<k> for k in layers, kl, delta_logp (NaN where not probed)."""
    base = ["model", "item", "policy", "sample", "window", "t_start", "t_end", "failed", "log_t"]
    feats = [f"log_rel_l2_L{k}" for k in layers] + ["kl", "delta_logp"]
    if windows is None or windows.empty:
        return pd.DataFrame(columns=base + feats)
    wins = _keyed(window_verdicts(windows))
    wins = wins[wins["window"] >= 0].reset_index(drop=True)
    wins["failed"] = ~wins["passed"].astype(bool)
    wins["log_t"] = np.log((wins["t_start"] + wins["t_end"]) / 2.0)
    out = pd.concat(
        [
            wins,
            _layer_features(wins, divergence, layers),
            _token_features(wins, nexttoken),
        ],
        axis=1,
    )
    return out[base + feats].reset_index(drop=True)


# ---------------------------------------------------------------------------- scoring
def _auroc_parts(scores, labels, weights) -> tuple[np.ndarray, np.ndarray]:
    """Numerator (weighted positive-above-negative pairs, ties 1/2) and denominator (weighted
    positive-negative pairs) of the AUROC under each weighting. weights: (B, N) -> (B,), (B,)."""
    order = np.argsort(scores, kind="stable")
    s, y, w = scores[order], labels[order].astype(bool), weights[:, order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])  # first row of each score level
    pos = np.add.reduceat(np.where(y, w, 0.0), starts, axis=1)  # (B, K)
    neg = np.add.reduceat(np.where(y, 0.0, w), starts, axis=1)  # (B, K)
    below = np.cumsum(neg, axis=1) - neg  # negatives strictly below each level
    return (pos * (below + 0.5 * neg)).sum(axis=1), pos.sum(axis=1) * neg.sum(axis=1)


def weighted_auroc(
    scores: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    strata: np.ndarray | None = None,
) -> np.ndarray:
    """AUROC (ties count 1/2) of one score vector under many weightings of its rows.

    scores, labels: (N,); weights: (B, N) (e.g. bootstrap multiplicities) -> (B,), NaN where a
    weighting leaves one class empty. With strata (N,), only pairs within one stratum are
    compared (the pair-weighted mean of per-stratum AUROCs).
    """
    if len(scores) == 0:
        return np.full(len(weights), np.nan)
    strata = np.zeros(len(scores), dtype=np.int64) if strata is None else strata
    num = np.zeros(len(weights))
    den = np.zeros(len(weights))
    for level in np.unique(strata):
        rows = strata == level
        n, d = _auroc_parts(scores[rows], labels[rows], weights[:, rows])
        num, den = num + n, den + d
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def _oof_scores(x: np.ndarray, y: np.ndarray, groups: np.ndarray, folds: int):
    """Out-of-fold scores (N,) and the fold of each row (N,)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    scores, fold_of = np.empty(len(y)), np.empty(len(y), dtype=np.int64)
    for fold, (train, test) in enumerate(GroupKFold(n_splits=folds).split(x, y, groups)):
        fold_of[test] = fold
        if len(np.unique(y[train])) < 2:  # a fold without both classes: predict its base rate
            scores[test] = y[train].mean()
            continue
        model = make_pipeline(StandardScaler(), LogisticRegression())
        model.fit(x[train], y[train])
        scores[test] = model.predict_proba(x[test])[:, 1]
    return scores, fold_of


METHOD = "percentile-bootstrap over samples (approximate)"


def _evaluate(x, y, groups, n_boot, ci, rng) -> tuple[float, float, float, int]:
    codes, group_idx = np.unique(groups, return_inverse=True)
    folds = min(MAX_FOLDS, len(codes))
    scores, fold_of = _oof_scores(x, y, group_idx, folds)
    auroc = float(weighted_auroc(scores, y, np.ones((1, len(y))), fold_of)[0])
    draws = []
    n_groups = len(codes)
    chunk = max(1, CELLS // max(1, len(y)))
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        picks = rng.integers(0, n_groups, size=(b, n_groups))  # (b, G)
        flat = (np.arange(b)[:, None] * n_groups + picks).ravel()
        counts = np.bincount(flat, minlength=b * n_groups).reshape(b, n_groups)
        draws.append(weighted_auroc(scores, y, counts[:, group_idx].astype(float), fold_of))
    boot = np.concatenate(draws) if draws else np.zeros(0)
    interval = bootstrap_interval(auroc, boot, n=n_groups, level=ci, method=METHOD)
    return auroc, interval.low, interval.high, folds


def _why_not(y: np.ndarray, groups: np.ndarray) -> str:
    if len(y) < MIN_WINDOWS:
        return f"fewer than {MIN_WINDOWS} windows"
    if len(np.unique(groups)) < 2:
        return "fewer than 2 samples"
    if not y.any():
        return "one class only (no window failed)"
    if y.all():
        return "one class only (every window failed)"
    return ""


def _row(model, features, x, y, groups, n_boot, ci, rng, reason: str = "") -> dict:
    n_samples = len(np.unique(groups)) if len(groups) else 0
    row = dict(model=model, features=features, n_windows=len(y), n_samples=n_samples,
               n_violations=int(y.sum()), folds=0)  # fmt: skip
    reason = reason or _why_not(y, groups)
    if reason:
        return {**row, "auroc": math.nan, "auroc_low": math.nan, "auroc_high": math.nan,
                "method": f"none ({reason})", "reason": reason}  # fmt: skip
    auroc, lo, hi, folds = _evaluate(x, y, groups, n_boot, ci, rng)
    return {**row, "auroc": auroc, "auroc_low": lo, "auroc_high": hi, "method": METHOD,
            "folds": folds, "reason": ""}  # fmt: skip


def predict_violations(
    features: pd.DataFrame,
    *,
    n_boot: int = DEFAULT_DRAWS,
    ci: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> pd.DataFrame:
    """predictor.csv from `window_features(...)`: per model, a "divergence+log_t" row and a
    "log_t" row (columns COLUMNS; NaN auroc and a reason when it cannot be estimated).

    A divergence feature that is NaN in every window of a model (e.g. no nexttoken.csv, or a
    layer the probe did not record) is left out of that model's full feature set.
    """
    feats = [c for c in features.columns if c.startswith("log_rel_l2_L")] + ["kl", "delta_logp"]
    rows = []
    for model, frame in features.groupby("model", sort=True):
        present = [c for c in feats if np.isfinite(frame[c].to_numpy(dtype=np.float64)).any()]
        full = frame[present + ["log_t"]].to_numpy(dtype=np.float64)
        usable = np.isfinite(full).all(axis=1) & bool(present)
        groups = frame["item"] + "/" + frame["policy"] + "/" + frame["sample"].astype(str)
        groups = groups.to_numpy()
        y = frame["failed"].to_numpy(dtype=bool)
        rng = np.random.default_rng(seed)
        # Both feature sets on the same windows; without any probed window the baseline
        # still runs on all of them.
        no_div = "no divergence features (probe off or no matching pairs)"
        if usable.any():
            rows.append(_row(model, FULL, full[usable], y[usable], groups[usable], n_boot, ci, rng))
            base = usable
        else:
            rows.append(_row(model, FULL, full[:0], y[:0], groups[:0], 0, ci, rng, no_div))
            base = np.isfinite(frame["log_t"].to_numpy(dtype=np.float64))
        log_t = frame[["log_t"]].to_numpy(dtype=np.float64)[base]
        rows.append(_row(model, BASELINE, log_t, y[base], groups[base], n_boot, ci, rng))
    return result_frame(PredictorRow, pd.DataFrame(rows, columns=COLUMNS))
