"""Early-warning predictor: features per window, grouped CV AUROC, degenerate input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from harness.analysis.predictor import (
    BASELINE,
    COLUMNS,
    FULL,
    predict_violations,
    weighted_auroc,
    window_features,
)

from .test_analysis_frames import WINDOW, windows_frame

CONDS = [("m", "fr", p) for p in ("none", "restate")]


def _probe_frames(fail: dict, signal: float = 3.0, seed: int = 0, layers=(2, 4)):
    """divergence.csv (every 8th t, t = 1..16) and nexttoken.csv rows; rel_l2 is high inside
    the windows that fail, kl/delta_logp are noise."""
    rng = np.random.default_rng(seed)
    div, nxt = [], []
    for (policy, sample, window), failed in sorted(fail.items()):
        head = dict(model="m", item="fr", policy=policy, sample=sample,
                    pair=f"fr/{policy}/{sample}")  # fmt: skip
        t = np.arange(window * WINDOW + 1, (window + 1) * WINDOW + 1)
        nxt.append(pd.DataFrame({**head, "t": t, "delta_logp": rng.normal(size=len(t)),
                                 "kl": rng.random(len(t))}))  # fmt: skip
        probed = t[(t % 8 == 0) | (t <= 16)]
        for layer in layers:
            level = (signal if failed else 0.0) + 0.3 * rng.normal(size=len(probed))
            div.append(pd.DataFrame({**head, "layer": layer, "t": probed, "l2": 1.0,
                                     "rel_l2": np.exp(level), "cos_dist": 0.0}))  # fmt: skip
    return pd.concat(div, ignore_index=True), pd.concat(nxt, ignore_index=True)


def _random_failures(seed=0, share=0.3, n_samples=6, n_windows=8):
    rng = np.random.default_rng(seed)
    fail = {}

    def passed(model, item, policy, sample, window):
        fail[(policy, sample, window)] = bool(rng.random() < share)
        return not fail[(policy, sample, window)]

    windows = windows_frame(CONDS, n_samples=n_samples, n_windows=n_windows, passed=passed)
    return windows, fail


def test_weighted_auroc_matches_sklearn_with_ties_and_weights():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 60).astype(float)  # many ties
    labels = rng.random(60) < 0.4
    weights = rng.integers(0, 3, size=(3, 60)).astype(float)
    got = weighted_auroc(scores, labels, np.vstack([np.ones(60), weights]))
    assert got[0] == pytest.approx(roc_auc_score(labels, scores))
    for row, w in zip(got[1:], weights, strict=True):
        assert row == pytest.approx(roc_auc_score(labels, scores, sample_weight=w))
    one_class = weighted_auroc(scores, labels, np.where(labels, 0.0, 1.0)[None])
    assert math.isnan(one_class[0])


def test_features_average_the_window_and_keep_position():
    windows, fail = _random_failures()
    div, nxt = _probe_frames(fail)
    feats = window_features(windows, div, nxt, layers=[2, 4])
    assert len(feats) == 2 * 6 * 8
    assert {"log_rel_l2_L2", "log_rel_l2_L4", "kl", "delta_logp", "log_t"} <= set(feats.columns)
    first = feats.iloc[0]
    assert first["log_t"] == pytest.approx(np.log((1 + WINDOW) / 2))
    rows = nxt[(nxt["policy"] == "none") & (nxt["sample"] == 0) & (nxt["t"] <= WINDOW)]
    assert first["kl"] == pytest.approx(rows["kl"].mean())
    assert first["delta_logp"] == pytest.approx(rows["delta_logp"].mean())
    failing = feats.groupby("failed")["log_rel_l2_L2"].mean()
    assert failing[True] - failing[False] > 1.5  # the signal survives the window averaging


def test_divergence_predicts_position_independent_violations():
    windows, fail = _random_failures()
    div, nxt = _probe_frames(fail)
    out = predict_violations(window_features(windows, div, nxt, [2, 4]), n_boot=300)
    assert list(out.columns) == COLUMNS
    full = out[out["features"] == FULL].iloc[0]
    base = out[out["features"] == BASELINE].iloc[0]
    assert full["auroc"] > 0.95 and full["auroc_low"] > 0.85
    assert 0.3 < base["auroc"] < 0.7 and base["auroc_low"] < 0.5 < base["auroc_high"]
    assert full["n_windows"] == base["n_windows"] == 96
    assert full["n_samples"] == 12 and full["folds"] == 5
    assert full["n_violations"] == sum(fail.values()) and full["reason"] == ""


def test_position_alone_predicts_late_violations():
    def passed(model, item, policy, sample, window):
        return window < 4 + sample % 2  # failures start at window 4 or 5

    windows = windows_frame(CONDS, n_samples=6, passed=passed)
    out = predict_violations(window_features(windows, None, None, [2]), n_boot=200)
    base = out[out["features"] == BASELINE].iloc[0]
    assert base["auroc"] > 0.9
    assert out[out["features"] == FULL].iloc[0]["reason"].startswith("no divergence")


def test_undetermined_windows_are_dropped():
    def passed(model, item, policy, sample, window):
        return None if window == 0 else window < 3

    windows = windows_frame(CONDS, n_samples=3, passed=passed)
    feats = window_features(windows, None, None, [1])
    assert len(feats) == 2 * 3 * 7 and feats["window"].min() == 1
    assert feats["failed"].sum() == 2 * 3 * 5


@pytest.mark.parametrize(
    "n_samples, n_windows, passed, reason",
    [
        (4, 8, lambda *a: True, "one class only (no window failed)"),
        (4, 8, lambda *a: False, "one class only (every window failed)"),
        (1, 3, lambda m, i, p, s, w: w < 1, "fewer than 10 windows"),
    ],
)
def test_degenerate_rows_have_a_reason(n_samples, n_windows, passed, reason):
    windows = windows_frame(CONDS, n_samples=n_samples, n_windows=n_windows, passed=passed)
    out = predict_violations(window_features(windows, None, None, [1]))
    base = out[out["features"] == BASELINE].iloc[0]
    assert base["reason"] == reason and math.isnan(base["auroc"]) and base["folds"] == 0


def test_one_sample_only():
    windows = windows_frame([CONDS[0]], n_samples=1, n_windows=12,
                            passed=lambda m, i, p, s, w: w < 6)  # fmt: skip
    out = predict_violations(window_features(windows, None, None, [1]))
    assert out.iloc[1]["reason"] == "fewer than 2 samples"


def test_empty_and_nan_inputs():
    empty = window_features(windows_frame(CONDS).iloc[:0], None, None, [2])
    assert empty.empty
    assert predict_violations(empty).empty
    windows, fail = _random_failures()
    div, nxt = _probe_frames(fail)
    div["rel_l2"] = np.nan  # nothing usable: the full model has no windows
    out = predict_violations(window_features(windows, div, None, [2, 4]), n_boot=100)
    assert out.iloc[0]["reason"].startswith("no divergence")
    assert np.isfinite(out.iloc[1]["auroc"])


def test_missing_nexttoken_uses_the_divergence_layers_alone():
    windows, fail = _random_failures()
    div, _ = _probe_frames(fail)
    out = predict_violations(window_features(windows, div, None, [2, 4]), n_boot=100)
    full = out[out["features"] == FULL].iloc[0]
    assert full["auroc"] > 0.95 and full["n_windows"] == 96
    only_kl = predict_violations(window_features(windows, None, _probe_frames(fail)[1], [2]))
    assert only_kl.iloc[0]["reason"] == "" and only_kl.iloc[0]["n_windows"] == 96


def test_deterministic_for_a_seed():
    windows, fail = _random_failures(seed=2)
    div, nxt = _probe_frames(fail, signal=0.5, seed=2)
    feats = window_features(windows, div, nxt, [2, 4])
    a = predict_violations(feats, n_boot=200, seed=7)
    b = predict_violations(feats, n_boot=200, seed=7)
    pd.testing.assert_frame_equal(a, b)
