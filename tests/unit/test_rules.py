"""Rules judged where they apply: a whole-reply rule scores each reply of a conversation in
windows.csv exactly as in turns.csv, each reply's finish reason is recorded, and a rule that
needs a reply's end has no verdict on a reply cut at the token limit (issue 44)."""

from __future__ import annotations

import math

import pytest

from harness.checks import CUT_OFF_REASON
from harness.config.run import TaskSuite
from harness.engines import SamplingSettings
from harness.engines.scripted import CharTokenizer
from harness.policies import ChatFormat, NonePolicy, SampleSpec, policy_run, run_policies
from harness.scoring import score_records
from harness.scoring.turns import score_turns
from harness.text.records import GenerationRecord
from tests.unit.test_conversation_turns import ScriptedEngine

# reply 1 ends (EOS), reply 2 is cut at turn_tokens (8 of 10 characters), reply 3 ends
REPLIES = {1: "ok bye$", 2: "abcdefghij", 3: "fin bye$"}
SUITE = TaskSuite.model_validate(
    {
        "suite": "rules",
        "items": [
            {
                "id": "talk",
                "system": "S",
                "user": "U1",
                "turns": ["U2", "U3"],
                "checks": [
                    {"type": "regex_must_not", "pattern": "x", "rule": "no-x"},
                    {"type": "ifeval", "id": "startend:end_checker",
                     "kwargs": {"end_phrase": "bye"}, "rule": "sign-off"},
                    {"type": "ifeval", "id": "length_constraints:number_words",
                     "kwargs": {"num_words": 2, "relation": "less than"}},
                    {"type": "ifeval", "id": "length_constraints:number_words",
                     "kwargs": {"num_words": 1, "relation": "at least"}},
                ],
            }
        ],
    }
)  # fmt: skip


def _conversation() -> GenerationRecord:
    spec = SampleSpec(system="S", user="U1", turns=[("U2", False), ("U3", False)], seed=1)
    spec.meta.update(model="m", item="talk", task="rules", run_id="r")
    [[record]] = run_policies(
        [(policy_run(NonePolicy()), [spec])],
        ScriptedEngine(REPLIES),
        ChatFormat(CharTokenizer()),
        SamplingSettings(max_tokens=100),
        turn_tokens=8,
    )
    return record


def test_each_reply_records_why_it_ended_and_the_record_key_ignores_it():
    record = _conversation()
    assert record.reply_finishes() == {1: "stop", 2: "length", 3: "stop"}
    again = GenerationRecord.model_validate(record.model_dump())
    assert again.reply_finishes() == record.reply_finishes()
    bare = record.model_copy(
        update={"segments": [s.model_copy(update={"finish": None}) for s in record.segments]}
    )
    assert bare.key == record.key  # stage caches keyed before finish reasons stay valid
    # records written before: the last reply takes the record's reason, the others none
    assert bare.reply_finishes() == {1: "", 2: "", 3: "stop"}


def _by_reply(rows, columns):
    return {(r.turn, r.check): tuple(getattr(r, c) for c in columns) for r in rows}


def test_whole_reply_rules_score_each_reply_in_windows_as_in_turns():
    record, tok = _conversation(), CharTokenizer()
    windows = score_records([record], SUITE, tok)
    turns = score_turns([record], SUITE, tok)
    whole = [r for r in windows if r.window == -1]
    checks = sorted({r.check for r in whole})
    assert len(whole) == 3 * len(checks) == 9  # one row per reply and whole-reply rule
    columns = ("t_start", "t_end", "finish_reason", "passed", "reason")
    turn_rows = [r for r in turns if r.check in checks]
    assert _by_reply(whole, columns) == _by_reply(turn_rows, columns)
    for w in whole:  # values equal, NaN included
        (t,) = [r for r in turn_rows if (r.turn, r.check) == (w.turn, w.check)]
        assert w.value == t.value or (math.isnan(w.value) and math.isnan(t.value))
    # window rows carry their reply's turn and finish reason too
    assert {(r.turn, r.finish_reason) for r in windows if r.window >= 0} == {
        (1, "stop"), (2, "length"), (3, "stop")
    }  # fmt: skip


def test_a_cut_reply_gives_no_verdict_to_rules_that_need_its_end():
    record = _conversation()
    turns = score_turns([record], SUITE, CharTokenizer())
    verdict = {(r.turn, r.check): (r.passed, r.reason) for r in turns}
    words_max = "ifeval:length_constraints:number_words"
    words_min = "ifeval:length_constraints:number_words#2"
    assert verdict[(1, "ifeval:startend:end_checker")] == (True, "followed")
    # reply 2 ("abcdefgh") hit the limit: the sign-off may have come, the word count may grow
    assert verdict[(2, "ifeval:startend:end_checker")] == (None, CUT_OFF_REASON)
    assert verdict[(2, words_max)] == (None, CUT_OFF_REASON)
    # ... but "at least one word" is already met, and more text cannot undo it
    assert verdict[(2, words_min)][0] is True
    assert verdict[(2, "regex_must_not:x")][0] is True  # window rule: the text there decides
    # a reply that ended is judged: "fin bye" has 2 words, not fewer than 2
    assert verdict[(3, words_max)][0] is False


@pytest.mark.parametrize(
    ("check", "value", "stands"),
    [
        ({"type": "regex_must", "pattern": "Lena", "scope": "response"}, 1.0, True),
        ({"type": "regex_must", "pattern": "Lena", "scope": "response"}, 0.0, False),
        ({"type": "regex_must_not", "pattern": "Bank", "scope": "response"}, 0.0, True),
        ({"type": "regex_must_not", "pattern": "Bank", "scope": "response"}, 1.0, False),
        ({"type": "regex_must", "pattern": "Lena$", "scope": "response"}, 1.0, False),
        ({"type": "regex_must", "pattern": "Lena", "scope": "window"}, 0.0, True),
        ({"type": "persona", "name": "Lena", "rivals": ["Max"]}, 1.0, False),
    ],
)
def test_which_verdicts_a_cut_reply_keeps(check, value, stands):
    from harness.checks import CheckResult
    from harness.config.run import TaskItem

    item = TaskItem.model_validate({"id": "i", "system": "s", "user": "u", "checks": [check]})
    (spec,) = item.checks
    result = CheckResult(value=value, reason="x")
    kept = spec.when_cut_off(result)
    assert (kept is result) == stands
    assert stands or kept.reason == CUT_OFF_REASON


def _window(sample, window, turn, t, check, scope, passed):
    first, last = t
    return dict(model="m", task="t", item="i", policy="p", run_id="r", seed=0, sample=sample,
                window=window, turn=turn, t_start=first, t_end=last, t_gen_start=first,
                check=check, scope=scope, passed=passed)  # fmt: skip


def test_all_rules_passes_count_each_reply_s_whole_reply_verdict_on_its_windows():
    import pandas as pd

    from harness.scoring.passes import window_passes

    rows = [
        _window(0, 0, 1, (1, 10), "lang", "window", True),
        _window(0, 1, 1, (11, 20), "lang", "window", True),
        _window(0, 2, 2, (31, 40), "lang", "window", True),
        _window(0, -1, 1, (1, 20), "sign", "response", True),
        _window(0, -1, 2, (31, 40), "sign", "response", False),  # reply 2 misses the sign-off
        _window(1, 0, 1, (1, 10), "lang", "window", None),  # undecided window ...
        _window(1, -1, 1, (1, 10), "sign", "response", None),  # ... and a cut reply
    ]
    frame = pd.DataFrame(rows)
    passes = window_passes(frame)
    # reply 2's window fails with its reply; sample 1 has nothing decided
    assert passes[["sample", "t_start", "passed"]].values.tolist() == [
        [0, 1, True], [0, 11, True], [0, 31, False]
    ]  # fmt: skip
    # a rule with whole-reply rows only: each reply is one window of its span
    alone = window_passes(frame[frame["scope"] == "response"])
    assert alone[["t_start", "t_end", "passed"]].values.tolist() == [[1, 20, True], [31, 40, False]]
    # window-scope rules alone: as before whole-reply rules counted
    assert window_passes(frame[frame["scope"] == "window"])["passed"].all()


def test_rules_csv_has_one_row_per_rule_with_its_own_figures_and_counts():
    from harness.analysis.rules import rule_frames, rule_sentences
    from harness.results import TurnRow, WindowRow, result_frame
    from harness.scoring.score import item_checks

    record, tok = _conversation(), CharTokenizer()
    windows = result_frame(WindowRow, score_records([record], SUITE, tok))
    turns = result_frame(TurnRow, score_turns([record], SUITE, tok))
    (item,) = SUITE.items
    sentences = rule_sentences((item.id, c) for c in item_checks(item))
    frames = rule_frames(windows, turns, sentences=sentences)
    rules = frames["rules.csv"].set_index("rule")
    words = "ifeval:length_constraints:number_words"
    assert list(rules.index) == [words, f"{words}#2", "no-x", "sign-off"]  # key order
    # the sign-off: kept in replies 1 and 3, no verdict on the cut reply 2
    sign = rules.loc["sign-off"]
    assert (sign.judged, sign.failed, sign.cut_off, sign.scope) == (2, 0, 1, "response")
    assert sign.auc == 1.0 and sign.a_turn_first == 1.0 and sign.first_fail_turn == math.inf
    # "fewer than 2 words" broken by both replies that ended: a(k) 0 at turn 1
    limit = rules.loc[words]
    assert (limit.judged, limit.failed, limit.cut_off) == (2, 2, 1)
    assert limit.auc < 1.0 and limit.a_turn_first == 0.0 and limit.first_fail_turn == 1.0
    assert limit.first_below_turn == 1.0 and limit.first_below_t == 1.0
    assert rules.loc["no-x", "scope"] == "window" and rules.loc["no-x", "auc"] == 1.0
    curves = frames["rule_curves.csv"]
    by_turn = curves[(curves["rule"] == words) & (curves["axis"] == "turn")]
    # the cut reply 2 keeps its turn with no a(k) (issue 56: NaN, never left out or 0)
    assert by_turn["x"].tolist() == [1, 2, 3]
    assert by_turn["a"].tolist()[::2] == [0.0, 0.0] and math.isnan(by_turn["a"].iloc[1])
    # the headline counts every rule: the only window-scope rule (no-x) holds throughout,
    # yet the word limit's broken replies bring the all-rules AUC down with them
    from harness.scoring.io import adherence_frames

    headline = adherence_frames(windows)["adherence.csv"]
    window_only = adherence_frames(windows[windows["scope"] == "window"])["adherence.csv"]
    assert window_only["auc"].iloc[0] == 1.0 and headline["auc"].iloc[0] < 0.5


def test_gates_read_one_rule_and_the_turn_metrics():
    import pandas as pd

    from harness.analysis.gate_junit import junit_xml
    from harness.analysis.gate_rows import gate_name
    from harness.analysis.gates import evaluate_gates
    from harness.analysis.rules import rule_frames
    from harness.config.gate_specs import GateSpec
    from harness.results import TurnRow, WindowRow, result_frame

    record, tok = _conversation(), CharTokenizer()
    windows = result_frame(WindowRow, score_records([record], SUITE, tok))
    turns = result_frame(TurnRow, score_turns([record], SUITE, tok))
    from harness.analysis.conversations import conversation_summary, turn_curves

    tables = rule_frames(windows, turns) | {
        "turn_adherence.csv": turn_curves(turns),
        "conversations.csv": conversation_summary(turns, pd.DataFrame()),
    }
    words = "ifeval:length_constraints:number_words"
    value = {"policy": record.policy, "use": "value"}
    gates = [
        GateSpec(metric="auc", rule="sign-off", min=0.9, **value),  # kept where judged
        GateSpec(metric="auc", rule=words, min=0.5, **value),  # broken in every reply
        GateSpec(metric="a_turn", turn=3, rule="sign-off", min=0.5, **value),
        GateSpec(metric="a_turn", turn=1, min=0.5, **value),  # all rules: reply 1 breaks one
        GateSpec(metric="first_fail_turn", rule=words, min=2, **value),
    ]
    out = evaluate_gates(gates, pd.DataFrame(), ["talk"], [record.model], tables=tables)
    assert out["verdict"].tolist() == ["pass", "fail", "pass", "fail", "fail"]
    assert out["rule"].tolist() == ["sign-off", words, "sign-off", "", words]
    names = [gate_name(row) for row in out.to_dict("records")]
    assert names[0] == f"gates[0] auc value (rule sign-off) of {record.policy} >= 0.9 on talk"
    assert names[3].startswith("gates[3] a_turn value at turn 1 (all rules) of ")
    assert "rule sign-off" in junit_xml(out, "rules")
    # a turn that was not scored cannot be verified: it fails, saying so
    (missing,) = evaluate_gates(
        [GateSpec(metric="a_turn", turn=9, rule="sign-off", min=0.5, **value)],
        pd.DataFrame(), ["talk"], [record.model], tables=tables,
    ).to_dict("records")  # fmt: skip
    assert missing["verdict"] == "fail" and "no rule_curves.csv row" in missing["detail"]


@pytest.mark.parametrize(
    ("gate", "problem"),
    [
        ({"metric": "auc", "policy": "none", "rule": "nope", "min": 0.5},
         "rule 'nope' is no rule of its items under 'none'"),
        ({"metric": "auc", "policy": "restate", "min": 0.5},
         "policy 'restate' runs on none of its items"),
        ({"metric": "a_turn", "policy": "none", "min": 0.5}, "needs turn: K"),
    ],
)  # fmt: skip
def test_a_gate_that_would_judge_nothing_is_refused_before_the_run(
    tmp_path, run_cli, gate, problem
):
    import yaml

    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump(SUITE.model_dump(mode="json", exclude_none=True)))
    config = {
        "name": "g", "models": ["tiny-random-llama"], "suites": [str(suite)],
        "policies": ["none", "restate"], "conversation_policies": ["none"], "samples": 2,
        "generation": {"engine": "hf", "max_tokens": 40, "turn_tokens": 8},
        "scoring": {"window": 8}, "gates": [gate],
    }  # fmt: skip
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    code, _, stderr = run_cli(["run", str(path), "--out", str(tmp_path / "out")])
    assert code == 2 and stderr.count("\n") == 1 and problem in stderr, stderr
    assert not (tmp_path / "out").exists()
