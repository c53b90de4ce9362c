"""carried.csv (prompt or text?) and linkage.csv (alpha vs behaviour within items) on
hand-made frames whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.carried import (
    arm_passes,
    carried_frame,
    dependence_interval,
    settled_from,
)
from harness.analysis.linkage import linkage_frame, sample_alpha_auc, within_items

MODEL, ITEM, POLICY = "m", "fr", "none"


def _forks(verdicts: dict[tuple[int, int, str], list[bool | None]]) -> pd.DataFrame:
    """verdicts[(sample, fork_t, arm)] = passed per draw, one language check."""
    rows = []
    for (sample, t, arm), draws in verdicts.items():
        for draw, passed in enumerate(draws):
            rows.append(
                dict(model=MODEL, item=ITEM, policy=POLICY, sample=sample, fork_t=t, arm=arm,
                     draw=draw, check="language:fr", scope="window",
                     value=np.nan if passed is None else float(passed), passed=passed, reason="")
            )  # fmt: skip
    return pd.DataFrame(rows)


def _lengths(*lengths: int) -> dict:
    return {(MODEL, ITEM, POLICY, s): n for s, n in enumerate(lengths)}


def test_prompt_dependence_then_carried_by_text():
    verdicts = {}
    for s in range(8):  # 8 records: at 0 the prompt decides every draw, at 64 nothing does
        verdicts |= {(s, 0, "with"): [True, True], (s, 0, "without"): [False, False]}
        verdicts |= {(s, 64, "with"): [True, True], (s, 64, "without"): [True, True]}
    carried = carried_frame(_forks(verdicts), _lengths(*[100] * 8), [0, 64])
    first, second = carried.to_dict("records")
    assert (first["adherence_with"], first["adherence_without"], first["dependence"]) == (1, 0, 1)
    # 8 records each +1: exact binomial on [-1, 1], at the family level of the run's 2 rows
    # (each at 1 - 0.05 / 2, 0.0125 a side)
    assert first["dependence_low"] == pytest.approx(-1 + 2 * 0.0125 ** (1 / 8))
    assert first["dependence_high"] == 1 and first["method"] == "clopper-pearson"
    assert (first["records"], first["draws"], first["n"]) == (8, 2, 8)
    assert second["dependence"] == 0 and second["dependence_low"] < 0 < second["dependence_high"]
    # 8 records of 0 give [-0.41, 0.41]: on 0, but not within +-0.25, so it cannot tell
    assert (first["verdict"], second["verdict"]) == ("depends", "cannot tell")
    assert math.isnan(settled_from(carried))
    # 24 records of 0, within the band at the family level: from 64 on the text carries it
    more = {(s + 8 * k, t, arm): v for (s, t, arm), v in verdicts.items() for k in (1, 2)}
    sixteen = carried_frame(_forks(verdicts | more), _lengths(*[100] * 24), [0, 64])
    assert sixteen["verdict"].tolist() == ["depends", "within band"]
    assert settled_from(sixteen) == 64
    # 2 records x 2 draws (the quickstart's) cannot tell: no degenerate [1, 1]
    two = carried_frame(
        _forks({k: v for k, v in verdicts.items() if k[0] < 2}), _lengths(100, 100), [0]
    )
    assert two.loc[0, "dependence_low"] < 0 and two.loc[0, "n"] == 2


def test_dependence_ci_resamples_paired_draws():
    forks = _forks(
        {
            (0, 0, "with"): [True, False], (0, 0, "without"): [False, False],
            (1, 0, "with"): [True, True], (1, 0, "without"): [True, False],
        }
    )  # fmt: skip
    row = carried_frame(forks, _lengths(50, 50), [0]).iloc[0]
    assert row["adherence_with"] == pytest.approx(0.75)
    assert row["adherence_without"] == pytest.approx(0.25)
    assert row["dependence"] == pytest.approx(0.5)
    # the unit is the record: two records with dependence 0.5 each
    assert row["n"] == 2 and row["method"] == "betting"
    assert -1 <= row["dependence_low"] < 0.5 < row["dependence_high"] <= 1


def test_dependence_ci_contains_truth_for_a_constant_shift():
    rng = np.random.default_rng(1)
    with_arm = (rng.random((40, 8)) < 0.8).astype(float)
    without_arm = (rng.random((40, 8)) < 0.3).astype(float)
    ci = dependence_interval(with_arm, without_arm)
    point = with_arm.mean() - without_arm.mean()
    assert ci.low < point < ci.high and ci.estimate == pytest.approx(point) and ci.n == 40
    assert ci.low < 0.5 < ci.high and ci.width < 0.35


def test_position_past_a_record_is_skipped_with_a_reason():
    forks = _forks({(0, 80, "with"): [True], (0, 80, "without"): [False]})
    carried = carried_frame(forks, _lengths(100, 60), [80, 200])
    at80, at200 = carried.to_dict("records")
    assert at80["records"] == 1 and at80["dependence"] == 1
    assert (
        at80["reason"]
        == "past the continuation of 1 of 2 records (longest: 100 tokens); forked on the rest"
    )
    assert at200["records"] == 0 and math.isnan(at200["dependence"])
    assert at200["reason"] == "past the continuation of every record (longest: 100 tokens)"


def test_undecided_draws_are_left_out_and_response_checks_ignored_beside_window_checks():
    forks = _forks({(0, 0, "with"): [True, None], (0, 0, "without"): [None, False]})
    extra = forks.assign(check="ends_with", scope="response", passed=False)
    passes = arm_passes(pd.concat([forks, extra]))
    with_arm = passes[passes["arm"] == "with"]["passed"].tolist()
    assert with_arm[0] == 1.0 and math.isnan(with_arm[1])
    row = carried_frame(pd.concat([forks, extra]), _lengths(10), [0]).iloc[0]
    assert (row["adherence_with"], row["adherence_without"]) == (1.0, 0.0)


def test_kl_at_the_fork_is_the_first_token_the_arms_choose():
    forks = _forks({(0, 8, "with"): [True], (0, 8, "without"): [True]})
    nexttoken = pd.DataFrame(
        dict(model=MODEL, item=ITEM, policy=POLICY, sample=0, t=[8, 9, 10],
             delta_logp=[0.5, -0.2, 0.1], kl=[0.3, 0.04, 0.01])
    )  # fmt: skip
    row = carried_frame(forks, _lengths(20), [8], nexttoken).iloc[0]
    assert row["kl"] == pytest.approx(0.04) and row["abs_delta_logp"] == pytest.approx(0.2)


def _carried(bounds: list[tuple[int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [dict(fork_t=t, dependence_low=lo, dependence_high=hi) for t, lo, hi in bounds]
    )


def test_settled_needs_the_ci_to_stay_within_the_band():
    assert settled_from(_carried([(0, 0.2, 0.6), (32, -0.1, 0.2), (64, 0.1, 0.3)])) is not None
    assert math.isnan(settled_from(_carried([(0, 0.2, 0.6), (32, -0.1, 0.2), (64, 0.1, 0.3)])))
    assert settled_from(_carried([(0, 0.2, 0.6), (32, -0.1, 0.2), (64, -0.2, 0.1)])) == 32
    assert settled_from(_carried([(0, -0.1, 0.1)])) == 0
    # the quickstart's 2 records: [-0.68, 1] contains 0 but says nothing: never settled
    assert math.isnan(settled_from(_carried([(0, -0.68, 1.0), (64, -1.0, 1.0)])))


def test_fork_sentence_cannot_tell_where_the_interval_leaves_the_band():
    from harness.report.carried import carried_sentence

    rows = pd.DataFrame(
        dict(fork_t=[0, 64], adherence_with=[1.0, 0.5], adherence_without=[0.0, 0.5],
             dependence=[1.0, 0.0], dependence_low=[0.08, -0.74], dependence_high=[1.0, 0.74],
             n=[6, 4], method="betting")
    )  # fmt: skip
    text = carried_sentence("none", rows)
    assert text == (
        "none: cannot tell whether removing the system prompt still changes behaviour from the "
        "last fork (t = 64) on: with n = 4 records the dependence +0.00 [-0.74, +0.74] contains "
        "0 but reaches beyond ±0.25. At t = 0 the prompt does change behaviour."
    )
    assert "no longer" not in text


def _fits_and_windows(alpha_auc: dict[str, list[tuple[float, float]]]):
    fits, windows = [], []
    for item, pairs in alpha_auc.items():
        for sample, (alpha, auc) in enumerate(pairs):
            pair = f"{item}/none/{sample}"
            for layer in (1, 2):
                fits.append(dict(model=MODEL, item=item, policy="none", pair=pair, layer=layer,
                                 metric="rel_l2", alpha=alpha + (layer - 1.5) * 0.01))  # fmt: skip
            for window in range(4):
                windows.append(dict(run_id="r", model=MODEL, task="t", item=item, policy="none",
                                    seed=0, sample=sample, window=window, t_start=window * 8 + 1,
                                    t_gen_start=window * 8 + 1, t_end=window * 8 + 8,
                                    scope="window", check="c",
                                    passed=window < auc * 4))  # fmt: skip
    fits.append(dict(model=MODEL, item="a", policy="none", pair="all", layer=1, metric="rel_l2",
                     alpha=9.0))  # fmt: skip
    return pd.DataFrame(fits), pd.DataFrame(windows)


def test_sample_alpha_is_the_mean_over_layers_and_auc_the_mean_window_pass():
    fits, windows = _fits_and_windows({"a": [(0.3, 0.5), (0.5, 1.0)]})
    samples = sample_alpha_auc(fits, windows).sort_values("sample")
    assert samples["alpha"].tolist() == pytest.approx([0.3, 0.5])
    assert samples["auc"].tolist() == pytest.approx([0.5, 1.0])


def test_within_item_coefficients_cancel_where_the_cross_item_one_would_not():
    # item a: alpha up, adherence up; item b: alpha up, adherence down. Pooled, b's higher
    # alphas and higher adherence would show a positive link; within items the mean is 0.
    up = [(0.1, 0.25), (0.2, 0.5), (0.3, 0.75), (0.4, 1.0)]
    down = [(0.5, 1.0), (0.6, 0.75), (0.7, 0.5), (0.8, 0.25)]
    fits, windows = _fits_and_windows({"a": up, "b": down})
    rows = within_items(sample_alpha_auc(fits, windows), level=0.95)
    by = {(r["kind"], r["item"]): r for r in rows}
    assert by[("alpha_auc_item", "a")]["spearman"] == pytest.approx(1.0)
    assert by[("alpha_auc_item", "b")]["spearman"] == pytest.approx(-1.0)
    within = by[("alpha_auc_within", "")]
    assert within["spearman"] == pytest.approx(0.0) and within["items"] == 2 and within["n"] == 8
    assert within["spearman_low"] <= 0 <= within["spearman_high"]


def test_linkage_keeps_the_cross_condition_coefficient_beside_and_kl_vs_dependence():
    fits, windows = _fits_and_windows({"a": [(0.1, 0.25), (0.2, 0.5), (0.3, 1.0)]})
    correlation = pd.DataFrame(
        [dict(x="alpha_mean", y="auc", n=12, spearman=0.7, spearman_low=0.2, spearman_high=0.8)]
    )
    # 2 forked records x 4 positions: 8 points that rest on 2 records
    points = pd.DataFrame(
        dict(model=MODEL, item="a", policy="none", sample=[0] * 4 + [1] * 4,
             fork_t=[0, 32, 64, 128] * 2, kl=[0.3, 0.05, 0.02, 0.01, 0.31, 0.06, 0.03, 0.02],
             dependence=[0.5, 0.2, 0.0, -0.1, 0.6, 0.3, 0.1, -0.05])
    )  # fmt: skip
    link = linkage_frame(fits, windows, correlation, points)
    kinds = link.set_index("kind")
    assert kinds.loc["alpha_auc_across", "spearman"] == 0.7
    assert kinds.loc["alpha_auc_item", "spearman"] == pytest.approx(1.0)
    kl = kinds.loc["kl_dependence_item"]
    assert kl["n"] == 8 and kl["spearman"] == pytest.approx(spearman_of(points))
    # the 8 points are 2 records: no interval (Fisher-z over 8 would treat them as independent)
    assert math.isnan(kl["spearman_low"])
    assert kl["method"] == "none (2 records < 4: the points are not independent)"
    # 3 samples: no interval, and the method says why
    assert kinds.loc["alpha_auc_item", "method"] == "none (n < 3)" or math.isnan(
        kinds.loc["alpha_auc_item", "spearman_low"]
    )


def spearman_of(points: pd.DataFrame) -> float:
    from scipy import stats

    return float(stats.spearmanr(points["kl"], points["dependence"]).statistic)


def test_kl_dependence_resamples_records_with_all_their_positions():
    from harness.analysis.linkage import kl_dependence

    rng = np.random.default_rng(1)
    rows = [
        dict(model=MODEL, item="a", policy="none", sample=s, fork_t=t, kl=k, dependence=k + e)
        for s in range(6)
        for t, k, e in zip((0, 64, 128), rng.random(3), rng.normal(0, 0.1, 3), strict=True)
    ]
    (row,) = kl_dependence(pd.DataFrame(rows), level=0.95)
    assert row["method"] == "percentile-bootstrap over 6 records (approximate)"
    assert row["spearman_low"] <= row["spearman"] <= row["spearman_high"] and row["n"] == 18


def test_alpha_auc_within_an_item_resamples_sample_indices_shared_by_policies():
    from harness.analysis.linkage import within_items

    # 2 sample indices x 4 policies: 8 points, 2 independent units (shared seeds)
    samples = pd.DataFrame(
        dict(model=MODEL, item="a", policy=[p for p in "wxyz" for _ in range(2)],
             sample=[0, 1] * 4, alpha=np.linspace(0.1, 0.8, 8), auc=np.linspace(0.2, 0.9, 8))
    )  # fmt: skip
    (item, _within) = within_items(samples, level=0.95)
    assert item["n"] == 8 and item["spearman"] == pytest.approx(1.0)
    assert item["method"] == "none (2 sample indices < 4: the points are not independent)"


def test_correlation_across_conditions_resamples_and_permutes_items():
    from harness.analysis.correlation import correlate_alpha_behaviour

    rng = np.random.default_rng(2)
    summary = pd.DataFrame(
        dict(model="m", item=[i for i in "abc" for _ in range(4)],
             policy=["none", "p", "q", "r"] * 3, alpha_mean=rng.random(12), auc=rng.random(12))
    )  # fmt: skip
    row = correlate_alpha_behaviour(summary, ys=("auc",)).iloc[0]
    assert row["n"] == 12  # conditions, but 3 items: no interval, and an exact block p >= 1/6
    assert row["spearman_method"] == "none (3 items < 4: the points are not independent)"
    assert math.isnan(row["spearman_low"]) and row["perm_p"] >= 1 / 6
    six = pd.concat([summary, summary.assign(item=summary["item"] + "2")], ignore_index=True)
    six["auc"] = rng.random(24)
    row = correlate_alpha_behaviour(six, ys=("auc",)).iloc[0]
    assert row["spearman_method"] == "percentile-bootstrap over 6 items (approximate)"
    assert row["spearman_low"] <= row["spearman"] <= row["spearman_high"]


def test_prompt_independent_text_never_reads_depends_over_a_runs_fork_rows():
    """Arms that do not depend on the prompt (each draw passes with 0.5 on both arms; the
    per-row gaps between them, often +-0.02 to +-0.2, are noise): over 12 rows (3 items x 4
    fork positions, 8 records x 2 draws each, intervals at the run's family level) "depends"
    is said in no row in >= 95 % of runs: "cannot tell" instead."""
    rng = np.random.default_rng(7)
    items, positions, runs = ("a", "b", "c"), [0, 16, 32, 48], 40
    lengths = {(MODEL, i, POLICY, s): 100 for i in items for s in range(8)}
    said = 0
    for _ in range(runs):
        passed = rng.random((len(items), len(positions), 8, 2, 2)) < 0.5
        rows = [
            dict(model=MODEL, item=item, policy=POLICY, sample=s, fork_t=t, arm=arm, draw=d,
                 check="c", scope="window", value=float(ok), passed=bool(ok), reason="")
            for a, item in enumerate(items) for b, t in enumerate(positions) for s in range(8)
            for c, arm in enumerate(("with", "without")) for d in range(2)
            for ok in [passed[a, b, s, c, d]]
        ]  # fmt: skip
        carried = carried_frame(pd.DataFrame(rows), lengths, positions)
        assert set(carried["verdict"]) <= {"depends", "cannot tell"}
        said += bool((carried["verdict"] == "depends").any())
    assert said / runs <= 0.05
    # the report's sentence on the last run's first item: no "changes behaviour" claim
    from harness.report.carried import carried_sentence

    sentence = carried_sentence(POLICY, carried[carried["item"] == "a"])
    assert sentence.startswith(f"{POLICY}: cannot tell whether removing the system prompt")
