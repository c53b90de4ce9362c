"""alpha <-> behaviour correlation: known relations, CIs, permutation p, degenerate input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, spearmanr

from harness.analysis.correlation import (
    COLUMNS,
    correlate,
    correlate_alpha_behaviour,
    spearman_pearson,
)


def test_perfect_monotone_relation():
    x = np.linspace(0.2, 1.5, 10)
    row = correlate(x, np.exp(3 * x), n_perm=10_000)
    assert row["spearman"] == pytest.approx(1.0)
    # a perfect rank order of 10 conditions: not the degenerate [1, 1]
    assert 0.85 < row["spearman_low"] < 0.99 and row["spearman_high"] == pytest.approx(1)
    assert row["spearman_method"] == "fisher-z (bonett-wright)"
    assert row["pearson"] < 1.0  # monotone but not linear
    assert row["perm_p"] < 0.01
    assert row["perm_p"] == pytest.approx(1 / 10_001)  # no permutation of 10 values reaches 1


def test_negative_relation_is_two_sided():
    x = np.arange(12.0)
    row = correlate(x, -x)
    assert row["spearman"] == pytest.approx(-1.0) and row["pearson"] == pytest.approx(-1.0)
    assert row["perm_p"] < 0.01


def test_values_match_scipy_and_ci_covers_estimate():
    rng = np.random.default_rng(5)
    x = rng.normal(size=40)
    y = 0.6 * x + rng.normal(size=40)
    row = correlate(x, y)
    assert row["pearson"] == pytest.approx(pearsonr(x, y)[0])
    assert row["spearman"] == pytest.approx(spearmanr(x, y)[0])
    assert row["spearman_low"] < row["spearman"] < row["spearman_high"]
    assert row["pearson_low"] < row["pearson"] < row["pearson_high"]
    assert row["perm_p"] < 0.01


def test_independent_values_give_a_large_p():
    rng = np.random.default_rng(11)
    row = correlate(rng.normal(size=30), rng.normal(size=30))
    assert row["perm_p"] > 0.1
    assert row["spearman_low"] < 0 < row["spearman_high"]


def test_small_exact_permutation_p():
    # 4 conditions, perfect order: 2 of the 24 pairings reach |rho| = 1, all 24 enumerated.
    row = correlate(np.arange(4.0), np.arange(4.0), n_perm=20_000, seed=1)
    assert row["perm_p"] == pytest.approx(2 / 24)


def test_ci_covers_the_known_population_correlation():
    rho = 0.6
    rng = np.random.default_rng(7)
    x, y = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=200).T
    row = correlate(x, y)
    assert row["pearson_low"] < rho < row["pearson_high"]
    spearman_of_normal = 6 / np.pi * np.arcsin(rho / 2)  # 0.582 for a bivariate normal
    assert row["spearman_low"] < spearman_of_normal < row["spearman_high"]
    assert row["pearson_high"] - row["pearson_low"] < 0.3  # 200 conditions pin it down
    assert row["perm_p"] < 0.001


def test_tied_conditions_still_give_an_interval():
    # alpha is shared by the policies of one item: many resamples have a constant x, which
    # have no correlation and are left out of the interval instead of making it NaN.
    x = np.repeat([0.4, 0.6, 0.8], 2)
    row = correlate(x, np.array([0.9, 0.8, 0.7, 0.75, 0.5, 0.4]))
    assert -1.0 <= row["spearman_low"] <= row["spearman"] <= row["spearman_high"] < 0
    assert -1.0 <= row["pearson_low"] <= row["pearson"] <= row["pearson_high"] < 0


@pytest.mark.parametrize(
    "x, y, n",
    [
        ([1.0, 2.0], [1.0, 2.0], 2),  # n < 3
        ([1.0, 2.0, 3.0, 4.0], [5.0, 5.0, 5.0, 5.0], 4),  # constant y
        ([0.3, 0.3, 0.3], [1.0, 2.0, 3.0], 3),  # constant x
        ([1.0, np.nan, 3.0, np.inf], [1.0, 2.0, 3.0, 4.0], 2),  # non-finite pairs dropped
        ([], [], 0),
    ],
)
def test_degenerate_rows_are_nan(x, y, n):
    row = correlate(np.array(x), np.array(y))
    assert row["n"] == n
    assert all(math.isnan(row[c]) for c in COLUMNS[3:] if not c.endswith("_method"))
    assert row["spearman_method"].startswith("none (") and row["pearson_method"].startswith("none")


def test_vectorised_coefficients_are_nan_for_constant_rows():
    x = np.array([[1.0, 2.0, 3.0], [0.1, 0.1, 0.1]])
    rho, r = spearman_pearson(x, np.array([[2.0, 4.0, 7.0], [1.0, 2.0, 3.0]]))
    assert r[0] == pytest.approx(pearsonr([1, 2, 3], [2, 4, 7])[0]) and rho[0] == pytest.approx(1)
    assert math.isnan(r[1]) and math.isnan(rho[1])


def _summary_frame():
    alpha = np.array([0.4, 0.6, 0.8, 1.0, 1.2, np.nan])
    return pd.DataFrame(
        {
            "model": "m",
            "item": list("abcdef"),
            "policy": "none",
            "alpha_mean": alpha,
            "alpha_mean_low": alpha - 0.1,
            "alpha_L15": alpha[::-1],
            "alpha_L15_high": alpha,
            "auc": 1 - alpha / 2,
            "final": [0.5] * 6,
            "half_life": [100, np.nan, 300, 400, np.nan, 600],
        }
    )


def test_table_over_summary_columns():
    out = correlate_alpha_behaviour(_summary_frame(), n_perm=2000)
    assert list(out.columns) == COLUMNS
    assert out[["x", "y"]].values.tolist() == [
        [x, y] for x in ("alpha_mean", "alpha_L15") for y in ("auc", "final", "half_life")
    ]
    first = out.iloc[0]
    assert first["n"] == 5 and first["spearman"] == pytest.approx(-1.0)
    assert first["pearson"] == pytest.approx(-1.0)
    assert math.isnan(out.iloc[1]["spearman"])  # final is constant
    assert out.iloc[2]["n"] == 3  # censored half-lives (NaN) drop out


def test_table_deterministic_and_handles_empty_and_missing_columns():
    frame = _summary_frame()
    a = correlate_alpha_behaviour(frame, n_perm=500, seed=4)
    b = correlate_alpha_behaviour(frame, n_perm=500, seed=4)
    pd.testing.assert_frame_equal(a, b)
    empty = correlate_alpha_behaviour(frame.iloc[:0])
    assert len(empty) == 6 and empty["n"].eq(0).all()
    missing = correlate_alpha_behaviour(frame[["alpha_mean"]], ys=["auc"])
    assert len(missing) == 1 and math.isnan(missing.loc[0, "spearman"])
    none = correlate_alpha_behaviour(pd.DataFrame({"auc": [1.0]}))
    assert none.empty and list(none.columns) == COLUMNS


def test_correlation_interval_needs_four_conditions():
    from harness.stats import correlation_interval

    three = correlation_interval(0.5, 3, kind="pearson")
    assert math.isnan(three.low) and three.method == "none (n < 4)"
    # Fisher z by hand: tanh(atanh(0.5) -+ 1.96 / sqrt(17))
    twenty = correlation_interval(0.5, 20, kind="pearson")
    half = 1.959964 / math.sqrt(17)
    assert twenty.low == pytest.approx(math.tanh(math.atanh(0.5) - half), rel=1e-5)
    assert twenty.high == pytest.approx(math.tanh(math.atanh(0.5) + half), rel=1e-5)
    wider = correlation_interval(0.5, 20, kind="spearman")
    assert wider.low < twenty.low and wider.high > twenty.high


def test_permutation_p_values_are_holm_adjusted_and_the_card_says_cannot_tell():
    """Six (x, y) pairs tested at once: each perm_p is Holm-adjusted over the finite ones, and
    the report's card decides "correlates" on the adjusted value."""
    from harness.report.mechanism_cards import correlation_card
    from harness.stats.adjust import holm

    out = correlate_alpha_behaviour(_summary_frame(), n_perm=2000)
    finite = out["perm_p"].notna()
    assert out.loc[finite, "perm_p_holm"].tolist() == pytest.approx(
        holm(out.loc[finite, "perm_p"].to_numpy()).tolist()
    )
    row = {"x": "alpha_mean", "y": "auc", "n": 5, "spearman": 0.9, "spearman_low": 0.1}
    row |= {"spearman_high": 1.0, "spearman_method": "m", "perm_p": 0.03, "perm_p_holm": 0.18}
    sentence = correlation_card(pd.DataFrame([row])).sentences[0]
    assert "cannot tell whether they correlate" in sentence
    decided = correlation_card(pd.DataFrame([{**row, "perm_p_holm": 0.01}])).sentences[0]
    assert "they correlate at 0.05" in decided
