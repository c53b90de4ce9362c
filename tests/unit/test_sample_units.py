"""The sample is the unit: per-sample values from its own windows over a fixed t-range, fixed
correction sets, and the ability / reliability metrics (pass^r, aptitude, unreliability)
with intervals that hold at n = 4..64 by simulation through the project's code."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.scoring.adherence import adherence_summary, sample_values
from harness.scoring.passes import window_passes
from harness.scoring.reliability import (
    aptitude_interval,
    pass_power_interval,
    reliability_fields,
    unreliability_interval,
)
from harness.stats import quantile_interval


def _frame(windows: dict[int, list[tuple[int, int, bool]]]) -> pd.DataFrame:
    """windows.csv rows: {sample: [(t_start, t_end, passed), ...]}."""
    rows = [
        dict(run_id="r", model="m", task="t", item="i", policy="none", seed=0, sample=s,
             window=k, t_start=a, t_end=b, t_gen_start=a, check="c", scope="window",
             value=float(ok), passed=ok, reason="")
        for s, ws in windows.items() for k, (a, b, ok) in enumerate(ws)
    ]  # fmt: skip
    return pd.DataFrame(rows)


ZERO = [(1, 64, True), (65, 128, False)]  # its own AUC: 64 of 128 positions pass
MISALIGNED = [(1, 96, True), (97, 128, False)]  # 96 of 128


def test_a_sample_keeps_its_own_auc_whatever_the_other_samples_are():
    (alone,) = adherence_summary(_frame({0: ZERO}))
    (both,) = adherence_summary(_frame({0: ZERO, 1: MISALIGNED}))
    assert alone.auc == 0.5
    # the union grid of window starts (1, 65, 97) used to score sample 0 as 1/3 and the
    # mean as 0.5; each sample over its own windows: (0.5 + 0.75) / 2
    assert both.auc == pytest.approx(0.625)
    for other in (MISALIGNED, [(1, 10, False), (11, 50, True), (51, 128, True)]):
        auc, _ = sample_values(window_passes(_frame({0: ZERO, 1: other})), horizon=128)
        assert auc[0] == 0.5


def test_final_is_fixed_by_the_horizon_not_by_the_other_samples():
    # horizon 128: final is positions 97..128; a longer sample does not move sample 0's
    longer = [(1, 200, True), (201, 256, True)]
    _, final_alone = sample_values(window_passes(_frame({0: ZERO})), horizon=128)
    _, final_both = sample_values(window_passes(_frame({0: ZERO, 1: longer})), horizon=128)
    assert final_alone[0] == final_both[0] == 0.0
    assert final_both[1] == 1.0  # its positions past the horizon do not count
    (row,) = adherence_summary(_frame({0: ZERO, 1: longer}), horizon=128)
    assert row.final == 0.5 and row.final_n == 2


def test_a_sample_that_stopped_early_counts_over_the_positions_it_has():
    early = [(1, 40, True)]  # stopped at t = 40 of a 128-token budget
    auc, final = sample_values(window_passes(_frame({0: ZERO, 1: early})), horizon=128)
    assert auc[1] == 1.0 and math.isnan(final[1])  # no position in (96, 128]
    (row,) = adherence_summary(_frame({0: ZERO, 1: early}), horizon=128)
    assert row.auc_n == 2 and row.final_n == 1 and row.final == 0.0


def test_half_life_band_corrects_over_fixed_checkpoints_not_the_window_starts():
    halving = {s: [(1, 64, True), (65, 128, True), (129, 192, s % 2 == 0), (193, 256, False)]
               for s in range(16)}  # fmt: skip
    (coarse,) = adherence_summary(_frame(halving), horizon=256)
    # one sample's windows split finer (same verdicts): 8 window starts instead of 4
    halving[0] = [(a + d, a + d + 31, ok) for a, _, ok in halving[0] for d in (0, 32)]
    (fine,) = adherence_summary(_frame(halving), horizon=256)
    assert fine.n_points == 8 and coarse.n_points == 4
    assert (fine.half_life_low, fine.half_life_high) == (
        coarse.half_life_low,
        coarse.half_life_high,
    )
    assert fine.half_life_method.endswith("bonferroni over 8 points)")


def test_survival_median_sequence_does_not_widen_with_distinct_times():
    from harness.scoring.survival import survival_median_interval

    order = np.random.default_rng(0).permutation(24)  # samples in a random arrival order
    events = np.array([True] * 12 + [False] * 12)[order]
    failed = 1.0 + np.arange(12)
    together = np.concatenate([failed, np.full(12, 256.0)])[order]  # 13 distinct times
    spread = np.concatenate([failed, 200.0 + np.arange(12)])[order]  # 24 distinct times
    a = survival_median_interval(together, events, level=0.95, anytime=True)
    b = survival_median_interval(spread, events, level=0.95, anytime=True)
    assert (a.low, a.high) == (b.low, b.high) and "bonferroni" not in a.method
    # Bonferroni over the 13 observed times gave a low end of 3; the envelope's is 5
    assert a.low == 5.0 and math.isinf(a.high)
    assert a.estimate == 12.0  # S(12) = 1/2 exactly (float-safe comparison)


# ---------------------------------------------------------------- pass^r, aptitude, unreliability
def test_pass_power_is_the_binomial_interval_raised_to_r():
    ci = pass_power_interval([1, 1, 1, 0], 3, level=0.95)
    base = pass_power_interval([1, 1, 1, 0], 1, level=0.95)
    assert ci.estimate == pytest.approx(1 / 4)  # C(3, 3) / C(4, 3), not 0.75^3 = 0.42
    assert (ci.low, ci.high) == pytest.approx((base.low**3, base.high**3))
    short = pass_power_interval([1, 1, 1, 1], 5, level=0.95)
    assert math.isnan(short.low) and "cannot tell: n = 4 < r = 5" in short.method


def test_pass_power_is_unbiased():
    """The mean of the estimate over every outcome of n = 4 samples at p = 0.5 is p^3 = 0.125
    exactly (p-hat^3 averages 0.219: +75 %)."""
    from scipy import stats as st

    mean = sum(
        st.binom.pmf(c, 4, 0.5)
        * pass_power_interval([1] * c + [0] * (4 - c), 3, level=0.95).estimate
        for c in range(5)
    )
    assert mean == pytest.approx(0.125)
    low = pass_power_interval([1, 1, 0, 0], 3, level=0.95)
    assert low.estimate == 0.0 and low.low == 0.0  # C(2, 3) = 0: the low end moves to it


def test_pass_power_of_a_sequential_run_states_the_stops_bias():
    """C(c, r) / C(n, r) is unbiased at a fixed n only: under the shipped sequential design it
    is off by -30 % at p = 0.6 (issue 54). A sequential run's method says so; a fixed one not."""
    seq = pass_power_interval([1, 1, 1, 0, 1, 1], 3, level=0.95, anytime=True)
    fixed = pass_power_interval([1, 1, 1, 0, 1, 1], 3, level=0.95)
    assert "biased by the sequential stop" in seq.method
    assert "biased" not in fixed.method


def test_quantile_interval_is_the_order_statistic_interval():
    x = np.arange(1, 21) / 20.0  # 20 distinct values
    ci = quantile_interval(x, 0.5, level=0.95)
    assert (ci.low, ci.high) == (x[5], x[14])  # P(Bin(20, 1/2) <= 5) = 0.021 per side
    assert quantile_interval(x[:4], 0.9, level=0.95).high == 1.0  # the range's bound


def test_unreliability_cannot_tell_at_four_samples():
    """Four samples cannot bound it: the interval is the whole range, and says so (it keeps
    its ends, so the intervals written cover at their level, the wide ones included)."""
    fields = reliability_fields(np.array([0.2, 0.9, 1.0, 0.5]), level=0.95)
    assert (fields["unreliability_low"], fields["unreliability_high"]) == (0.0, 1.0)
    assert "cannot tell at n = 4: the interval spans [0, 1]" in fields["unreliability_method"]
    assert fields["unreliability"] == pytest.approx(np.quantile([0.2, 0.9, 1.0, 0.5], 0.9) - 0.29)
    assert math.isnan(fields["pass_5"]) and fields["pass_3_n"] == 4


@pytest.mark.parametrize("p_one", [0.05, 0.4])
@pytest.mark.parametrize("n", [4, 8, 16, 64])
def test_reliability_intervals_cover_at_every_n(n, p_one):
    """Per-sample AUCs as the harness makes them (a share p_one of 1s, fractions else), 200
    simulated runs per cell through `reliability_fields`."""
    rng = np.random.default_rng(n)
    a, b = 2.0, 1.5  # below 1: Beta(a, b)

    # the mixture's quantiles: q >= 1 - p_one sits at 1, else the Beta's q / (1 - p_one)
    def quantile(q):
        return 1.0 if q > 1 - p_one else float(stats.beta.ppf(q / (1 - p_one), a, b))

    truth = {
        "aptitude": quantile(0.9),
        "unreliability": quantile(0.9) - quantile(0.1),
        "pass_3": p_one**3,
    }
    hits = dict.fromkeys(truth, 0)
    for _ in range(200):
        scores = np.where(rng.random(n) < p_one, 1.0, rng.beta(a, b, n))
        fields = reliability_fields(scores, level=0.95)
        for m, value in truth.items():
            low, high = fields[f"{m}_low"], fields[f"{m}_high"]
            # "cannot tell" (NaN) promises nothing and so never misses
            hits[m] += math.isnan(low) or low - 1e-9 <= value <= high + 1e-9
    assert min(hits.values()) / 200 >= 0.93, hits


def test_quantile_intervals_say_cannot_tell_in_sequential_runs():
    assert "fixed-n" in aptitude_interval([1, 1, 0.5, 1], level=0.95, anytime=True).method
    assert "fixed-n" in unreliability_interval([1, 1, 0.5], level=0.95, anytime=True).method


def test_reliability_gates_read_cannot_tell_as_undecided():
    from harness.analysis.gates import evaluate_gates
    from harness.analysis.summary import summarise_conditions
    from harness.config.gate_specs import GateSpec

    windows = _frame({s: [(1, 64, True), (65, 128, s != 0)] for s in range(4)})
    summary = summarise_conditions(None, windows, None, [], horizon=128)
    specs = [
        GateSpec(metric="pass_5", policy="none", min=0.1),  # n = 4 < 5: cannot tell
        GateSpec(metric="pass_3", policy="none", min=0.005),  # [0.194^3, 0.994^3]: pass
        GateSpec(metric="unreliability", policy="none", max=0.5),  # 4 samples: cannot tell
    ]
    gates = evaluate_gates(specs, summary, ["i"], ["m"])
    assert gates["verdict"].tolist() == ["undecided", "pass", "undecided"]
    assert "cannot tell: n = 4 < r = 5" in gates["detail"].iloc[0]
    row = summary.iloc[0]
    assert row["pass_1"] == 0.75 and row["pass_3"] == pytest.approx(1 / 4)  # C(3,3) / C(4,3)
