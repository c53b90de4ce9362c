"""Issue 56's prescription: per rule of each item, does it hold, where it breaks, and the
cheapest of the run's policies that passes (never one whose quality does not hold), written
as prescription.csv and shown first in report.html and the terminal summary."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.prescription import NO_FIX, NOT_NEEDED, prescribe
from harness.report.html import esc
from harness.report.load import RunData
from harness.report.prescription import prescription_section
from harness.report.render import render_report
from harness.report.terminal import print_summary
from tests.script_module import load_script

MAKE_RUN = Path(__file__).parents[1] / "data" / "report_run" / "make_run.py"
POLICIES = ("none", "restate", "periodic", "adaptive")


def _rules(auc: dict[str, tuple[float, float, float]], item="conv", rule="sign-off", turn=True):
    """rules.csv rows of one rule: policy -> (auc, lcb, ucb), 8 samples each."""
    rows = []
    for policy, (value, lcb, ucb) in auc.items():
        rows.append(dict(
            model="m", task="s", item=item, policy=policy, rule=rule, sentence="Sign off.",
            auc=value, auc_low=lcb - 0.05, auc_high=min(ucb + 0.05, 1), auc_n=8, auc_lcb=lcb,
            auc_ucb=ucb, below=0.8, n_samples=8,
            first_fail_turn=2.0 if turn else math.nan, first_fail_turn_low=1.0,
            first_fail_turn_high=3.0, survival_median=math.nan if turn else 40.0,
            survival_median_low=30.0, survival_median_high=64.0,
        ))  # fmt: skip
    return pd.DataFrame(rows)


def _gates(verdicts: dict[str, str], item="conv", rule="sign-off"):
    return pd.DataFrame([
        dict(gate=k, metric="auc", policy=p, rule=rule, item=item, model="m", verdict=v,
             samples_needed=40.0 if v == "undecided" else math.nan)
        for k, (p, v) in enumerate(verdicts.items())
    ])  # fmt: skip


def _summary(tokens: dict[str, int], item="conv", **extra):
    return pd.DataFrame([
        dict(model="m", item=item, policy=p, auc=0.5, tokens_generated=1000,
             tokens_injected=n, tokens_restated=0, token_overhead=n / 1000,
             **{k: v[p] for k, v in extra.items()})
        for p, n in tokens.items()
    ])  # fmt: skip


def _policies(delta: dict[str, float], item="conv"):
    return pd.DataFrame([
        dict(model="m", item=item, policy=p, metric="auc", delta=d, delta_low=d - 0.2,
             delta_high=min(d + 0.2, 1.0))
        for p, d in delta.items()
    ])  # fmt: skip


AUCS = {"none": (0.1, 0.0, 0.3), "restate": (0.95, 0.85, 1.0), "periodic": (0.9, 0.82, 0.97),
        "adaptive": (0.4, 0.2, 0.6)}  # fmt: skip
GATES = {"none": "fail", "restate": "pass", "periodic": "pass", "adaptive": "fail"}
TOKENS = {"none": 0, "restate": 400, "periodic": 100, "adaptive": 50}
COSTS = [
    dict(model="m", item="conv", policy=p, cost_usd=c)
    for p, c in (("none", 0.10), ("restate", 0.50), ("periodic", 0.30), ("adaptive", 0.2))
]


def test_a_broken_rule_gets_the_cheapest_policy_whose_gates_pass_with_its_paired_gain():
    (row,) = prescribe(
        _rules(AUCS),
        _summary(TOKENS),
        _gates(GATES),
        _policies({"restate": 0.8, "periodic": 0.7, "adaptive": 0.0}),
        COSTS,
    )
    assert (row.rule, row.holds, row.basis) == ("sign-off", "no", "gates[0]")
    assert (row.breaks_axis, row.breaks, row.breaks_low, row.breaks_high) == ("turn", 2, 1, 3)
    assert row.fix == "periodic" and row.fix_tokens == 100 and row.fix_overhead == 0.1
    assert (row.fix_delta, row.fix_delta_low, row.fix_delta_high) == pytest.approx((0.7, 0.5, 0.9))
    assert row.fix_usd == pytest.approx(0.20)
    assert "adaptive: fails (gates[3])" in row.rejected
    assert "restate: passes, costs more" in row.rejected


def test_a_policy_whose_quality_does_not_hold_is_never_picked():
    quality = {"quality_holds": {"none": True, "restate": True, "periodic": False,
                                 "adaptive": True}}  # fmt: skip
    (row,) = prescribe(_rules(AUCS), _summary(TOKENS, **quality), _gates(GATES))
    assert row.fix == "restate" and row.fix_tokens == 400
    assert "periodic: its quality does not hold (quality_holds)" in row.rejected


def test_none_of_the_tried_policies_passes():
    gates = {p: "fail" for p in POLICIES}
    (row,) = prescribe(_rules(AUCS), _summary(TOKENS), _gates(gates))
    assert row.fix == NO_FIX and math.isnan(row.fix_tokens) and math.isnan(row.fix_delta)


def test_without_gates_the_auc_bounds_decide_against_the_target_and_say_how_many_would_tell():
    holds = {"none": (0.97, 0.85, 1.0), "restate": (1.0, 0.9, 1.0)}
    (row,) = prescribe(_rules(holds, turn=False), _summary({"none": 0, "restate": 10}))
    assert (row.holds, row.basis, row.fix) == ("yes", "AUC vs 0.8", NOT_NEEDED)
    assert (row.breaks_axis, row.breaks) == ("t", 40)
    unsure = {"none": (1.0, 0.63, 1.0)}  # 8 of 8 pass: the bound is below 0.8 at n = 8
    (row,) = prescribe(_rules(unsure), None)
    assert row.holds == "cannot tell" and 8 < row.samples_to_tell < 40
    broken = {"none": (0.2, 0.05, 0.5), "restate": (0.9, 0.85, 1.0)}
    (row,) = prescribe(_rules(broken), _summary({"none": 0, "restate": 10}))
    assert (row.holds, row.fix) == ("no", "restate")


def test_an_undecided_gate_gives_its_samples_needed():
    gates = {"none": "undecided", "restate": "pass", "periodic": "undecided",
             "adaptive": "fail"}  # fmt: skip
    (row,) = prescribe(_rules(AUCS), _summary(TOKENS), _gates(gates))
    assert (row.holds, row.samples_to_tell, row.fix) == ("cannot tell", 40.0, "restate")


def test_the_table_escapes_the_run_s_strings():
    hostile = "<script>alert(1)</script>"
    rules = _rules(AUCS, item=hostile, rule='"><img src=x>')
    data = RunData(run_dir=Path("."), frames={"rules.csv": rules})
    html, _ = prescription_section(data)
    assert "<script>" not in html and "<img" not in html
    assert esc(hostile) in html and esc('"><img src=x>') in html


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory) -> Path:
    module = load_script(MAKE_RUN, "report_make_run")
    run = module.build_run(tmp_path_factory.mktemp("prescription") / "run")
    render_report(run)
    return run


def test_the_prescription_is_the_report_s_first_section_and_prescription_csv(synthetic_run):
    html = (synthetic_run / "report.html").read_text(encoding="utf-8")
    main = html[html.index("<main>") :]
    assert main.index("<section") == main.index('<section id="prescription">')
    frame = pd.read_csv(synthetic_run / "prescription.csv")
    rules = pd.read_csv(synthetic_run / "rules.csv")
    assert len(frame) == len(rules[["model", "item", "rule"]].drop_duplicates())
    section = main[: main.index("</section>")]
    for row in frame.itertuples():
        assert f"<td>{esc(row.item)}</td><td>{esc(row.rule)}</td>" in section
        assert f"<td>{esc(row.fix)}</td>" in section


def test_the_terminal_summary_prints_the_prescription_before_the_gates(synthetic_run, capsys):
    from rich.console import Console

    console = Console(width=200, record=True)
    print_summary(synthetic_run, console)
    text = console.export_text()
    assert text.index("What breaks and what fixes it") < text.index("adherence and decay")
    frame = pd.read_csv(synthetic_run / "prescription.csv", keep_default_na=False)
    for item in frame["item"]:
        assert item in text
    # the budget its decided rows share, as under the report's table
    controls = [c for c in frame.get("error_control", []) if c]
    assert controls and "Error control of the decided rows: " + controls[0] in " ".join(
        text.split()
    )


def test_the_fix_s_gain_is_the_rule_s_own_paired_difference():
    """restate fixes the sign-off (0 -> 1 in every window) and leaves the language as it was:
    the gain the prescription shows for each is that rule's alone, on the same samples."""
    from harness.analysis.prescription import rule_gains

    from .test_analysis_frames import windows_frame

    conds = [("m", "conv", p) for p in ("none", "restate")]
    sign_off = windows_frame(conds, n_samples=8, passed=lambda m, i, p, s, w: p == "restate")
    language = windows_frame(conds, n_samples=8, passed=lambda m, i, p, s, w: w < 4)
    windows = pd.concat([sign_off.assign(rule="sign-off"), language.assign(rule="german")])
    gains = rule_gains(windows).set_index(["rule", "policy"])
    assert gains.loc[("sign-off", "restate"), "delta"] == 1.0
    assert gains.loc[("sign-off", "restate"), "delta_low"] > 0  # 8 pairs decide it
    assert gains.loc[("german", "restate"), "delta"] == 0.0
    aucs = {"none": (0.0, 0.0, 0.3), "restate": (1.0, 0.85, 1.0)}
    rules = pd.concat([_rules(aucs, rule="sign-off"), _rules(aucs, rule="german")])
    rows = {r.rule: r for r in prescribe(rules, _summary({"none": 0, "restate": 10}),
                                         policies=rule_gains(windows))}  # fmt: skip
    assert rows["sign-off"].fix_delta == 1.0 and rows["german"].fix_delta == 0.0


def test_a_rule_every_reply_of_which_was_cut_says_so_and_is_no_pass():
    from harness.report.prescription import holds_text

    rules = _rules({"none": (math.nan, math.nan, math.nan)}).assign(cut_off=16)
    (row,) = prescribe(rules, None)
    assert row.holds == "cannot tell" and row.fix != NOT_NEEDED
    assert holds_text(row) == "no verdict: 16 replies cut at the token limit"


def test_a_remedy_that_adheres_with_garbage_is_not_prescribed():
    """Issue 53: split-softmax keeps the rule (its AUC clears the target) and adds no token, so
    it is the cheapest passing policy, but the unsteered model finds its replies 4x as
    surprising as none's: quality.csv (from the records' perplexities) rules it out, and the
    costlier restate is the fix."""
    from harness.analysis.quality import quality_frame
    from harness.report.prescription import prescription_rows
    from harness.text.records import GenerationRecord, Segment, TokenCounts

    def record(policy: str, k: int, ppl: float) -> GenerationRecord:
        ids = list(range(100 * k, 100 * k + 40))
        return GenerationRecord(
            model="m", item="conv", policy=policy, seed=0, sample=k, prompt_ids=[1],
            continuation_ids=ids, segments=[Segment(kind="generated", start=0, end=40,
            source="model")], text="", finish_reason="length", engine="hf", seconds=1.0,
            tokens=TokenCounts(generated=40), perplexity=ppl,
        )  # fmt: skip

    ppl = {"none": 8.0, "restate": 9.0, "split_softmax-0.25": 32.0}
    records = [record(p, k, v) for p, v in ppl.items() for k in range(8)]
    aucs = {"none": AUCS["none"], "restate": AUCS["restate"],
            "split_softmax-0.25": (0.95, 0.86, 1.0)}  # fmt: skip
    frames = {
        "rules.csv": _rules(aucs),
        "summary.csv": _summary({"none": 0, "restate": 400, "split_softmax-0.25": 0}),
        "quality.csv": quality_frame(records, pd.DataFrame()),
    }
    (row,) = prescription_rows(RunData(run_dir=Path("."), frames=frames))
    assert row.fix == "restate"
    assert "split_softmax-0.25: its quality does not hold (perplexity 4.00x none's)" in row.rejected
    # without quality.csv the remedy would be the fix: the rule is what turns it away
    del frames["quality.csv"]
    (row,) = prescription_rows(RunData(run_dir=Path("."), frames=frames))
    assert row.fix == "split_softmax-0.25"


def test_an_all_rules_gate_judges_the_one_rule_of_a_one_rule_item():
    """The quickstart gates restate's all-rules AUC on a one-rule item (no `rule:`): that AUC
    is the rule's, so the gate names restate as the fix where the AUC against the default
    target 0.8 could not (restate's 0.78 [lcb 0.45] cannot tell against 0.8)."""
    aucs = {"none": (0.0, 0.0, 0.31), "restate": (0.78, 0.45, 1.0)}
    all_rules = _gates({"restate": "pass"}, rule="")
    (row,) = prescribe(_rules(aucs), _summary({"none": 0, "restate": 40}), all_rules)
    assert (row.holds, row.fix) == ("no", "restate")
    # an item with a second rule: the all-rules gate says nothing about each rule alone
    two = pd.concat([_rules(aucs), _rules(aucs, rule="german")])
    rows = prescribe(two, _summary({"none": 0, "restate": 40}), all_rules)
    assert [r.fix for r in rows] == [NO_FIX, NO_FIX]
