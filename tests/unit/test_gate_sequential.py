"""A sequential run's auc/final gates through `evaluate_gates` with the run's looks: the
group-sequential test's verdict at each look (harness.analysis.gate_sequential), the seeded
coin that counts fractional values, and the look below where n is not a look."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.gates import evaluate_gates
from harness.config.gate_specs import GateSpec
from harness.config.sampling import SampleRange, schedule
from harness.stats.group_sequential import binary_count, gate_design

LOOKS = tuple(schedule(SampleRange(min=4, max=64)))


def _summary(passes: int, n: int, lcb: float = 0.0, ucb: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame(
        [{"model": "m", "item": "a", "policy": "none", "n": n, "auc": passes / n,
          "auc_low": lcb, "auc_high": ucb, "auc_n": n, "auc_method": "beta-binomial-cs",
          "auc_lcb": lcb, "auc_ucb": ucb, "auc_passes": passes}]
    )  # fmt: skip


def _verdict(summary: pd.DataFrame, **bound) -> pd.Series:
    gate = GateSpec(metric="auc", policy="none", **bound)
    return evaluate_gates([gate], summary, ["a"], ["m"], looks=LOOKS).iloc[0]


def test_a_look_decides_as_the_design_on_both_sides_and_a_max_gate_the_other_way_round():
    test = gate_design(LOOKS, 0.8, 0.05)
    look = LOOKS.index(33)
    passes, fails = test.boundaries[look]
    least = int(np.flatnonzero(passes)[0])  # the fewest passes that pass at n = 33
    most = int(np.flatnonzero(fails)[-1])
    assert _verdict(_summary(least, 33), min=0.8)["verdict"] == "pass"
    assert _verdict(_summary(least - 1, 33), min=0.8)["verdict"] == "undecided"
    assert _verdict(_summary(most, 33), min=0.8)["verdict"] == "fail"
    # a max gate: the design's "at least the bound" is its fail
    assert _verdict(_summary(least, 33), max=0.8)["verdict"] == "fail"
    assert _verdict(_summary(most, 33), max=0.8)["verdict"] == "pass"
    row = _verdict(_summary(least - 1, 33), min=0.8)
    assert "group-sequential, look 9 of 12" in row["detail"]
    assert "if the observed rate" in row["detail"] and row["samples_needed"] in LOOKS


def test_the_interval_bounds_are_not_what_decides_at_a_look():
    # the confidence sequence's bounds straddle 0.8; the count at this look decides
    assert _verdict(_summary(33, 33, lcb=0.7, ucb=1.0), min=0.8)["verdict"] == "pass"


def test_off_the_looks_the_gate_decides_at_the_look_below_with_the_counts_it_can_hold():
    """n = 36 values (3 samples without one) is no look: the old gate fell back to the wider
    confidence sequence (here [0, 1]: undecided). The first 33 of 36 values hold at least
    count - 3 passes, so the design's pass at 33 needs count >= least + 3."""
    test = gate_design(LOOKS, 0.8, 0.05)
    look = LOOKS.index(33)
    least = int(np.flatnonzero(test.boundaries[look][0])[0])
    most = int(np.flatnonzero(test.boundaries[look][1])[-1])
    row = _verdict(_summary(least + 3, 36), min=0.8)
    assert row["verdict"] == "pass" and "decided at the look of 33 below it" in row["detail"]
    assert _verdict(_summary(least + 2, 36), min=0.8)["verdict"] == "undecided"
    assert _verdict(_summary(most, 36), min=0.8)["verdict"] == "fail"  # at most `most` of 33
    assert _verdict(_summary(most + 1, 36), min=0.8)["verdict"] == "undecided"
    # below the first look: the confidence sequence as before
    assert "group-sequential" not in _verdict(_summary(3, 3, lcb=0.82), min=0.8)["detail"]


def test_with_samples_missing_a_value_each_side_still_errs_at_most_alpha_at_the_bound():
    """Paths at p = 0.8 where each sample lacks a value with probability 0.1, looked at as the
    runner looks (stopping once decided): the share passing a `min: 0.8` gate stays <= 0.05."""
    from harness.analysis.gate_sequential import sequential_check

    gate = GateSpec(metric="auc", policy="none", min=0.8)
    rng, passes, paths = np.random.default_rng(4), 0, 600
    for _ in range(paths):
        values = np.where(rng.random(LOOKS[-1]) < 0.1, np.nan, rng.random(LOOKS[-1]) < 0.8)
        for at in LOOKS:
            got = values[:at][np.isfinite(values[:at])]
            mean = got.mean() if len(got) else math.nan  # no sample with a value yet
            row = {"auc": mean, "auc_passes": got.sum(), "auc_n": len(got)}
            decided = sequential_check(gate, row, LOOKS, 0.95)
            if decided and decided[0] != "undecided":
                passes += decided[0] == "pass"
                break
    assert passes / paths <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / paths)


def test_zero_one_values_count_as_themselves_and_fractions_by_an_unbiased_seeded_coin():
    values = np.array([1, 0, 1, 1, 0, 1], float)
    assert binary_count(values, "k") == 4
    assert binary_count(np.full(4000, 0.3), "k") == binary_count(np.full(4000, 0.3), "k")
    counts = [binary_count(np.full(400, 0.3), f"k{i}") for i in range(20)]
    assert np.mean(counts) / 400 == pytest.approx(0.3, abs=0.01)
    # the first values' coins do not change when more samples come: one sample path
    first = binary_count(np.full(10, 0.5), "k")
    assert first == binary_count(np.r_[np.full(10, 0.5), np.zeros(5)], "k")
    assert math.isclose(binary_count(np.full(7, 0.0), "k"), 0)
