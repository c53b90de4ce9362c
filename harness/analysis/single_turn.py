"""Tokens or turns? The single-turn twins (single_turn.csv) against the conversation's own
replies (turns.csv) at equal token distance (docs/architecture.md, "Single-turn twins").

Per sample and turn k >= 2: c_k = the conversation's reply k passed (every check), w_k = the
twin of turn k passed, c_1 = the conversation's first reply passed. Per sample, over its turns
k >= 2: drop = mean(c_1 - c_k) (the conversation's drop), twin_drop = mean(c_1 - w_k) (the drop
at the same tokens after one turn), gap = mean(w_k - c_k). Intervals: `harness.stats.
mean_interval` over the samples (values in [-1, 1]). Reading: `no drop` (drop's interval holds
0 or lies below it), `follows the turns` (the conversation drops and the twin passes more:
gap's interval above 0), `follows the tokens` (the twin drops too: twin_drop's interval above
0, gap's holding 0), `cannot tell` otherwise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.conversations import turn_verdicts
from harness.stats import DEFAULT_LEVEL, mean_interval


def twin_passes(single: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, item, sample, turn): passed (every decided check), positions."""
    s = single[single["passed"].notna() & (single["passed"].astype(str) != "")].copy()
    s["passed"] = s["passed"].map(lambda v: v is True or str(v).lower() == "true")
    keys = ["model", "item", "sample", "turn"]
    return s.groupby(keys, as_index=False).agg(
        twin=("passed", "all"),
        twin_t=("twin_t", "first"),
        conversation_t=("conversation_t", "first"),
    )


def comparison(single: pd.DataFrame, turns: pd.DataFrame, level: float = DEFAULT_LEVEL):
    """(per turn: model, item, turn, n, conversation, twin, first, twin_t, conversation_t;
    per (model, item): n, drop, twin_drop, gap with intervals and the reading)."""
    if single is None or single.empty or turns is None or turns.empty:
        return pd.DataFrame(), pd.DataFrame()
    conv = turn_verdicts(turns)
    conv = conv[(conv["history"] == "generated") & (conv["policy"] == "none")]
    conv = conv[["model", "item", "sample", "turn", "passed"]].rename(columns={"passed": "conv"})
    first = conv[conv["turn"] == 1][["model", "item", "sample", "conv"]]
    both = twin_passes(single).merge(conv, on=["model", "item", "sample", "turn"])
    both = both.merge(first.rename(columns={"conv": "first"}), on=["model", "item", "sample"])
    for col in ("twin", "conv", "first"):
        both[col] = both[col].astype(float)
    per_turn = both.groupby(["model", "item", "turn"], as_index=False).agg(
        n=("sample", "nunique"), conversation=("conv", "mean"), twin=("twin", "mean"),
        first=("first", "mean"), twin_t=("twin_t", "mean"),
        conversation_t=("conversation_t", "mean"),
    )  # fmt: skip
    rows = []
    for (model, item), sub in both.groupby(["model", "item"]):
        per_sample = sub.groupby("sample").agg(
            drop=("first", "mean"), conv=("conv", "mean"), twin=("twin", "mean")
        )
        drop = per_sample["drop"] - per_sample["conv"]  # mean(c_1) - mean(c_k) = mean(c_1 - c_k)
        twin_drop = per_sample["drop"] - per_sample["twin"]
        gap = per_sample["twin"] - per_sample["conv"]
        row = {"model": model, "item": item, "n": len(per_sample)}
        for name, values in (("drop", drop), ("twin_drop", twin_drop), ("gap", gap)):
            ci = mean_interval(values.to_numpy(), lower=-1.0, upper=1.0, level=level)
            row |= {name: ci.estimate, f"{name}_low": ci.low, f"{name}_high": ci.high}
        row["reading"] = reading(row)
        rows.append(row)
    return per_turn, pd.DataFrame(rows)


def reading(row: dict) -> str:
    if not np.isfinite(row["drop_low"]):
        return "cannot tell"
    if row["drop_low"] <= 0:
        return "no drop"
    if row["gap_low"] > 0:
        return "follows the turns"
    if row["twin_drop_low"] > 0 and row["gap_low"] <= 0 <= row["gap_high"]:
        return "follows the tokens"
    return "cannot tell"
