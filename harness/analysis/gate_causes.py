"""Why a gate's condition lacks evidence, in the words a user acts on: replies cut at the token
limit before a whole-reply rule (a sign-off, a word limit) could be judged, read from
rules.csv's per-rule counts (`judged`, `cut_off`, `undecided`). An undetermined (NaN) check
names its cause this way, and an all-rules check says how many replies it left out."""

from __future__ import annotations

import pandas as pd

from harness.config.gate_specs import GateSpec


def _cut_rules(
    rules: pd.DataFrame | None, gate: GateSpec, key: tuple, column: str = "cut_off"
) -> pd.DataFrame | None:
    """rules.csv's rows of the check's condition (and its rule) with replies cut off (or,
    column `undecided`, other verdicts missing)."""
    if rules is None or rules.empty or column not in rules.columns:
        return None
    model, item, policy = key
    rows = rules[
        (rules["model"].astype(str) == model)
        & (rules["item"].astype(str) == item)
        & (rules["policy"].astype(str) == policy)
    ]
    if gate.rule is not None:
        rows = rows[rows["rule"].astype(str) == gate.rule]
    return rows[rows[column].fillna(0) > 0]


def _setting(rows: pd.DataFrame) -> str:
    """The setting that bounds the cut replies: a conversation's turn_tokens, else the single
    reply's budget."""
    talks = "turns" in rows.columns and rows["turns"].notna().any()
    if talks:
        return "generation.turn_tokens"
    return "generation.single_reply_tokens (max_tokens where it is unset)"


def cut_off_cause(rules: pd.DataFrame | None, gate: GateSpec, key: tuple) -> str:
    """`2 of 2 replies cut at the token limit before sign-off, max-80-words could be judged:
    raise generation.single_reply_tokens` for the check of `gate` on condition `key` (model,
    item, policy); "" where no reply of it was cut before a rule's verdict."""
    rows = _cut_rules(rules, gate, key)
    causes = []
    if rows is not None and not rows.empty:
        replies = rows[["judged", "cut_off", "undecided"]].fillna(0).sum(axis=1).astype(int)
        cut, total = int(rows["cut_off"].max()), int(replies.max())
        names = ", ".join(dict.fromkeys(rows["rule"].astype(str)))
        causes.append(
            f"{cut} of {total} replies cut at the token limit before {names} could be judged: "
            f"raise {_setting(rows)}"
        )
    if abstained := _abstained(rules, gate, key):
        causes.append(abstained)
    return "; ".join(causes)


def _abstained(rules: pd.DataFrame | None, gate: GateSpec, key: tuple) -> str:
    """`no verdict from language:fr on 3 of 40 rows (5 letters < 8 (3 rows))`: the rules of the
    check's condition that abstained other than by a cut (missing evidence as well)."""
    rows = _cut_rules(rules, gate, key, "undecided")
    if rows is None or rows.empty:
        return ""
    parts = []
    for row in rows.to_dict("records"):
        total = sum(int(row.get(c) or 0) for c in ("judged", "cut_off", "undecided"))
        reason = row.get("undecided_reason")
        why = f" ({reason})" if isinstance(reason, str) and reason else ""
        parts.append(f"{row['rule']} on {int(row['undecided'])} of {total} rows{why}")
    return "no verdict from " + ", ".join(parts)


def left_out_note(rules: pd.DataFrame | None, gate: GateSpec, key: tuple) -> str:
    """What an all-rules check says of its missing evidence: the replies a rule with no verdict
    left out (counted as missing, never as a pass); "" for a rule gate or when none was."""
    if gate.rule is not None:
        return ""
    cause = cut_off_cause(rules, gate, key)
    return f"all rules leave out a unit a rule has no verdict on: {cause}" if cause else ""
