"""Policy comparison: paired deltas with CIs, restricted half-life, overhead, Pareto."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.policies import (
    COLUMNS,
    batch_curve_metrics,
    compare_policies,
    pareto_front,
    point_metrics,
    with_quality,
)
from harness.scoring.adherence import curve_metrics
from harness.stats import mean_interval

from .test_analysis_frames import tokens_frame, windows_frame

POLICIES = ("none", "restate", "periodic-64-user")


def _conds(items=("fr",), policies=POLICIES):
    return [("m", i, p) for i in items for p in policies]


def _get(out, item, policy, metric):
    sel = out[(out["item"] == item) & (out["policy"] == policy) & (out["metric"] == metric)]
    assert len(sel) == 1
    return sel.iloc[0]


def test_always_pass_vs_always_fail_gives_delta_one():
    conds = _conds(policies=("none", "restate"))
    windows = windows_frame(conds, passed=lambda m, i, p, s, w: p == "restate")
    out = compare_policies(windows, tokens_frame(conds))
    assert list(out.columns) == COLUMNS
    auc = _get(out, "fr", "restate", "auc")
    assert (auc["value"], auc["none_value"], auc["delta"]) == (1.0, 0.0, 1.0)
    # 4 pairs, each +1: exact binomial on [-1, 1], so 4 pairs cannot exclude 0 (6 would)
    assert auc["delta_low"] == pytest.approx(-1 + 2 * 0.025**0.25) and auc["delta_high"] == 1.0
    assert (auc["n"], auc["method"]) == (4, "clopper-pearson")
    six = compare_policies(
        windows_frame(conds, n_samples=6, passed=lambda m, i, p, s, w: p == "restate"), None
    )
    assert _get(six, "fr", "restate", "auc")["delta_low"] > 0
    assert _get(out, "fr", "restate", "final")["delta"] == 1.0
    # none never passes: a(first) = 0, nothing to halve -> NaN; restate never halves -> the
    # last window start (a lower bound).
    half = _get(out, "fr", "restate", "half_life_capped")
    assert half["value"] == 7 * 64 + 1 and math.isnan(half["none_value"])
    assert math.isnan(half["delta"]) and math.isnan(half["delta_low"])


def test_paired_ci_narrower_than_unpaired_spread():
    # Samples differ a lot (sample s passes its first s+1 windows), the policy adds exactly
    # one passing window to every sample: the paired delta has no spread at all.
    def passed(model, item, policy, sample, window):
        return window < sample + 1 + (policy == "restate")

    conds = _conds(policies=("none", "restate"))
    out = compare_policies(windows_frame(conds, n_samples=6, passed=passed), None)
    auc = _get(out, "fr", "restate", "auc")
    assert auc["delta"] == pytest.approx(1 / 8) and auc["method"] == "betting"
    assert auc["delta_low"] < 1 / 8 < auc["delta_high"]
    # pairing pays: narrower than the two conditions' own intervals combined
    arms = [mean_interval([(min(s + 1 + extra, 8)) / 8 for s in range(6)]) for extra in (1, 0)]
    assert auc["delta_high"] - auc["delta_low"] < arms[0].high - arms[1].low - (
        arms[0].low - arms[1].high
    )
    assert math.isnan(auc["token_overhead"]) and not auc["pareto"]  # no token counts


def test_noisy_delta_ci_covers_the_estimate_and_baseline_rows_are_zero():
    rng = np.random.default_rng(3)
    conds = _conds(items=("fr", "de"))
    share = {"none": 0.3, "restate": 0.9, "periodic-64-user": 0.6}
    windows = windows_frame(
        conds, n_samples=24, passed=lambda m, i, p, s, w: bool(rng.random() < share[p])
    )
    out = compare_policies(windows, tokens_frame(conds))
    for item in ("fr", "de", "all"):
        row = _get(out, item, "restate", "auc")
        assert row["delta_low"] <= row["delta"] <= row["delta_high"]
        assert row["delta_low"] > 0  # 0.9 vs 0.3 pass rate: clearly better
        assert row["delta"] == pytest.approx(row["value"] - row["none_value"])
        base = _get(out, item, "none", "auc")
        assert (base["delta"], base["delta_low"], base["delta_high"]) == (0.0, 0.0, 0.0)
    # pooled value is the mean over items
    fr, de = _get(out, "fr", "restate", "final"), _get(out, "de", "restate", "final")
    assert _get(out, "all", "restate", "final")["value"] == pytest.approx(
        (fr["value"] + de["value"]) / 2
    )
    # order: items sorted with "all" last, baseline first, metrics auc/half_life_capped/final
    assert out["item"].drop_duplicates().tolist() == ["de", "fr", "all"]
    assert out["policy"].drop_duplicates().tolist() == ["none", "periodic-64-user", "restate"]
    assert out["metric"].iloc[:3].tolist() == ["auc", "half_life_capped", "final"]


def test_pairing_uses_sample_index_common_to_both():
    conds = _conds(policies=("none", "restate"))
    windows = windows_frame(conds, n_samples=4, passed=lambda m, i, p, s, w: p == "restate")
    windows = windows[~((windows["policy"] == "none") & (windows["sample"] == 3))]
    out = compare_policies(windows, None)
    assert _get(out, "fr", "restate", "auc")["delta"] == 1.0
    only_restate = windows[windows["policy"] == "restate"]
    alone = compare_policies(only_restate, None)
    row = _get(alone, "fr", "restate", "auc")
    assert row["value"] == 1.0 and math.isnan(row["none_value"]) and math.isnan(row["delta"])


def test_token_overhead_and_pareto():
    conds = _conds(items=("fr", "de"))
    share = {"none": 0.2, "restate": 0.9, "periodic-64-user": 0.6}
    windows = windows_frame(
        conds, n_samples=5, passed=lambda m, i, p, s, w: (w * 7 + s) % 10 < 10 * share[p]
    )
    injected = {"none": 0, "restate": 0, "periodic-64-user": 100}
    tokens = tokens_frame(
        conds, injected=injected.get, restated=lambda p: 20 if p == "restate" else 0
    )
    out = compare_policies(windows, tokens)
    periodic = _get(out, "all", "periodic-64-user", "auc")
    assert periodic["token_overhead"] == pytest.approx(100 / 512)
    assert _get(out, "fr", "restate", "auc")["token_overhead"] == pytest.approx(20 / 512)
    # restate: better AUC and cheaper than periodic -> periodic is dominated.
    front = out[out["metric"] == "auc"].set_index(["item", "policy"])["pareto"]
    for item in ("fr", "de", "all"):
        assert front[(item, "none")] and front[(item, "restate")]
        assert not front[(item, "periodic-64-user")]
    # every metric row of a policy carries the same pareto flag
    assert out.groupby(["item", "policy"])["pareto"].nunique().eq(1).all()


def test_pareto_front_marks_the_right_points():
    auc = np.array([0.2, 0.9, 0.6, 0.9, 0.95, np.nan, 0.5])
    cost = np.array([0.0, 0.1, 0.3, 0.1, 0.5, 0.0, 0.0])
    # 0.2@0 dominated by 0.5@0; 0.6@0.3 dominated by 0.9@0.1; equal points both stay.
    assert pareto_front(auc, cost).tolist() == [False, True, False, True, True, False, True]
    assert pareto_front(np.zeros(0), np.zeros(0)).tolist() == []


def test_batch_metrics_mirror_curve_metrics():
    rng = np.random.default_rng(0)
    t = np.arange(1, 13) * 64.0
    curves = rng.random((200, 12))
    curves[rng.random((200, 12)) < 0.2] = np.nan
    curves[:20] = np.sort(curves[:20], axis=1)[:, ::-1]  # some that halve, some that do not
    curves[5] = np.nan
    curves[6, :3] = 0.0
    batch = batch_curve_metrics(t, curves)
    for row, got in zip(curves, batch, strict=True):
        ref = curve_metrics(t, row)
        assert got[0] == pytest.approx(ref["auc"], nan_ok=True)
        assert got[2] == pytest.approx(ref["final"], nan_ok=True)
        if not np.isfinite(row).any() or ref["a_first"] == 0:
            assert math.isnan(got[1])
        elif ref["half_life_censored"]:
            assert got[1] == t[np.isfinite(row)][-1]
        else:
            assert got[1] == ref["half_life"]
        # the half-life of the mean curve; auc and final are the per-sample values' means
        values = np.array([[got[0], got[2]]])
        assert point_metrics(t, row[None], values) == pytest.approx(got, nan_ok=True)


def test_degenerate_inputs():
    assert compare_policies(None, None).empty
    empty = compare_policies(windows_frame(_conds()).iloc[:0], None)
    assert empty.empty and list(empty.columns) == COLUMNS
    undetermined = windows_frame(_conds(), passed=lambda *a: None)
    assert compare_policies(undetermined, None).empty
    one = compare_policies(windows_frame(_conds(policies=("none",)), n_samples=1), None)
    assert set(one["item"]) == {"fr", "all"} and one["delta"].eq(0).all()


def test_deterministic_and_independent_of_other_policies():
    rng = np.random.default_rng(9)
    windows = windows_frame(_conds(), passed=lambda *a: bool(rng.random() < 0.5))
    a = compare_policies(windows, None)
    pd.testing.assert_frame_equal(a, compare_policies(windows, None))
    fewer = compare_policies(windows[windows["policy"] != "periodic-64-user"], None)
    row_a, row_b = _get(a, "fr", "restate", "auc"), _get(fewer, "fr", "restate", "auc")
    assert row_a["delta_low"] == row_b["delta_low"]


def test_half_life_means_one_thing_per_name_across_summary_and_policies():
    """summary.csv's half_life is censored (NaN + flag); policies.csv's lower bound has its own
    name, and both agree wherever the curve does halve."""
    from harness.analysis.summary import summarise_conditions

    conds = _conds(policies=("none", "restate"))
    # none: passes in windows 0-2 only, so it halves at window 3; restate: always passes
    windows = windows_frame(conds, passed=lambda m, i, p, s, w: p == "restate" or w < 3)
    tokens = tokens_frame(conds)
    policies = compare_policies(windows, tokens)
    summary = summarise_conditions(None, windows, tokens, []).set_index("policy")
    assert "half_life" not in set(policies["metric"])
    capped = _get(policies, "fr", "restate", "half_life_capped")["value"]
    assert summary.loc["restate", "half_life_censored"]
    assert math.isnan(summary.loc["restate", "half_life"]) and capped == 7 * 64 + 1
    halved = _get(policies, "fr", "none", "half_life_capped")["value"]
    assert not summary.loc["none", "half_life_censored"]
    assert summary.loc["none", "half_life"] == halved == 3 * 64 + 1


def test_two_runs_samples_stay_apart_when_paired():
    """Two runs' windows in one frame (run_id a and b, samples 0-3 each): 8 pairs, not 4
    merged samples (policies.py kept run_id and seed blank before)."""
    conds = _conds(policies=("none", "restate"))
    one = windows_frame(conds, passed=lambda m, i, p, s, w: p == "restate" or s % 2 == 0)
    both = pd.concat([one.assign(run_id="a"), one.assign(run_id="b")], ignore_index=True)
    auc = _get(compare_policies(both, None), "fr", "restate", "auc")
    assert auc["n"] == 8
    assert auc["delta"] == pytest.approx(0.5)


def test_a_policy_run_on_fewer_items_is_compared_on_those_items_and_samples():
    """Issue 56: `none` on two items, `adaptive` on one with replies identical to none's. The
    chart and the frontier read the paired gain on the shared item (0), never adaptive's own
    AUC (its item's) against none's mean over both items (0.75 vs 0.5 before)."""
    from harness.report.plots import pareto_figure

    conds = [("m", "easy", "none"), ("m", "hard", "none"), ("m", "hard", "adaptive")]
    windows = windows_frame(conds, passed=lambda m, i, p, s, w: i == "easy" or w < 4)
    out = compare_policies(windows, tokens_frame(conds, injected=lambda p: 0))
    pooled = _get(out, "all", "adaptive", "auc")
    assert (pooled["value"], pooled["none_value"], pooled["delta"]) == (0.5, 0.5, 0.0)
    assert pooled["delta_low"] <= 0 <= pooled["delta_high"]
    fig = pareto_figure(out)
    (trace,) = [t for t in fig.data if t.mode == "markers+text"]
    gains = dict(zip(trace.text, trace.y, strict=True))
    assert gains == {"none": 0.0, "adaptive": 0.0}
    assert _get(out, "all", "none", "auc")["value"] == 0.75  # none's own mean: not charted


def test_each_gain_carries_its_policy_s_quality_and_the_pooled_row_the_worst_item_s():
    conds = _conds(items=("fr", "de"), policies=("none", "restate"))
    windows = windows_frame(conds, passed=lambda m, i, p, s, w: p == "restate")
    quality = pd.DataFrame([
        dict(model="m", item=i, policy=p, perplexity_ratio=r, degeneration_delta=d,
             quality_holds=h)
        for i, p, r, d, h in (
            ("fr", "none", 1.0, 0.0, True), ("de", "none", 1.0, 0.0, True),
            ("fr", "restate", 1.2, 0.01, True), ("de", "restate", 2.5, 0.03, False),
        )
    ])  # fmt: skip
    out = with_quality(compare_policies(windows, tokens_frame(conds)), quality)
    assert list(out.columns) == COLUMNS
    fr, de = _get(out, "fr", "restate", "auc"), _get(out, "de", "restate", "auc")
    assert (fr["perplexity_ratio"], bool(fr["quality_holds"])) == (1.2, True)
    assert (de["perplexity_ratio"], bool(de["quality_holds"])) == (2.5, False)
    pooled = _get(out, "all", "restate", "auc")
    assert pooled["perplexity_ratio"] == 2.5 and bool(pooled["quality_holds"]) is False
    assert pooled["degeneration_delta"] == pytest.approx(0.02)
    # a run without quality.csv keeps policies.csv as it was, the quality cells empty
    plain = compare_policies(windows, tokens_frame(conds))
    assert math.isnan(_get(plain, "fr", "restate", "auc")["perplexity_ratio"])
