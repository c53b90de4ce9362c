"""calibration.csv: the judge's agreement with code checks on the same windows (accuracy,
Cohen's kappa, bootstrap CIs over records)."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.calibration import COLUMNS, agreement, judge_calibration, meetings

JUDGE, CODE = "judge:The text is written in French.", "language:fr"


def windows_from(pairs: list[tuple[object, object]], per_record: int = 5, item: str = "i"):
    """windows.csv rows: the k-th (judge, code) verdict pair is window k % per_record of
    sample k // per_record, both checks on that window."""
    rows = []
    for k, (judge, code) in enumerate(pairs):
        where = dict(
            run_id="r", model="m", task="t", item=item, policy="none",
            seed=k // per_record, sample=k // per_record, window=k % per_record,
            t_start=1, t_end=2, t_gen_start=1, scope="window", value=0.0, reason="",
        )  # fmt: skip
        rows.append({**where, "check": JUDGE, "passed": judge})
        rows.append({**where, "check": CODE, "passed": code})
    return pd.DataFrame(rows)


def table_pairs(both_pass: int, judge_only: int, code_only: int, both_fail: int):
    pairs = [(True, True)] * both_pass + [(True, False)] * judge_only
    pairs += [(False, True)] * code_only + [(False, False)] * both_fail
    return pairs


def test_kappa_of_a_known_table():
    # p_o = 0.7, judge passes 0.5, code 0.6 -> p_e = 0.5, kappa = (0.7 - 0.5) / 0.5 = 0.4
    accuracy, kappa = agreement(np.array([20, 5, 10, 15]))
    assert accuracy == pytest.approx(0.7) and kappa == pytest.approx(0.4)
    assert agreement(np.array([10, 0, 0, 10]))[1] == pytest.approx(1.0)
    assert agreement(np.array([0, 10, 10, 0]))[1] == pytest.approx(-1.0)
    assert math.isnan(agreement(np.array([7, 0, 0, 0]))[1])  # p_e = 1: undefined


def test_kappa_matches_sklearn_on_random_verdicts():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(3)
    code = rng.random(200) < 0.6
    judge = np.where(rng.random(200) < 0.75, code, ~code)
    row = judge_calibration(windows_from(list(zip(judge, code, strict=True))))
    expected = cohen_kappa_score(judge, code)
    assert row.loc[0, "kappa"] == pytest.approx(expected)
    assert row.loc[0, "accuracy"] == pytest.approx(np.mean(judge == code))


def test_the_bootstrap_ci_covers_the_estimate_and_narrows_with_more_records():
    small = judge_calibration(windows_from(table_pairs(20, 5, 10, 15)))
    large = judge_calibration(windows_from(table_pairs(200, 50, 100, 150)))
    for frame in (small, large):
        row = frame.iloc[0]
        assert row["n"] in (50, 500) and row["kappa"] == pytest.approx(0.4)
        assert row["kappa_low"] < 0.4 < row["kappa_high"]
        assert row["accuracy_low"] < 0.7 < row["accuracy_high"]
    width = lambda f: f.loc[0, "kappa_high"] - f.loc[0, "kappa_low"]  # noqa: E731
    assert width(large) < width(small) / 2
    assert small.equals(judge_calibration(windows_from(table_pairs(20, 5, 10, 15))))  # seeded


def test_undetermined_windows_are_counted_and_left_out():
    pairs = table_pairs(4, 1, 1, 4) + [(None, True), (True, None)]
    row = judge_calibration(windows_from(pairs)).iloc[0]
    assert (row["n"], row["undetermined"]) == (10, 2)
    assert (row["agree_pass"], row["judge_only_pass"], row["code_only_pass"]) == (4, 1, 1)


def test_rows_per_item_and_a_pooled_row_per_model():
    first = windows_from(table_pairs(5, 0, 0, 5), item="a")
    second = windows_from(table_pairs(0, 5, 5, 0), item="b")
    frame = judge_calibration(pd.concat([first, second], ignore_index=True))
    assert list(frame.columns) == COLUMNS
    assert frame["item"].tolist() == ["a", "b", "all"]
    assert frame["kappa"].tolist() == pytest.approx([1.0, -1.0, 0.0])
    assert frame.loc[2, "n"] == 20


def test_pooled_kappa_takes_chance_within_each_rule():
    # A judge that says "fail" nearly everywhere, on rules that mostly fail and on one that
    # mostly passes (the embedded model's calibration run): within each rule it does no better
    # than chance, so the pooled kappa is 0, not the 0.26 that pooled pass rates would give.
    rules = [
        windows_from(table_pairs(0, 0, 0, 8), item="french"),
        windows_from(table_pairs(0, 0, 2, 6), item="nocomma"),
        windows_from(table_pairs(2, 0, 6, 0), item="persona"),
    ]
    frame = judge_calibration(pd.concat(rules, ignore_index=True))
    pooled = frame.set_index("item").loc["all"]
    assert pooled["accuracy"] == pytest.approx(16 / 24)
    assert pooled["kappa"] == pytest.approx(0.0)
    naive = agreement(np.array([2, 0, 8, 14]))[1]
    assert naive > 0.2  # what ignoring the rules would have claimed


def test_verdicts_read_back_from_csv_and_no_judge_gives_no_rows():
    windows = windows_from(table_pairs(3, 1, 1, 3) + [(None, False)])
    text = windows.to_csv(index=False)
    again = judge_calibration(pd.read_csv(io.StringIO(text)))
    assert again.equals(judge_calibration(windows))
    only_code = windows[windows["check"] == CODE]
    assert judge_calibration(only_code).empty and list(judge_calibration(only_code)) == COLUMNS
    assert judge_calibration(pd.DataFrame()).empty


def test_judge_and_code_meet_only_on_the_same_record_and_window():
    windows = windows_from(table_pairs(2, 0, 0, 2), per_record=2)
    shifted = windows.copy()
    shifted.loc[shifted["check"] == CODE, "window"] += 10
    assert meetings(shifted).empty
    assert len(meetings(windows)) == 4


def test_one_record_or_one_verdict_everywhere_says_why():
    one = judge_calibration(windows_from(table_pairs(3, 1, 0, 1), per_record=10)).iloc[0]
    # one record is one unit: the intervals are formed, and say they know nothing
    assert one["reason"] == "" and (one["kappa_low"], one["kappa_high"]) == (-1.0, 1.0)
    assert one["kappa_n"] == one["accuracy_n"] == 1 and one["kappa_method"].startswith("projection")
    same = judge_calibration(windows_from(table_pairs(10, 0, 0, 0))).iloc[0]
    assert math.isnan(same["kappa"]) and same["accuracy"] == 1.0
    assert same["reason"].startswith("kappa undefined")
