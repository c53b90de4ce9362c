"""Laws stage: does the prompt's grip vanish or settle? Every mechanism curve (probe pairs) and
behaviour curve (scored samples) against the three laws -> laws.csv
(`harness.analysis.law_table`; docs/architecture.md, "Estimators: laws")."""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.analysis.conversations import turn_verdicts
from harness.analysis.law_sets import BEHAVIOUR, NEXT_TOKEN, frame_units, group_sets, pair_units
from harness.analysis.law_table import law_rows
from harness.results import LawRow, TurnInfluenceRow, TurnRow, WindowRow, result_frame
from harness.scoring.passes import window_passes
from harness.stages.base import Curves, Records
from harness.stages.context import RunContext

# bootstrap draws per curve set: every set refits three laws per draw (~300 sets in the
# quickstart); the floor's p-value counts the draws (no finer than 1 / 201), the decision to
# settle rests on the floor test's law_p Holm-adjusted over the run (law_table.law_rows)
MAX_DRAWS = 200


class LawsStage:
    """The probe curves (`Curves`), windows.csv, turns.csv and turn_influence.csv -> laws.csv."""

    name = "laws"
    reads = (Records, Curves, WindowRow, TurnRow, TurnInfluenceRow)
    writes = (LawRow,)

    def run(self, ctx: RunContext) -> dict[str, object]:
        by_key = {r.key: r for r in ctx.records()}
        units = []
        for (model, rkey), arrays in sorted(ctx.read(Curves, {}).items()):
            units += pair_units(model, by_key[rkey], arrays, ctx.config.probe.t_min)
        if any(r.is_conversation for r in ctx.records()):  # the file exists only then
            influence = ctx.frame(TurnInfluenceRow)
            units += frame_units(influence, "kl_turn", "turn", "kl", NEXT_TOKEN, True)
        units += behaviour_units(ctx)
        bar = ctx.progress.bar("laws", 1)
        st = ctx.config.stats
        sets = group_sets(units, ctx.config.probe.t_min)
        rows = law_rows(sets, draws=min(st.draws, MAX_DRAWS), level=st.level)
        bar.finish()
        return {"laws.csv": result_frame(LawRow, rows)}


def behaviour_units(ctx: RunContext) -> list[Any]:
    """a(t) per sample of the single replies (1/0 per window, x = the window's middle in
    generated tokens: (index + 1/2) x window, the same x in every sample, whatever was injected
    before it) and a(k) per sample of the generated conversations (1/0 per reply): of all
    rules, then of each rule alone for the items with several (`rule` in laws.csv)."""
    conversations = {r.item for r in ctx.records() if r.is_conversation}
    windows = ctx.frame(WindowRow)
    turns = ctx.frame(TurnRow) if conversations else None
    out = _rule_units(windows, turns, conversations, ctx.config.scoring.window, "")
    for rule, (rule_windows, rule_turns) in _each_rule(windows, turns).items():
        out += _rule_units(rule_windows, rule_turns, conversations, ctx.config.scoring.window, rule)
    return out


def _rule_units(
    windows: pd.DataFrame | None, turns: pd.DataFrame | None, conversations: set[str],
    window: int, rule: str,
) -> list[Any]:  # fmt: skip
    """The behaviour units of these rows (all rules, or one `rule`'s)."""
    out: list[Any] = []
    if windows is not None and not windows.empty:
        passes = window_passes(windows)
        passes = passes[~passes["item"].isin(conversations)]
        passes = passes.assign(x=(passes["window"] + 0.5) * window,
                               y=passes["passed"].astype(float))  # fmt: skip
        out += frame_units(passes, "a_t", "x", "y", BEHAVIOUR, False, rule)
    if turns is not None and not turns.empty:
        verdicts = turn_verdicts(turns)
        verdicts = verdicts[verdicts["history"] == "generated"]
        verdicts = verdicts.assign(y=verdicts["passed"].astype(float))
        out += frame_units(verdicts, "a_k", "turn", "y", BEHAVIOUR, True, rule)
    return out


Frames = tuple[pd.DataFrame | None, pd.DataFrame | None]


def _each_rule(windows: pd.DataFrame | None, turns: pd.DataFrame | None) -> dict[str, Frames]:
    """rule -> (its windows.csv rows, its turns.csv rows) of the items that have several rules
    (an item's only rule is its all-rules curve already); a row's rule is its `rule`, else its
    check (files from before rules were named)."""

    def named(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        if frame is None or frame.empty:
            return frame
        rule = frame["rule"].astype(str) if "rule" in frame.columns else frame["check"]
        return frame.assign(rule=rule.where(rule != "", frame["check"].astype(str)))

    windows, turns = named(windows), named(turns)
    frames = [f for f in (windows, turns) if f is not None and not f.empty]
    if not frames:
        return {}
    counts = pd.concat([f[["item", "rule"]] for f in frames]).drop_duplicates()
    several = set(counts.groupby("item")["rule"].nunique().loc[lambda n: n > 1].index)
    out: dict[str, Frames] = {}
    for rule in sorted(set(counts.loc[counts["item"].isin(several), "rule"])):

        def rows(frame: pd.DataFrame | None, rule: str = rule) -> pd.DataFrame | None:
            if frame is None or frame.empty:
                return frame
            return frame[frame["item"].isin(several) & (frame["rule"] == rule)]

        out[rule] = (rows(windows), rows(turns))
    return out
