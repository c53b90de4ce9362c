"""Issue 56: "all rules" counts a rule with no verdict as missing evidence, never as a pass.
Two single-reply items whose every reply is cut at the token limit: the window-scope rule
holds, the sign-off and the word limit get no verdict (the reply's end is missing). The
all-rules AUC is then undetermined, not 1.00, and the gates name the cause (the replies cut,
the setting to raise) instead of "auc undetermined (NaN): fails"."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from harness.analysis.conversations import turn_curves
from harness.analysis.rules import rule_frames
from harness.checks import CUT_OFF_REASON
from harness.engines.scripted import ScriptedEngine
from harness.pipeline import STAGES, run_stages
from harness.scoring.passes import window_passes
from tests.scripted_run import scripted_run

CHECKS = [
    {"type": "regex_must_not", "pattern": "Sparkasse", "rule": "no-competitors"},
    {"type": "ifeval", "id": "length_constraints:number_words",
     "kwargs": {"num_words": 81, "relation": "less than"}, "rule": "max-80-words"},
    {"type": "ifeval", "id": "startend:end_checker", "kwargs": {"end_phrase": "Viele Grüße"},
     "rule": "sign-off"},
]  # fmt: skip
SUITE = {
    "suite": "cut",
    "items": [
        {"id": f"bank-{k}", "system": "SYS Antworte kurz.", "user": f"Frage {k}?",
         "checks": CHECKS}
        for k in (1, 2)
    ],
}  # fmt: skip
CONFIG = {
    "name": "cut",
    "models": ["tiny-random-llama"],
    "suites": ["suite.yaml"],
    "policies": ["none"],
    "samples": 2,
    "generation": {"engine": "hf", "max_tokens": 32},
    "scoring": {"window": 8},
    "probe": {"enabled": False},
    "theory": {"relay": None, "bias_lams": []},
    "stats": {"family": "none"},  # one check's verdict alone, as before the family
    "gates": [
        {"metric": "auc", "policy": "none", "min": 0.1},
        {"metric": "auc", "policy": "none", "rule": "sign-off", "min": 0.5},
    ],
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cut")
    (folder / "suite.yaml").write_text(yaml.safe_dump(SUITE, allow_unicode=True))
    (folder / "run.yaml").write_text(yaml.safe_dump(CONFIG))
    out = folder / "out"
    # every reply " yes yes ..." to the token limit: cut, with no sign-off in sight
    with scripted_run(folder / "run.yaml", out, ScriptedEngine({"SYS": 1.0})) as ctx:
        run_stages(ctx, STAGES, show_progress=False)
    return out


def test_all_rules_is_undetermined_when_whole_reply_rules_have_no_verdict(run):
    summary = pd.read_csv(run / "summary.csv").set_index("item")
    assert summary["auc"].isna().all(), summary["auc"]  # it read 1.00 before
    rules = pd.read_csv(run / "rules.csv").set_index(["item", "rule"])
    assert rules.loc[("bank-1", "no-competitors"), "auc"] == 1.0  # the rule that was judged
    assert rules.loc[("bank-1", "sign-off"), "cut_off"] == 2


def test_a_gate_without_a_verdict_names_the_replies_cut_and_the_setting(run):
    gates = pd.read_csv(run / "gates.csv")
    assert (gates["verdict"] == "fail").all()  # the all-rules gate passed before
    cause = (
        "2 of 2 replies cut at the token limit before max-80-words, sign-off could be judged: "
        "raise generation.single_reply_tokens"
    )
    all_rules = gates[gates["rule"].isna()]["detail"].tolist()
    assert len(all_rules) == 2 and all(cause in d for d in all_rules), all_rules
    sign_off = gates[gates["rule"] == "sign-off"]["detail"].tolist()
    assert all(
        "2 of 2 replies cut at the token limit before sign-off could be judged" in d
        for d in sign_off
    ), sign_off
    assert not any("undetermined (NaN)" in d for d in gates["detail"])


def _frame(sign_off_passed):
    """One reply of two windows, both keeping the window rule, and its sign-off's verdict."""
    base = dict(model="m", task="t", item="i", policy="none", run_id="r", seed=1, sample=0,
                turn=1, t_gen_start=1)  # fmt: skip
    windows = [
        {**base, "window": w, "t_start": 1 + 8 * w, "t_end": 8 + 8 * w, "scope": "window",
         "check": "rx", "passed": True}
        for w in (0, 1)
    ]  # fmt: skip
    reply = {**base, "window": -1, "t_start": 1, "t_end": 16, "scope": "response",
             "check": "sign-off", "passed": sign_off_passed,
             "reason": CUT_OFF_REASON if sign_off_passed is None else "followed"}  # fmt: skip
    for row in windows:
        row["t_gen_start"] = row["t_start"]
    return pd.DataFrame([*windows, reply])


@pytest.mark.parametrize(
    ("sign_off", "expected"), [(True, [True, True]), (False, [False, False]), (None, [])]
)
def test_a_window_whose_reply_lacks_a_verdict_is_left_out_not_passed(sign_off, expected):
    passes = window_passes(_frame(sign_off))
    assert passes["passed"].tolist() == expected
    if not expected:  # the AUC over no decided window: undetermined
        assert math.isnan(float(passes["passed"].mean()))


def test_a_window_that_fails_one_rule_while_another_lacks_its_verdict_is_left_out():
    """Keeping such windows would keep exactly the failing ones: the all-rules AUC of a
    condition whose every reply was cut would read 0 where it cannot be known."""
    frame = _frame(None)
    frame.loc[frame["window"] == 0, "passed"] = False
    assert window_passes(frame)["passed"].tolist() == []


def _turn_rows():
    """Two conversations of three replies: reply 1 cut before its sign-off (the language
    rule kept), reply 2 breaks the sign-off, reply 3 keeps both."""
    rows = []
    for sample in (0, 1):
        for turn, sign_off in ((1, None), (2, False), (3, True)):
            base = dict(model="m", task="t", item="conv-login", policy="none", run_id="r",
                        seed=sample, sample=sample, turn=turn, pressure=False,
                        t_start=1 + 100 * (turn - 1), t_end=90 + 100 * (turn - 1),
                        finish_reason="length" if sign_off is None else "stop")  # fmt: skip
            rows.append({**base, "check": "language:de", "rule": "german", "value": 1.0,
                         "passed": True, "reason": "de"})  # fmt: skip
            rows.append({**base, "check": "end_checker", "rule": "sign-off",
                         "value": math.nan if sign_off is None else float(sign_off),
                         "passed": sign_off,
                         "reason": CUT_OFF_REASON if sign_off is None else "judged"})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_reply_cut_before_a_rule_could_judge_it_has_no_a_k():
    curves = turn_curves(_turn_rows()).set_index("turn")
    # reply 1 kept the language and lost its end: missing evidence, not a pass (a(1) read 1.0)
    assert 1 not in curves.index or math.isnan(curves.loc[1, "a"])
    assert curves.loc[2, "a"] == 0.0 and curves.loc[3, "a"] == 1.0
    if 1 in curves.index:
        assert curves.loc[1, "undecided"] == 2


def test_a_rule_with_no_verdict_at_turn_1_has_a_turn_first_nan_not_0():
    turns = _turn_rows()
    windows = turns.assign(window=-1, scope="response", t_gen_start=turns["t_start"])
    frames = rule_frames(windows, turns)
    rules = frames["rules.csv"].set_index("rule")
    # conv-login's sign-off: no verdict at turn 1, broken at turn 2 (it read a_turn_first 0.0)
    assert math.isnan(rules.loc["sign-off", "a_turn_first"])
    assert rules.loc["sign-off", "a_turn_last"] == 1.0
    assert rules.loc["german", "a_turn_first"] == 1.0
