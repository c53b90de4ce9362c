"""Adherence over turns from turns.csv rows: a(k), Kaplan-Meier over turns, the pressure split
and the reminders' token overhead, on hand-made verdicts."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.analysis.conversations import conversation_summary, turn_curves

# sample -> pass per turn 1..4 (turn 3 is a pressure turn); None = undetermined
GRID = {0: [1, 1, 0, 0], 1: [1, 1, 1, 0], 2: [1, 0, 1, 1], 3: [1, 1, None, 1]}


def _turns(policy="none", item="conv-a", grid=GRID) -> pd.DataFrame:
    rows = []
    for sample, passes in grid.items():
        for k, ok in enumerate(passes, start=1):
            rows.append(
                dict(model="m", task="conversations", item=item, policy=policy, seed=sample,
                     sample=sample, turn=k, pressure=k == 3, check="language:fr",
                     value=math.nan if ok is None else float(ok),
                     passed=None if ok is None else bool(ok))
            )  # fmt: skip
    return pd.DataFrame(rows)


def _tokens(generated=400, injected=20) -> pd.DataFrame:
    return pd.DataFrame(
        [dict(model="m", item="conv-a", policy="none", seed=s, sample=s, generated=generated,
              injected=injected, restated=0) for s in range(4)]
    )  # fmt: skip


def test_adherence_by_turn_and_survival_over_turns():
    curve = turn_curves(_turns())
    assert curve["turn"].tolist() == [1, 2, 3, 4]
    assert curve["a"].tolist() == pytest.approx([1.0, 0.75, 2 / 3, 0.5])
    assert curve["n"].tolist() == [4, 4, 3, 4]
    assert curve["pressure"].tolist() == [False, False, True, False]
    # first failures: s0 at 3, s1 at 4, s2 at 2, s3 never (censored at 4)
    assert curve["survival"].tolist() == pytest.approx([1.0, 0.75, 0.5, 0.25])
    assert (curve["a_low"] <= curve["a"]).all() and (curve["a"] <= curve["a_high"]).all()
    # 4 of 4 pass at turn 1: exact binomial, not [1, 1]
    assert curve.loc[0, "a_low"] == pytest.approx(0.025**0.25) and curve.loc[0, "a_high"] == 1
    assert (curve["survival_low"] <= curve["survival"]).all()
    assert (curve["survival"] <= curve["survival_high"]).all()


def test_pressure_split_pooling_and_token_overhead():
    turns = pd.concat([_turns(), _turns(item="conv-b", grid={0: [1, 1, 1, 1], 1: [1, 1, 1, 1]})])
    summary = conversation_summary(turns, _tokens())
    row = summary[summary["item"] == "conv-a"].iloc[0]
    # before turn 3: 7 of 8 replies pass; from turn 3 on: 4 of 7 determined replies
    assert row["before"] == pytest.approx(7 / 8) and row["after"] == pytest.approx(4 / 7)
    assert row["pressure_delta"] == pytest.approx(4 / 7 - 7 / 8)
    assert row["pressure_delta_low"] <= row["pressure_delta"] <= row["pressure_delta_high"]
    assert row["pressure_delta_n"] == 4 and row["pressure_delta_method"] == "betting"
    assert row["mean_low"] <= row["mean"] <= row["mean_high"] and row["mean_n"] == 4
    assert row["first_fail_median_n"] == 4
    assert row["first_fail_median"] == 3 and row["pressure_turn"] == 3
    assert row["token_overhead"] == pytest.approx(20 / 400)
    assert row["mean"] == pytest.approx((1 + 0.75 + 2 / 3 + 0.5) / 4)
    pooled = summary[summary["item"] == "all"].iloc[0]
    assert pooled["pressure_delta"] == pytest.approx(((4 / 7 - 7 / 8) + 0) / 2)
    assert summary[summary["item"] == "conv-b"].iloc[0]["first_fail_median"] == math.inf


def test_pressure_turn_counts_even_when_its_replies_are_undetermined():
    grid = {0: [1, 1, None, 0], 1: [1, 0, None, 1]}
    summary = conversation_summary(_turns(grid=grid), _tokens())
    row = summary[summary["item"] == "conv-a"].iloc[0]
    assert row["pressure_turn"] == 3
    assert row["before"] == pytest.approx(3 / 4) and row["after"] == pytest.approx(1 / 2)


def test_no_determined_reply_before_the_pressure_turn_is_nan_and_warns_nothing():
    """`before` NaN for every item pools to NaN without numpy's "Mean of empty slice" on
    stderr (a RuntimeWarning leaked to the terminal of `harness run` and `harness score`)."""
    import warnings

    grid = {0: [None, None, 1, 0], 1: [None, None, 0, 1]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = conversation_summary(_turns(grid=grid), _tokens())
    pooled = summary[summary["item"] == "all"].iloc[0]
    assert math.isnan(pooled["before"]) and pooled["n_samples"] == 2


def test_logged_and_replayed_turns_of_one_condition_are_aggregated_apart():
    generated = _turns()  # built without history: a run's own conversations
    logged = _turns(grid={0: [1, 0, 0, 0], 1: [1, 0, 0, 0]}).assign(history="logged")
    logged["conversation_id"] = logged["sample"].map({0: "c-a", 1: "c-b"})
    # two logged conversations sharing one sample index stay two units
    twins = logged.assign(conversation_id=logged["conversation_id"] + "'")
    curve = turn_curves(pd.concat([generated, logged, twins]))
    assert curve["history"].unique().tolist() == ["generated", "logged"]
    mine = curve[curve["history"] == "logged"]
    assert mine["a"].tolist() == pytest.approx([1.0, 0.0, 0.0, 0.0])
    assert mine["n"].tolist() == [4, 4, 4, 4]
    ours = curve[curve["history"] == "generated"]
    assert ours["a"].tolist() == pytest.approx([1.0, 0.75, 2 / 3, 0.5])
    summary = conversation_summary(pd.concat([generated, logged]), _tokens())
    rows = summary.set_index(["item", "history"])
    assert rows.loc[("conv-a", "logged"), "mean"] == pytest.approx(0.25)
    assert rows.loc[("all", "logged"), "n_samples"] == 2  # pooled per history too
    assert rows.loc[("all", "generated"), "n_samples"] == 4
