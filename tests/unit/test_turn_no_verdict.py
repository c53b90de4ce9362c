"""Issue 56: a turn where no reply has an all-rules verdict keeps its turn_adherence.csv row,
with a(k) NaN and the replies without a verdict counted; nothing downstream (conversations.csv's
a_first, the first failing turn, an a_turn gate, rules.csv) reads it as 0 or as a pass."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.conversations import conversation_summary, turn_curves
from harness.analysis.gates import evaluate_gates
from harness.checks import CUT_OFF_REASON
from harness.config.gate_specs import GateSpec
from harness.scoring.survival import FIRST_TIME, samples_to_bound_median


def _rows(plan: dict[int, list], samples: int = 8) -> pd.DataFrame:
    """turns.csv rows of `samples` conversations: turn -> the sign-off's verdict per sample
    (None: the reply was cut before it could be judged); the language rule always holds."""
    rows = []
    for sample in range(samples):
        for turn, verdicts in plan.items():
            sign_off = verdicts[sample % len(verdicts)]
            base = dict(model="m", task="t", item="conv", policy="none", run_id="r",
                        seed=sample, sample=sample, turn=turn, pressure=False)  # fmt: skip
            rows.append({**base, "check": "language:de", "rule": "german", "value": 1.0,
                         "passed": True, "reason": "de"})  # fmt: skip
            rows.append({**base, "check": "end_checker", "rule": "sign-off",
                         "value": math.nan if sign_off is None else float(sign_off),
                         "passed": sign_off,
                         "reason": CUT_OFF_REASON if sign_off is None else "judged"})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_turn_with_no_verdict_has_its_row_with_nan_and_the_count():
    curves = turn_curves(_rows({1: [None], 2: [False], 3: [True]})).set_index("turn")
    assert curves.index.tolist() == [1, 2, 3]  # turn 1 had no row on main
    assert math.isnan(curves.loc[1, "a"]) and curves.loc[1, "n"] == 0
    assert curves.loc[1, "undecided"] == 8 and curves.loc[1, "undecided_share"] == 1.0
    assert "no reply of this turn has a verdict" in curves.loc[1, "a_method"]
    assert math.isnan(curves.loc[1, "survival"])  # not 1.0: nobody was seen to survive it
    assert curves.loc[2, "a"] == 0.0 and curves.loc[3, "a"] == 1.0


def test_a_condition_with_no_verdict_at_all_keeps_its_rows():
    curves = turn_curves(_rows({1: [None], 2: [None]}))
    assert curves["turn"].tolist() == [1, 2] and curves["a"].isna().all()
    talks = conversation_summary(_rows({1: [None], 2: [None]}), pd.DataFrame())
    assert len(talks) == 1 and math.isnan(talks["a_first"].iloc[0])
    assert math.isnan(talks["first_fail_median"].iloc[0])


def test_a_first_and_the_first_failing_turn_do_not_read_the_missing_turn_as_a_pass():
    talks = conversation_summary(_rows({1: [None], 2: [False], 3: [True]}), pd.DataFrame())
    row = talks.iloc[0]
    assert math.isnan(row["a_first"])  # read a(2) = 0.0 on main
    # every conversation breaks the sign-off at turn 2 at the latest, and may have at turn 1
    assert row["first_fail_median"] == 2.0
    assert row["first_fail_median_low"] == FIRST_TIME  # 2.0 on main: turn 1 read as a pass
    assert row["first_fail_median_high"] == 2.0


def test_the_s_k_band_counts_a_reply_with_no_verdict_as_one_that_may_have_failed():
    curves = turn_curves(_rows({1: [None], 2: [True], 3: [True]})).set_index("turn")
    # every sample's turn 1 is unknown: S(1) may be 0; main read S(1..3) as surely 1
    assert curves.loc[1, "survival_low"] == 0.0
    assert curves.loc[3, "survival_low"] == 0.0


def test_an_a_turn_gate_at_a_turn_with_no_verdict_does_not_pass():
    turns = _rows({1: [None], 2: [True], 3: [True]})
    curve = turn_curves(turns)
    gate = GateSpec(metric="a_turn", turn=1, policy="none", min=0.5)
    gates = evaluate_gates(
        [gate], pd.DataFrame(), ["conv"], ["m"], tables={"turn_adherence.csv": curve}
    )
    assert gates["verdict"].tolist() == ["fail"]
    assert "undetermined" in gates["detail"].iloc[0]


@pytest.mark.parametrize(("level", "needed"), [(0.95, 6), (0.9, 5), (0.99, 8)])
def test_samples_to_bound_a_median(level, needed):
    """2 x 0.5^n <= 1 - level: the fewest samples for which all failing at one turn bounds it."""
    assert samples_to_bound_median(level) == needed
    assert 2 * 0.5**needed <= 1 - level < 2 * 0.5 ** (needed - 1)


def test_the_median_interval_is_never_below_the_first_turn():
    from harness.scoring.survival import survival_median_interval

    # every sample fails at turn 1 (n = 4: nothing can be bounded; n = 10: [1, 1])
    small = survival_median_interval(np.ones(4), np.ones(4, bool), level=0.95)
    assert (small.low, small.high) == (1.0, math.inf)  # [0, inf] on main
    big = survival_median_interval(np.ones(10), np.ones(10, bool), level=0.95)
    assert (big.low, big.high) == (1.0, 1.0)


def test_the_first_failing_turns_interval_covers_with_replies_missing_at_random():
    """Coverage of the median's interval by simulation (n = 8, hazard 0.2 per turn, 30 % of
    replies with no verdict): the true median turn is 4 (1 - 0.8^k >= 1/2 first at k = 4)."""
    from harness.scoring.survival import survival_median_interval

    rng, turns, held, reps = np.random.default_rng(0), np.arange(1, 11), 0, 400
    for _ in range(reps):
        breaks = rng.geometric(0.2, size=8)  # the first failing turn of each conversation
        seen = rng.random((8, 10)) >= 0.3
        passed = turns[None, :] < breaks[:, None]
        # first decided failure, else censored at the last decided pass
        fail = seen & ~passed
        event = fail.any(axis=1)
        last = np.where(seen.any(axis=1), 10 - seen[:, ::-1].argmax(axis=1), 0)
        duration = np.where(event, fail.argmax(axis=1) + 1, last).astype(float)
        unknown = ~seen | fail
        earliest = np.fmin(np.where(unknown.any(axis=1), unknown.argmax(axis=1) + 1, 99), duration)
        keep = duration > 0
        ci = survival_median_interval(
            duration[keep], event[keep], level=0.95, earliest=earliest[keep]
        )
        held += ci.low <= 4 <= ci.high
    assert held / reps >= 0.93, held / reps


def test_the_report_s_turn_chart_leaves_the_turn_blank_not_at_0():
    from harness.report.conversations import turn_figures

    curve = turn_curves(_rows({1: [None], 2: [False], 3: [True]}))
    _, figures = turn_figures(curve)
    line = [t for t in figures["fig-turn-adherence"].data if t.mode == "lines+markers"][0]
    assert list(line.x) == [1, 2, 3]
    assert math.isnan(line.y[0]) and list(line.y[1:]) == [0.0, 1.0]  # a gap, never a 0
