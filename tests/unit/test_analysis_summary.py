"""summary.csv per condition: alpha from pooled fits, adherence metrics, token overhead."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.summary import (
    default_layers,
    summarise_conditions,
    summary_columns,
    token_frame,
    window_verdicts,
)

from .test_analysis_frames import fits_frame, tokens_frame, windows_frame

NONE = ("m", "fr", "none")
RESTATE = ("m", "fr", "restate")


def _passed(model, item, policy, sample, window):
    if policy == "restate":
        return True
    if window == 5:
        return None  # undetermined: left out of a(t)
    return window < 2


def _summary(**kw):
    conds = [NONE, RESTATE]
    fits = fits_frame([NONE], lambda m, i, p, layer: 0.5 * layer)
    windows = windows_frame(conds, passed=_passed)
    tokens = tokens_frame(conds, injected=lambda p: 20 if p == "restate" else 0, restated=4)
    return summarise_conditions(fits, windows, tokens, **kw)


def test_columns_are_the_schema_and_one_row_per_condition():
    out = _summary(layers=[2, 4])
    assert list(out.columns) == summary_columns([2, 4])
    assert list(out.columns[:6]) == [
        "model", "item", "policy", "alpha_mean", "alpha_mean_low", "alpha_mean_high",
    ]  # fmt: skip
    assert out[["model", "item", "policy"]].values.tolist() == [list(NONE), list(RESTATE)]


def test_alpha_mean_over_layers_one_to_L_and_propagated_ci():
    row = _summary(layers=[2, 4]).iloc[0]
    # rel_l2 alphas 0.5, 1.0, 1.5, 2.0 at layers 1..4 (layer 0 NaN, l2 rows must be ignored)
    assert row["alpha_mean"] == pytest.approx(1.25)
    assert row["alpha_mean_low"] == pytest.approx(1.15)  # mean of ci_low = alpha - 0.1
    assert row["alpha_mean_high"] == pytest.approx(1.45)
    assert (row["alpha_L2"], row["alpha_L2_low"], row["alpha_L2_high"]) == pytest.approx(
        (1.0, 0.9, 1.2)
    )
    assert row["alpha_L4"] == pytest.approx(2.0)


def test_condition_without_divergence_keeps_behaviour_and_nan_alpha():
    row = _summary(layers=[2]).iloc[1]
    assert row["policy"] == "restate"
    assert math.isnan(row["alpha_mean"]) and math.isnan(row["alpha_L2"])
    assert row["auc"] == 1.0 and row["final"] == 1.0
    assert bool(row["half_life_censored"]) and math.isnan(row["half_life"])
    assert row["survival_median"] == math.inf and row["survival_censored_share"] == 1.0


def test_adherence_metrics_follow_the_windows():
    row = _summary(layers=[2]).iloc[0]
    # 8 windows, window 5 undetermined -> 7 points, windows 0-1 pass: AUC 2/7.
    assert row["auc"] == pytest.approx(2 / 7)
    # 4 samples of AUC 2/7 each: the betting interval, valid at n = 4, is wide
    assert row["auc_low"] < 2 / 7 < row["auc_high"] and row["auc_method"] == "betting"
    assert row["auc_n"] == row["n"] == 4
    # final: 0 of 4 samples pass in the last quarter -> exact binomial
    assert row["final_method"] == "clopper-pearson"
    assert row["final_high"] == pytest.approx(1 - 0.025**0.25)
    assert row["half_life"] == 129 and not row["half_life_censored"]  # window 2 starts at 129
    assert row["final"] == 0.0
    assert row["survival_median"] == 129 and row["survival_censored_share"] == 0.0


def test_token_counts_and_overhead():
    out = _summary(layers=[2])
    none, restate = out.iloc[0], out.iloc[1]
    assert none["tokens_generated"] == 4 * 512 and none["tokens_injected"] == 0
    assert none["token_overhead"] == pytest.approx(16 / 2048)
    assert restate["tokens_injected"] == 80 and restate["tokens_restated"] == 16
    assert restate["token_overhead"] == pytest.approx(96 / 2048)


def test_default_layers_are_middle_and_last():
    fits = fits_frame([NONE], lambda *a: 1.0, n_layers=30)
    assert default_layers(fits) == [15, 30]
    out = summarise_conditions(fits, None, None)
    assert "alpha_L15" in out.columns and "alpha_L30_high" in out.columns


def test_single_pair_fit_used_when_no_pooled_row():
    fits = fits_frame([NONE], lambda m, i, p, layer: 2.0, pooled=False)
    out = summarise_conditions(fits, None, None, layers=[1])
    assert out.loc[0, "alpha_mean"] == pytest.approx(2.0)


def test_untrained_twin_rows_are_conditions_too():
    twin = ("untrained:m", "fr", "none")
    fits = fits_frame([NONE, twin], lambda m, *a: 0.1 if m.startswith("untrained") else 1.0)
    out = summarise_conditions(fits, windows_frame([NONE]), tokens_frame([NONE]), layers=[1])
    assert out["model"].tolist() == ["m", "untrained:m"]
    assert out.loc[1, "alpha_mean"] == pytest.approx(0.1) and math.isnan(out.loc[1, "auc"])


def test_check_rows_without_all_rows_give_the_same_verdicts():
    with_all = windows_frame([NONE], passed=_passed, with_check_rows=True)
    only_checks = with_all[with_all["check"] != "all"]
    a, b = window_verdicts(with_all), window_verdicts(only_checks)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 4 * 7 and a["passed"].sum() == 4 * 2


def test_csv_round_trip_of_passed_column(tmp_path):
    windows = windows_frame([NONE], passed=_passed)
    windows.to_csv(tmp_path / "w.csv", index=False)
    back = pd.read_csv(tmp_path / "w.csv")  # passed: True/False/NaN as read from disk
    a = summarise_conditions(None, windows, None, layers=[])
    b = summarise_conditions(None, back, None, layers=[])
    pd.testing.assert_frame_equal(a, b)


def test_degenerate_inputs_give_empty_or_nan_not_errors():
    empty = summarise_conditions(None, None, None, layers=[3])
    assert empty.empty and list(empty.columns) == summary_columns([3])
    no_rows = summarise_conditions(
        pd.DataFrame(columns=["model"]), windows_frame([NONE]).iloc[:0], None, layers=[3]
    )
    assert no_rows.empty
    nan_fits = fits_frame([NONE], lambda *a: np.nan)
    out = summarise_conditions(nan_fits, None, None, layers=[2])
    assert len(out) == 1 and math.isnan(out.loc[0, "alpha_mean"])
    zero_gen = summarise_conditions(None, None, tokens_frame([NONE], generated=0), layers=[])
    assert math.isnan(zero_gen.loc[0, "token_overhead"])


def test_deterministic_for_a_seed():
    pd.testing.assert_frame_equal(_summary(layers=[2]), _summary(layers=[2]))


def test_token_frame_from_records():
    records = [
        {"model": "m", "item": "fr", "policy": "none", "seed": 1, "sample": 0,
         "tokens": {"generated": 10, "injected": 2, "restated": 1, "prompt": 5}},
    ]  # fmt: skip
    frame = token_frame(records)
    assert frame.iloc[0][["generated", "injected", "restated"]].tolist() == [10, 2, 1]


def test_alpha_carries_the_fits_units_and_method_not_the_samples():
    # the terminal prints `alpha [low, high] n=...`: the n is the pairs behind the fit (2
    # probed of 4 samples), never the adherence samples
    fits = fits_frame([NONE], lambda m, i, p, layer: 0.5 * layer).assign(
        n=2, method="bootstrap over 2 pairs (curve noise)"
    )
    windows = windows_frame([NONE], passed=_passed)
    row = summarise_conditions(fits, windows, None, layers=[2]).iloc[0]
    assert row["alpha_mean_n"] == 2 and row["n"] == 4
    assert row["alpha_mean_method"] == "bootstrap over 2 pairs (curve noise)"
    bare = summarise_conditions(fits.drop(columns=["n", "method"]), windows, None, layers=[2])
    assert pd.isna(bare.iloc[0]["alpha_mean_n"]) and bare.iloc[0]["alpha_mean"] == 1.25
