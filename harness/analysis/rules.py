"""Rules as the unit (issue 44): each rule of an item, alone, through the same estimators as
the all-rules headline -> rules.csv and rule_curves.csv (harness.results.rules).

A rule is a check, or the checks of an item that share one `rule:` name (windows.csv's and
turns.csv's `rule` column; empty in older files: the check). Its a(t), AUC, final and
survival are `harness.scoring.adherence`'s on windows.csv with every other rule's verdicts
left out (the windows stay: a whole-reply rule's verdict covers the windows of its reply, as
in the headline); its a(k) and S(k) are `turn_curves`' on its turns.csv rows. Nothing is
left out in silence: a rule that no unit decided still has its row (NaN figures, its counts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from harness import results
from harness.analysis.conversations import conversation_summary, turn_curves
from harness.analysis.gate_family import prescription_level, with_level
from harness.checks import CUT_OFF_REASON
from harness.results import RuleCurveRow, RuleRow, cells_are, result_frame
from harness.results.base import MODEL_TOKENS
from harness.scoring.adherence import GateLevels, adherence_summary
from harness.scoring.all_rules import OTHER_RULE
from harness.scoring.curves import adherence_curves
from harness.scoring.passes import window_passes
from harness.stats import DEFAULT_LEVEL

TASK_CONDITION = list(results.TASK_CONDITION)
# The level the report orders rules by (first t, first turn below it): fixed, not fitted.
RULE_FALL_LEVEL = 0.8
# a conversation's own replies (a run's, a log's); replays' reference turns are apart
_OWN_HISTORIES = ("generated", "logged")
_SUMMARY = [
    "n_samples", "a_first",
    "auc", "auc_low", "auc_high", "auc_n", "auc_method", "auc_lcb", "auc_ucb",
    "final", "final_low", "final_high", "final_n", "final_method", "final_lcb", "final_ucb",
    "holm_bounds",
    "survival_median", "survival_median_low", "survival_median_high", "survival_median_n",
    "survival_median_method",
]  # fmt: skip


def rule_sentences(checks) -> dict[tuple[str, str], str]:
    """(item id, rule) -> the sentences its checks cite (one a line), from (item id, check)
    pairs."""
    out: dict[tuple[str, str], list[str]] = {}
    for item, check in checks:
        cited = out.setdefault((item, check.rule or check.id), [])
        if check.sentence and check.sentence not in cited:
            cited.append(check.sentence)
    return {key: "\n".join(found) for key, found in out.items()}


def with_rules(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` (windows.csv or turns.csv rows) with `rule` filled: the check's id where a
    file from before rules were named leaves it empty."""
    rule = frame["rule"] if "rule" in frame.columns else pd.Series("", index=frame.index)
    rule = rule.where(rule.notna() & (rule.astype(str) != ""), frame["check"]).astype(str)
    return frame.assign(rule=rule)


def rule_frames(
    windows: pd.DataFrame,
    turns: pd.DataFrame | None = None,
    *,
    sentences: Mapping[tuple[str, str], str] | None = None,
    level: float = DEFAULT_LEVEL,
    anytime: bool = False,
    horizon: float | None = None,
    gate_level: GateLevels | None = None,
    below: float = RULE_FALL_LEVEL,
) -> dict[str, pd.DataFrame]:
    """{"rules.csv": ..., "rule_curves.csv": ...} of scored windows (and a conversation's
    turns). sentences: (item, rule) -> the prompt sentence the rule enforces."""
    windows = with_rules(windows)
    turns = with_rules(turns) if turns is not None and not turns.empty else None
    # the prescription's AUC tests, one per row of rules.csv: their level goes to holm_bounds
    statements = windows.groupby([*TASK_CONDITION, "rule"], sort=False).ngroups
    gate_level = with_level(
        level if gate_level is None else gate_level, prescription_level(level, statements)
    )
    rows, curves = [], []
    for rule in dict.fromkeys(windows["rule"]):
        own = (windows["rule"] == rule).to_numpy()
        # the windows stay (a whole-reply verdict covers its reply's windows), every other
        # rule's verdicts go
        keep = own | (windows["window"] >= 0).to_numpy()
        frame = windows.loc[keep].copy()
        frame["passed"] = frame["passed"].astype(object)  # a bool column takes no None
        frame.loc[~own[keep], "passed"] = None
        # blanked, not missing: that row is another rule's (harness.scoring.all_rules)
        frame.loc[~own[keep], "reason"] = OTHER_RULE
        passes = window_passes(frame)
        summary = {
            tuple(getattr(r, c) for c in TASK_CONDITION): r
            for r in adherence_summary(
                frame, level=level, anytime=anytime, horizon=horizon,
                gate_level=gate_level, passes=passes,
            )
        }  # fmt: skip
        curve = adherence_curves(frame, level=level, anytime=anytime, passes=passes)
        by_turn, by_talk = _turn_rows(turns, rule, level)
        mine = windows.loc[own]
        for key, cond in mine.groupby(TASK_CONDITION, sort=True):
            key = tuple(str(k) for k in key)
            a_t = _condition(curve, key)
            turn_rows = _condition(by_turn, key) if by_turn is not None else None
            talks = _condition(by_talk, key) if by_talk is not None else None
            figures = _turn_figures(turn_rows, talks, below) | {
                "first_below_t": _first_below(a_t["t"].to_numpy(), a_t["a"].to_numpy(float), below),
                "below": below,
            }
            rows.append(_rule_row(key, rule, cond, summary.get(key), figures, sentences))
            curves += _curve_rows(key, rule, a_t, turn_rows)
    # in key order: condition, rule (then axis and x)
    rule_rows = pd.DataFrame(rows, columns=RuleRow.columns()).sort_values(
        list(RuleRow.keys), kind="stable", ignore_index=True
    )
    # the curves' rows hold every column but the last, t_unit (the run's, filled when written)
    curve_rows = pd.DataFrame(curves, columns=RuleCurveRow.columns()[:-1]).sort_values(
        list(RuleCurveRow.keys), kind="stable", ignore_index=True
    )
    rule_rows, curve_rows = result_frame(RuleRow, rule_rows), result_frame(RuleCurveRow, curve_rows)
    return {"rules.csv": rule_rows, "rule_curves.csv": curve_rows}


def _condition(frame: pd.DataFrame, key: tuple) -> pd.DataFrame:
    mask = np.ones(len(frame), dtype=bool)
    for column, value in zip(TASK_CONDITION, key, strict=True):
        mask &= (frame[column].astype(str) == value).to_numpy()
    return frame.loc[mask]


def _turn_rows(turns: pd.DataFrame | None, rule: str, level: float):
    """(turn_curves, conversation_summary) of the rule's own turns.csv rows, a conversation's
    own histories only; (None, None) without any."""
    if turns is None:
        return None, None
    mine = turns[turns["rule"] == rule]
    if mine.empty:
        return None, None
    curves = turn_curves(mine, level=level)
    talks = conversation_summary(mine, pd.DataFrame(), level=level)
    return (
        curves[curves["history"].isin(_OWN_HISTORIES)],
        talks[talks["history"].isin(_OWN_HISTORIES) & (talks["item"] != "all")],
    )


def _first_below(x: np.ndarray, a: np.ndarray, below: float) -> float:
    """The first x where a < below; inf when a never falls below it; NaN without points."""
    decided = ~np.isnan(a)
    if not decided.any():
        return math.nan
    hits = np.nonzero(decided & (a < below))[0]
    return float(x[hits[0]]) if len(hits) else math.inf


def _counts(cond: pd.DataFrame) -> dict:
    passed = cond["passed"]
    decided = cells_are(passed, True) | cells_are(passed, False)
    cut = (cond["reason"].astype(str) == CUT_OFF_REASON) & ~decided
    other = cond.loc[~decided & ~cut, "reason"].fillna("").astype(str).value_counts()
    commonest = (
        f"{other.index[0] or 'no reason given'} ({other.iloc[0]} rows)" if len(other) else ""
    )
    return {
        "judged": int(decided.sum()),
        "failed": int(cells_are(passed, False).sum()),
        "cut_off": int(cut.sum()),
        "undecided": int((~decided & ~cut).sum()),
        "undecided_reason": commonest,
    }


def _turn_figures(turn_rows: pd.DataFrame | None, talks: pd.DataFrame | None, below) -> dict:
    """The rule's figures over turns: its a(k) (`turn_rows`) and its conversations.csv row
    (`talks`: the first failing turn with conversations.csv's interval)."""
    nan = math.nan
    fail = ("first_fail_turn", "first_fail_turn_low", "first_fail_turn_high")
    if turn_rows is None or turn_rows.empty or talks is None or talks.empty:
        return dict.fromkeys(("a_turn_first", "a_turn_last", "a_turn_mean", *fail), nan) | {
            "turns": None, "first_below_turn": nan, "first_fail_turn_n": None,
            "first_fail_turn_method": None,
        }  # fmt: skip
    history = _own_history(turn_rows)
    t = turn_rows[turn_rows["history"] == history].sort_values("turn")
    talk = talks[talks["history"] == history].iloc[0]
    ks, a = t["turn"].to_numpy(), t["a"].to_numpy(float)
    at = dict(zip(ks.tolist(), a.tolist(), strict=True))
    return {
        "turns": int(ks.max()),
        # a turn no sample has a verdict on has no a(k): NaN, never the next turn's value
        "a_turn_first": at.get(1, nan),
        "a_turn_last": float(a[-1]),
        "a_turn_mean": float(np.nanmean(a)) if (~np.isnan(a)).any() else nan,
        "first_below_turn": _first_below(ks, a, below),
        **{name: talk[name.replace("first_fail_turn", "first_fail_median")] for name in fail},
        "first_fail_turn_n": talk["first_fail_median_n"],
        "first_fail_turn_method": talk["first_fail_median_method"],
    }


def _own_history(turn_rows: pd.DataFrame) -> str:
    """One history per condition: the conversation's own (generated, else logged)."""
    return sorted(turn_rows["history"].unique(), key=_OWN_HISTORIES.index)[0]


def _rule_row(key, rule, cond, summary, figures: dict, sentences) -> list:
    model, task, item, policy = key
    scopes = sorted(set(cond["scope"].astype(str)))
    given = [s for s in (sentences or {}).get((item, rule), "").split("\n") if s]
    fields = {name: getattr(summary, name) for name in _SUMMARY} if summary else {}
    if not fields:  # no unit of the rule decided: its row stays, with NaN figures
        fields = {name: math.nan for name in _SUMMARY} | {"n_samples": 0, "holm_bounds": None}
        for metric in ("auc", "final", "survival_median"):
            fields |= {f"{metric}_n": 0, f"{metric}_method": "no decided unit"}
    values = {
        "model": model, "task": task, "item": item, "policy": policy, "rule": rule,
        "sentence": " ".join(given),
        "checks": "; ".join(sorted(set(cond["check"].astype(str)))),
        "scope": "window+response" if len(scopes) > 1 else scopes[0],
        **fields,
        **_counts(cond),
        **figures,
        # the windows' unit of t (a frame read back from a run's windows.csv has it)
        "t_unit": str(cond["t_unit"].iloc[0]) if "t_unit" in cond else MODEL_TOKENS,
    }  # fmt: skip
    return [values[c] for c in RuleRow.columns()]


def _curve_rows(key, rule, a_t: pd.DataFrame, turn_rows: pd.DataFrame | None) -> list:
    out = [
        [*key, rule, "t", int(r.t), r.a, r.a_low, r.a_high, int(r.n), r.method] + [math.nan] * 3
        for r in a_t.itertuples(index=False)
    ]
    if turn_rows is not None and not turn_rows.empty:
        history = _own_history(turn_rows)
        for r in turn_rows[turn_rows["history"] == history].itertuples(index=False):
            out.append(
                [*key, rule, "turn", int(r.turn), r.a, r.a_low, r.a_high, int(r.n),
                 r.a_method, r.survival, r.survival_low, r.survival_high]
            )  # fmt: skip
    return out
