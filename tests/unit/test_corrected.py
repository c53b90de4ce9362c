"""Verdicts corrected for the instrument (harness.scoring.corrected) and the count of windows
and replies no check decided (adherence.csv, turn_adherence.csv, conversations.csv)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.analysis.conversations import conversation_summary, turn_curves
from harness.scoring.adherence import adherence_summary
from harness.scoring.corrected import (
    CheckRates,
    corrected_bounds,
    rogan_gladen,
    sampling_level,
)
from harness.stats import binomial_interval


def _windows(passes: dict[int, list], check="c") -> pd.DataFrame:
    rows = []
    for sample, verdicts in passes.items():
        for k, ok in enumerate(verdicts):
            rows.append(
                dict(run_id="r", model="m", task="t", item="i", policy="none", seed=0,
                     sample=sample, window=k, t_start=k * 64 + 1, t_end=(k + 1) * 64,
                     t_gen_start=k * 64 + 1, check=check, scope="window",
                     value=math.nan if ok is None else float(ok), passed=ok, reason="")
            )  # fmt: skip
    return pd.DataFrame(rows)


def _turns(passes: dict[int, list], check="c") -> pd.DataFrame:
    w = _windows(passes, check)
    return w.assign(turn=w["window"] + 1, pressure=False, history="generated", conversation_id="")


def test_rogan_gladen_inverts_the_checks_error_and_clips():
    se, sp, p = 0.9, 0.8, np.array([0.0, 0.3, 0.95, 1.0])
    raw = se * p + (1 - sp) * (1 - p)
    assert rogan_gladen(raw, se, sp) == pytest.approx(p)
    assert rogan_gladen([0.05, 0.99], se, sp).tolist() == [0.0, 1.0]  # below 1 - Sp, above Se
    assert math.isnan(rogan_gladen(0.5, 0.5, 0.5))  # a coin: nothing to invert


def test_corrected_interval_covers_exactly_at_small_n():
    """Exact coverage (every outcome enumerated, no Monte-Carlo error) of the corrected a(k)
    interval: k ~ Bin(n, a) raw passes, the labelled set's Se and Sp counts binomial."""
    se, sp, pos, neg, ps = 0.9, 0.85, 15, 20, np.array([0.5, 0.9, 1.0])
    raw_rate = se * ps + (1 - sp) * (1 - ps)
    for n in (4, 8, 16):
        k = np.arange(n + 1)
        low_raw, high_raw = binomial_interval(k, np.full(n + 1, n), level=sampling_level(0.95))
        outcome = stats.binom.pmf(k[None, :], n, raw_rate[:, None])  # (P, n + 1)
        coverage = np.zeros(len(ps))
        for tp in range(pos + 1):
            for tf in range(neg + 1):
                rates = CheckRates("c", tp, pos - tp, tf, neg - tf)
                _, low, high, _ = corrected_bounds(k / n, low_raw, high_raw, rates, 0.95)
                held = (low[None, :] <= ps[:, None] + 1e-12) & (ps[:, None] - 1e-12 <= high)
                weight = stats.binom.pmf(tp, pos, se) * stats.binom.pmf(tf, neg, sp)
                coverage += weight * (outcome * held).sum(axis=1)
        assert (coverage >= 0.95).all(), (n, coverage)


def test_a_check_no_better_than_chance_on_the_box_gives_zero_to_one():
    rates = CheckRates("c", true_pass=6, false_fail=4, true_fail=5, false_pass=5)
    est, low, high, method = corrected_bounds(
        np.array([0.6]), np.array([0.3]), np.array([0.9]), rates, 0.95
    )
    assert (low[0], high[0]) == (0.0, 1.0) and "se + sp <= 1" in method


def test_adherence_csv_carries_the_corrected_auc_beside_the_raw_one():
    passes = {s: [True] * 4 for s in range(12)} | {12 + s: [False] * 4 for s in range(4)}
    rates = {"c": CheckRates("c", true_pass=180, false_fail=20, true_fail=190, false_pass=10)}
    (row,) = adherence_summary(_windows(passes), rates=rates)
    # raw 0.75 = Se p + (1 - Sp)(1 - p) at Se 0.9, Sp 0.95: p = (0.75 - 0.05) / 0.85
    assert row.auc == pytest.approx(0.75)
    assert row.auc_corrected == pytest.approx(0.70 / 0.85)
    assert row.auc_corrected_low < row.auc_corrected < row.auc_corrected_high <= 1.0
    assert row.auc_corrected_high - row.auc_corrected_low > row.auc_high - row.auc_low
    assert row.auc_corrected_method.startswith("rogan-gladen")
    (plain,) = adherence_summary(_windows(passes))
    assert math.isnan(plain.auc_corrected) and plain.auc_corrected_method == (
        "none (no validation data)"
    )
    (other,) = adherence_summary(_windows(passes, check="d"), rates=rates)
    assert other.auc_corrected_method == "none (no validation data for d)"


def test_two_deciding_checks_are_not_corrected():
    frame = pd.concat([_windows({0: [True, True]}), _windows({0: [True, False]}, check="d")])
    rates = {c: CheckRates(c, 90, 10, 90, 10) for c in ("c", "d")}
    (row,) = adherence_summary(frame, rates=rates)
    assert "2 checks decide" in row.auc_corrected_method and math.isnan(row.auc_corrected)


def test_undecided_windows_are_counted_per_condition():
    (row,) = adherence_summary(
        _windows({0: [True, None, True, None], 1: [False, True, None, True]})
    )
    assert (row.windows_total, row.undecided_windows) == (8, 3)
    assert row.undecided_window_share == pytest.approx(3 / 8)
    # the undecided positions are left out: sample 1 passes 2 of its 3 decided windows
    assert row.auc == pytest.approx((1 + 2 / 3) / 2)


def test_undecided_replies_are_counted_per_turn_and_conversation():
    turns = _turns({0: [True, None, True], 1: [True, None, False], 2: [None, True, True]})
    curve = turn_curves(turns)
    assert curve["undecided"].tolist() == [1, 2, 0]
    assert curve["undecided_share"].tolist() == pytest.approx([1 / 3, 2 / 3, 0.0])
    assert curve["n"].tolist() == [2, 1, 3]
    tokens = pd.DataFrame(columns=["model", "item", "policy", "generated", "injected"])
    (row,) = conversation_summary(turns, tokens).to_dict("records")
    assert (row["undecided_turns"], row["undecided_turn_share"]) == (3, pytest.approx(3 / 9))


def test_turn_adherence_carries_a_corrected_a_k():
    turns = _turns({s: [True, s % 2 == 0] for s in range(16)})
    rates = {"c": CheckRates("c", 95, 5, 95, 5)}
    curve = turn_curves(turns, rates=rates)
    assert curve["a"].tolist() == [1.0, 0.5]
    assert curve["a_corrected"].tolist() == pytest.approx([1.0, 0.5])  # symmetric error
    assert (curve["a_corrected_low"] < curve["a_low"]).all()
    assert curve["a_corrected_method"].str.startswith("rogan-gladen").all()


# ------------------------------------------------------------------------- gates
def _gate_summary() -> pd.DataFrame:
    """summary.csv rows of one condition per item: raw AUC high, corrected lower and wider
    (or absent: no validation data)."""
    rows = []
    for item, corrected in (("a", (0.85, 0.81, 0.93)), ("b", (0.85, 0.70, 0.95)), ("c", None)):
        low_high = corrected or (math.nan,) * 3
        rows.append({
            "model": "m", "item": item, "policy": "none", "n": 32, "auc": 0.9,
            "auc_low": 0.82, "auc_high": 0.95, "auc_n": 32, "auc_lcb": 0.83, "auc_ucb": 0.94,
            "auc_corrected": low_high[0], "auc_corrected_low": low_high[1],
            "auc_corrected_high": low_high[2], "auc_corrected_n": 32,
            "auc_corrected_method": "rogan-gladen" if corrected else "none (no validation data)",
        })  # fmt: skip
    return pd.DataFrame(rows)


def test_a_corrected_gate_bounds_the_corrected_interval_and_undecided_stays_undecided():
    from harness.analysis.gates import evaluate_gates
    from harness.config.gate_specs import GateSpec

    specs = [GateSpec(metric="auc", policy="none", min=0.8, corrected=True),
             GateSpec(metric="auc", policy="none", min=0.8)]  # fmt: skip
    out = evaluate_gates(specs, _gate_summary(), ["a", "b", "c"], ["m"])
    corrected, raw = out[out["gate"] == 0], out[out["gate"] == 1]
    assert corrected["verdict"].tolist() == ["pass", "undecided", "fail"]
    assert raw["verdict"].tolist() == ["pass", "pass", "pass"]  # the raw interval clears 0.8
    assert set(corrected["metric"]) == {"auc_corrected"}
    assert corrected["detail"].iloc[1].startswith("auc_corrected 0.85 [0.7, 0.95], n = 32")
    assert "undetermined (NaN): fails" in corrected["detail"].iloc[2]


def test_corrected_on_a_metric_without_a_corrected_estimate_is_refused():
    from harness.config.gate_specs import GateSpec, gate_problem

    gate = GateSpec(metric="half_life", policy="none", min=100, corrected=True)
    assert gate_problem(gate, ["none"], ["m"], False) == (
        "corrected: true needs a metric with a corrected estimate (auc), not 'half_life'"
    )


# ------------------------------------------------------------------------- judges
def test_a_judge_is_measured_on_the_same_scale_and_its_rates_correct_a_judged_condition():
    from harness.analysis.calibration import judge_calibration, measured_judges
    from harness.stats import mean_interval

    from .test_analysis_calibration import CODE, JUDGE, table_pairs, windows_from

    # code passes 40 windows (the judge passes 36 of them), fails 20 (the judge fails 15)
    met = windows_from(table_pairs(both_pass=36, judge_only=5, code_only=4, both_fail=15))
    (row,) = judge_calibration(met).to_dict("records")
    # the pooled shares, over records as the unit (5 windows each): records 0-7 hold the
    # code's passes the judge passed, record 8 its 4 the judge failed; the code's fails are in
    # records 7 and 8 (the judge passed them all) and 9-11 (the judge failed them all)
    assert (row["sensitivity"], row["sensitivity_n"]) == (pytest.approx(0.9), 9)
    assert (row["specificity"], row["specificity_n"]) == (pytest.approx(0.75), 5)
    exact = mean_interval([1.0] * 8 + [0.0])  # each record's share is 0 or 1: exact
    assert (row["sensitivity_low"], row["sensitivity_high"]) == pytest.approx(
        (exact.low, exact.high)
    )
    assert row["sensitivity_method"] == "clopper-pearson over records"
    rates = measured_judges(judge_calibration(met))
    assert rates[JUDGE].true_pass == 36 and rates[JUDGE].false_pass == 5 and CODE not in rates
    # an item only the judge decides is corrected with the judge's measured rates
    judged = _windows({s: [s % 4 != 0] * 3 for s in range(16)}, check=JUDGE)
    (summary,) = adherence_summary(judged, rates=rates)
    assert summary.auc_corrected == pytest.approx((0.75 + 0.75 - 1) / (0.9 + 0.75 - 1))


# ------------------------------------------------------------------------- report
def test_the_report_names_undecided_windows_above_one_percent_and_shows_the_corrected_auc():
    from harness.report.instrument import corrected_auc_part, undecided_windows_note
    from harness.report.terminal import undecided_line
    from harness.scoring.adherence import summary_frame

    many = {s: [True, True, None, True] for s in range(4)}  # 4 of 16 windows undecided
    few = {s: [True] * 100 for s in range(4)} | {4: [None] + [True] * 99}  # 1 of 500: 0.2 %
    rates = {"c": CheckRates("c", 180, 20, 190, 10)}
    frames = [_windows(many), _windows(few).assign(item="j")]
    adherence = summary_frame(adherence_summary(pd.concat(frames), rates=rates))
    line = undecided_windows_note(adherence)
    assert "m: i / none: 4 of 16 windows (25 %) got no verdict" in line and "j / none" not in line
    assert undecided_line(adherence) == (
        "Windows without a verdict (left out of the AUC; see the report): i/none 25.0 %"
    )
    part = corrected_auc_part(adherence)
    assert "AUC corrected" in part and "rogan-gladen" in part and "Rogan-Gladen" in part
    assert undecided_windows_note(adherence[adherence["item"] == "j"]) == ""
    assert corrected_auc_part(summary_frame(adherence_summary(_windows(many)))) == ""


# ------------------------------------------------------------------------- measured checks
def test_a_runs_check_is_measured_on_the_frozen_set_and_the_users_file(tmp_path):
    import json

    from pydantic import TypeAdapter

    from harness.checks import CheckSpec
    from harness.config.run import DEFAULT_CANDIDATE_LANGUAGES
    from harness.scoring.measured import measured_checks

    spec = TypeAdapter(CheckSpec)
    french = spec.validate_python({"type": "language", "target": "fr"})
    check = french.bind(french.base_id, DEFAULT_CANDIDATE_LANGUAGES)
    shipped = measured_checks([check], DEFAULT_CANDIDATE_LANGUAGES)[check.id]
    root = Path(__file__).resolve().parents[2]
    shipped_set = (root / "harness/checks/validation/language-test.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in shipped_set]
    fr_rows = [r for r in rows if r["check"] == {"type": "language", "target": "fr"}]
    decided = shipped.true_pass + shipped.false_fail + shipped.true_fail + shipped.false_pass
    assert decided + shipped.abstained == len(fr_rows) and "language-test" in shipped.source
    assert shipped.true_pass > shipped.false_fail and shipped.true_fail > shipped.false_pass
    labels = tmp_path / "labels.jsonl"
    mine = [("Votre commande est partie hier soir.", True), ("Your order left last night.", False)]
    labels.write_text("".join(
        json.dumps({"text": t, "check": {"type": "language", "target": "fr"}, "expected": e}) + "\n"
        for t, e in mine
    ))  # fmt: skip
    both = measured_checks([check], DEFAULT_CANDIDATE_LANGUAGES, labels)[check.id]
    assert both.true_pass + both.false_fail == shipped.true_pass + shipped.false_fail + 1
    assert both.true_fail + both.false_pass == shipped.true_fail + shipped.false_pass + 1
    assert str(labels) in both.source
    other = spec.validate_python({"type": "regex_must", "pattern": "^[a-z ]+$"})
    assert measured_checks([other.bind("regex", [])], DEFAULT_CANDIDATE_LANGUAGES) == {}


def test_a_bad_labelled_file_is_one_line_naming_file_and_line_before_anything_runs(
    tmp_path, run_cli
):
    from .test_gates import _write_config

    labels = tmp_path / "labels.jsonl"
    good = '{"text": "Bonjour à vous.", "check": {"type": "language", "target": "fr"}, '
    labels.write_text(good + '"expected": true}\n' + good + '"expected": "maybe"}\n')
    path = _write_config(tmp_path, [], scoring={"window": 64, "validation": "labels.jsonl"})
    out_dir = tmp_path / "out"
    code, _, stderr = run_cli(["run", str(path), "--out", str(out_dir)])
    assert code == 2 and stderr.count("\n") == 1 and not out_dir.exists()
    assert f"{labels}:2:" in stderr and "expected" in stderr, stderr
    labels.unlink()
    code, _, stderr = run_cli(["run", str(path), "--out", str(out_dir)])
    assert code == 2 and "field 'scoring.validation': labels.jsonl: file not found" in stderr
