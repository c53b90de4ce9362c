"""The files a gate reads besides summary.csv, and the row of a file a gate reads: rule gates
(rules.csv, rule_curves.csv) and the turn metrics of all rules (turn_adherence.csv,
conversations.csv), their columns named as the metric's (harness.analysis.gates reads them)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from harness.config.gate_specs import TURN_METRICS, GateSpec
from harness.results import CONDITION

# The files a gate reads besides summary.csv (harness.config.gate_specs: rule gates, turn metrics)
GATE_TABLES = ("rules.csv", "rule_curves.csv", "turn_adherence.csv", "conversations.csv")
# a conversation's own replies first (a run's, a log's), never a replay's reference history
_OWN_HISTORIES = ("generated", "logged")
# the columns of a turn's a(k) and S(k) (turn_adherence.csv, rule_curves.csv) as the metric's
_AT_TURN = {
    "a_turn": {"a": "", "a_low": "_low", "a_high": "_high", "n": "_n", "a_method": "_method",
               "method": "_method"},
    "survival_turn": {"survival": "", "survival_low": "_low", "survival_high": "_high",
                      "n": "_n", "survival_method": "_method"},
}  # fmt: skip


def gate_source(gate: GateSpec) -> str:
    """The file a gate reads: rules.csv / rule_curves.csv for one rule, turn_adherence.csv /
    conversations.csv for the turn metrics of all rules, else summary.csv."""
    if gate.rule is not None:
        return "rule_curves.csv" if gate.metric in TURN_METRICS else "rules.csv"
    if gate.metric in TURN_METRICS:
        return "turn_adherence.csv"
    return "conversations.csv" if gate.metric == "first_fail_turn" else "summary.csv"


def read_gate_tables(files: Mapping[str, Path]) -> dict[str, pd.DataFrame]:
    """The GATE_TABLES among `files` (name -> path: what the run wrote, never every file a
    folder holds), read as written (conditions and rules as strings)."""
    out = {}
    for name in GATE_TABLES:
        if name in files:
            out[name] = pd.read_csv(
                files[name], dtype={c: str for c in (*CONDITION, "rule", "history")},
                keep_default_na=False, na_values=[""],
            )  # fmt: skip
    return out


def source_rows(gate: GateSpec, frame: pd.DataFrame) -> dict[tuple, dict]:
    """(model, item, policy) -> the row of `frame` the gate reads, its columns named as the
    metric's (`a_turn`, `a_turn_low`...)."""
    if frame.empty:
        return {}
    f = frame
    if gate.rule is not None:
        f = f[f["rule"].astype(str) == gate.rule]
    if gate.metric in TURN_METRICS:
        f = f[f["turn" if "turn" in f.columns else "x"] == gate.turn]
        if "axis" in f.columns:
            f = f[f["axis"] == "turn"]
    if "history" in f.columns:  # the conversation's own history, generated before logged
        f = f[f["history"].isin(_OWN_HISTORIES)]
        f = f.iloc[f["history"].map(_OWN_HISTORIES.index).argsort(kind="stable")]
    renames = dict(_AT_TURN.get(gate.metric, {}))
    renames = {c: f"{gate.metric}{end}" for c, end in renames.items()}
    if gate.metric == "first_fail_turn" and gate.rule is None:
        renames = {c: c.replace("first_fail_median", "first_fail_turn") for c in f.columns}
    rows: dict[tuple, dict] = {}
    for record in f.to_dict("records"):
        key = tuple(str(record[c]) for c in CONDITION)
        named = {renames.get(c, c): v for c, v in record.items() if c not in renames.values()}
        rows.setdefault(key, named)
    return rows
