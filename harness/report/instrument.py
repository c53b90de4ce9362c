"""What the checks left undecided and what their measured error does to the verdicts: the
report lines on adherence.csv's and turn_adherence.csv's undecided counts and corrected
estimates (docs/architecture.md, "Estimators: corrected")."""

from __future__ import annotations

import math

import pandas as pd

from harness.report.html import fmt_pct, note, table
from harness.stats.text import interval_text

# Undecided windows or replies above this share of a condition's get a report line: below it
# they cannot move a 95 % verdict much; above it the decided ones may not stand for the rest.
UNDECIDED_SHARE = 0.01
CORRECTED_HOW = (
    "Corrected for the instrument: a check that fails some compliant texts (sensitivity < 1) "
    "or passes some violating ones (specificity < 1) reports a biased share. Where the "
    "deciding check's sensitivity and specificity were measured on labelled text, the raw "
    "estimate is inverted (Rogan-Gladen: (raw + Sp - 1) / (Se + Sp - 1), clipped to [0, 1]); "
    "its 95 % interval carries both the sampling error and the validation's (Bonferroni: the "
    "raw interval at 97.5 %, Se and Sp exact at 98.75 % each), so it is wider than the raw one."
)


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _label(row: dict) -> str:
    history = row.get("history")
    where = f"{row['item']} / {row['policy']}"
    return f"{where} ({history})" if isinstance(history, str) and history != "generated" else where


def undecided_windows_note(adherence: pd.DataFrame | None) -> str:
    """One line per condition whose undecided windows exceed UNDECIDED_SHARE ("" if none)."""
    if adherence is None or "undecided_window_share" not in adherence.columns:
        return ""
    lines = []
    for row in adherence.to_dict("records"):
        share = _number(row["undecided_window_share"])
        if share > UNDECIDED_SHARE:
            lines.append(
                f"{row['model']}: {_label(row)}: {int(row['undecided_windows'])} of "
                f"{int(row['windows_total'])} windows ({fmt_pct(share)}) got no verdict"
            )
    if not lines:
        return ""
    head = (
        "Windows without a verdict (no check could decide them, e.g. too few letters): they are "
        "left out of a(t) and AUC, which hold for the decided windows only. "
    )
    return note(head + "; ".join(lines) + ".", cls="claim")


def undecided_turns_note(curve: pd.DataFrame | None) -> str:
    """One line per (condition, history) whose undecided replies exceed UNDECIDED_SHARE."""
    if curve is None or "undecided" not in curve.columns:
        return ""
    keys = [c for c in ("model", "task", "item", "policy", "history") if c in curve.columns]
    lines = []
    for key, group in curve.groupby(keys, sort=True):
        row = dict(zip(keys, key, strict=True))
        undecided = int(group["undecided"].sum())
        replies = undecided + int(group["n"].sum())
        if replies and undecided / replies > UNDECIDED_SHARE:
            lines.append(
                f"{row['model']}: {_label(row)}: {undecided} of {replies} replies "
                f"({fmt_pct(undecided / replies)}) got no verdict"
            )
    if not lines:
        return ""
    head = "Replies without a verdict are left out of a(k), which holds for the decided ones. "
    return note(head + "; ".join(lines) + ".", cls="claim")


def _ci(row: dict, base: str) -> str:
    low, high = _number(row.get(f"{base}_low")), _number(row.get(f"{base}_high"))
    value = _number(row.get(base))
    if math.isnan(value):
        return "–"
    return interval_text(value, low, high, ".2f", no_interval=" (no CI)")


def _width(row: dict, base: str) -> float:
    return _number(row.get(f"{base}_high")) - _number(row.get(f"{base}_low"))


def corrected_auc_part(adherence: pd.DataFrame | None) -> str:
    """The raw and corrected AUC side by side for the conditions with a corrected estimate."""
    if adherence is None or "auc_corrected" not in adherence.columns:
        return ""
    rows = [r for r in adherence.to_dict("records") if not math.isnan(_number(r["auc_corrected"]))]
    if not rows:
        return ""
    body = [
        [r["model"], r["item"], r["policy"], _ci(r, "auc"), _ci(r, "auc_corrected"),
         _width(r, "auc_corrected"), r["auc_corrected_method"]]
        for r in rows
    ]  # fmt: skip
    headers = ["model", "item", "policy", "AUC (raw)", "AUC corrected", "width", "method"]
    return note(CORRECTED_HOW) + table(headers, body)


def corrected_turns_part(curve: pd.DataFrame | None) -> str:
    """a(k) raw and corrected at each condition's first and last turn."""
    if curve is None or "a_corrected" not in curve.columns:
        return ""
    fixed = curve[curve["a_corrected"].map(_number).notna()]
    if fixed.empty:
        return ""
    keys = [c for c in ("model", "task", "item", "policy", "history") if c in fixed.columns]
    body = []
    for _, group in fixed.groupby(keys, sort=True):
        ends = group.sort_values("turn").iloc[[0, -1]].drop_duplicates("turn")
        for r in ends.to_dict("records"):
            body.append([r["model"], _label(r), int(r["turn"]), _ci(r, "a"),
                         _ci(r, "a_corrected"), _width(r, "a_corrected")])  # fmt: skip
    headers = ["model", "item / policy", "turn", "a(k) (raw)", "a(k) corrected", "width"]
    return note(CORRECTED_HOW) + table(headers, body)
