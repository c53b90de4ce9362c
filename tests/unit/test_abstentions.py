"""Issue 56: "all rules" counts every abstention as missing evidence, never as a pass: a judge
that abstains or errs, a language check with too few letters, a whole-reply check with no
verdict for any reason, a conversation turn with no reply. Each makes its unit undecided
(left out of the AUC and a(k), counted), and a gate names the rule and the reason."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.analysis.conversations import turn_curves
from harness.analysis.gate_causes import cut_off_cause
from harness.analysis.rules import rule_frames
from harness.config.gate_specs import GateSpec
from harness.scoring.corrected import window_abstentions
from harness.scoring.passes import window_passes

BASE = dict(model="m", task="t", item="i", policy="none", run_id="r", seed=1, sample=0, turn=1)
# how a rule abstains: the reason its check writes with a NaN verdict
ABSTENTIONS = {
    "judge abstained": ("judge:polite", "no verdict"),
    "judge erred": ("judge:polite", "judge error: HTTP 500"),
    "too few letters": ("language:de", "5 letters < 8"),
    "empty text": ("ifeval:startend:end_checker", "empty text"),
}


def _windows(check: str, reason: str, scope: str) -> pd.DataFrame:
    """One reply of two windows: the regex rule keeps both; `check` has no verdict (on each
    window for scope `window`, on the whole reply for `response`)."""
    rows = []
    for w in (0, 1):
        span = dict(window=w, t_start=1 + 8 * w, t_end=8 + 8 * w, t_gen_start=1 + 8 * w)
        rows.append({**BASE, **span, "scope": "window", "check": "rx", "rule": "rx",
                     "passed": True, "reason": "absent"})  # fmt: skip
        if scope == "window":
            rows.append({**BASE, **span, "scope": "window", "check": check, "rule": check,
                         "passed": None, "reason": reason})  # fmt: skip
    if scope == "response":
        rows.append({**BASE, "window": -1, "t_start": 1, "t_end": 16, "t_gen_start": 1,
                     "scope": "response", "check": check, "rule": check, "passed": None,
                     "reason": reason})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("how", list(ABSTENTIONS))
@pytest.mark.parametrize("scope", ["window", "response"])
def test_a_window_a_rule_abstained_on_is_undecided_not_passed(how, scope):
    check, reason = ABSTENTIONS[how]
    windows = _windows(check, reason, scope)
    # main: both windows passed (the abstaining rule read as absent)
    assert window_passes(windows).empty
    if scope == "window":  # counted as undecided windows (adherence.csv's undecided_windows)
        assert window_abstentions(windows)["undecided"].tolist() == [2]


def test_the_rule_that_decided_keeps_its_own_figures_and_the_abstainer_is_named():
    windows = _windows("language:de", "5 letters < 8", "window")
    rules = rule_frames(windows)["rules.csv"].set_index("rule")
    assert rules.loc["rx", "auc"] == 1.0  # its own verdicts: another rule's are not missing
    assert math.isnan(rules.loc["language:de", "auc"])
    assert rules.loc["language:de", "undecided"] == 2
    assert rules.loc["language:de", "undecided_reason"] == "5 letters < 8 (2 rows)"
    cause = cut_off_cause(
        rules.reset_index(), GateSpec(metric="auc", policy="none", min=0.5), ("m", "i", "none")
    )
    assert cause == "no verdict from language:de on 2 of 2 rows (5 letters < 8 (2 rows))"


def _turns(verdicts: dict[int, list], reason: str = "no verdict") -> pd.DataFrame:
    """turns.csv rows of conversations: turn -> the judge's verdict per sample (None: it
    abstained; "gone": no reply at that turn); the regex rule always holds."""
    rows = []
    for turn, per_sample in verdicts.items():
        for sample, judged in enumerate(per_sample):
            if judged == "gone":
                continue
            base = {**BASE, "item": "conv", "seed": sample, "sample": sample, "turn": turn,
                    "pressure": False}  # fmt: skip
            rows.append({**base, "check": "rx", "rule": "rx", "value": 1.0, "passed": True,
                         "reason": "absent"})  # fmt: skip
            rows.append({**base, "check": "judge:polite", "rule": "polite",
                         "value": math.nan if judged is None else float(judged),
                         "passed": judged,
                         "reason": reason if judged is None else "ok"})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("reason", ["no verdict", "judge error: timeout"])
def test_a_reply_the_judge_abstained_on_has_no_a_k(reason):
    curves = turn_curves(_turns({1: [None, None], 2: [True, False]}, reason)).set_index("turn")
    # main: a(1) = 1.0 from the regex alone
    assert math.isnan(curves.loc[1, "a"]) and curves.loc[1, "undecided"] == 2
    assert curves.loc[2, "a"] == 0.5


def test_a_turn_with_no_reply_may_hide_the_first_failure():
    """Sample 0 has no reply at turn 2 (a failed request), then fails at turn 3 as sample 1:
    S(2)'s band must allow that it failed at turn 2 (main read the gap as a pass)."""
    gap = turn_curves(_turns({1: [True, True], 2: ["gone", True], 3: [False, False]}))
    seen = turn_curves(_turns({1: [True, True], 2: [True, True], 3: [False, False]}))
    low = {name: c.set_index("turn").loc[2, "survival_low"] for name, c in
           (("gap", gap), ("seen", seen))}  # fmt: skip
    assert low["gap"] < low["seen"], low
