"""The share of replies that ended at the token limit, for the terminal and the report.

A whole-reply rule (a word limit, a sign-off) has no verdict on a reply cut at the limit
(`Check.when_cut_off`): a run whose replies are mostly cut says little about those rules,
so the share is stated beside the results, overall and per rule. The replies counted are those
a whole-reply rule judges: windows.csv's `response` rows, one per reply (each reply of a
conversation, the response of a single reply), by their `finish_reason`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

REPLY = ["run_id", "model", "item", "policy", "sample", "turn"]  # one reply of one sample
COLUMNS = [*REPLY, "scope", "finish_reason"]


def replies_cut(windows: pd.DataFrame) -> tuple[int, int]:
    """(replies that hit the token limit, replies) among those a whole-reply rule judges."""
    judged = windows[windows["scope"] == "response"].drop_duplicates(REPLY)
    return int((judged["finish_reason"] == "length").sum()), len(judged)


def cut_by_rule(rules: pd.DataFrame | None) -> list[tuple[str, int, int]]:
    """(rule, replies with no verdict (cut off), replies) per whole-reply rule that has any,
    over rules.csv's conditions."""
    if rules is None or not len(rules):
        return []
    whole = rules[rules["scope"] == "response"]
    sums = whole.groupby("rule", sort=True)[["cut_off", "judged", "undecided"]].sum()
    return [
        (str(rule), int(row.cut_off), int(row.cut_off + row.judged + row.undecided))
        for rule, row in sums.iterrows()
        if row.cut_off
    ]


def truncation_line(windows: pd.DataFrame | None, rules: pd.DataFrame | None) -> str:
    """ "Replies cut at the token limit: c of n (p %)" with each rule's "no verdict (cut
    off)" count; "" when no whole-reply rule judged a reply."""
    if windows is None or "scope" not in windows.columns:
        return ""
    cut, total = replies_cut(windows)
    if not total:
        return ""
    line = f"Replies cut at the token limit: {cut} of {total} ({100 * cut / total:.0f} %)"
    parts = [f"{rule} {n} of {of}" for rule, n, of in cut_by_rule(rules)]
    return line + ("; no verdict (cut off): " + ", ".join(parts) if parts else "")


def read_truncation_line(run_dir: Path) -> str:
    """`truncation_line` of a run folder's windows.csv and rules.csv ("" without them)."""
    folder = Path(run_dir)
    windows_csv, rules_csv = folder / "windows.csv", folder / "rules.csv"
    if not windows_csv.is_file():
        return ""
    header = pd.read_csv(windows_csv, nrows=0).columns
    if not set(COLUMNS) <= set(header):
        return ""
    windows = pd.read_csv(windows_csv, usecols=COLUMNS, dtype={"turn": "Int64"})
    rules = pd.read_csv(rules_csv) if rules_csv.is_file() else None
    return truncation_line(windows, rules)
