"""Laws stage: does the prompt's grip vanish or settle? Every mechanism curve (probe pairs) and
behaviour curve (scored samples) against the three laws -> laws.csv
(`harness.analysis.law_table`; docs/architecture.md, "Estimators: laws")."""

from __future__ import annotations

from typing import Any

from harness.analysis.conversations import turn_verdicts
from harness.analysis.law_table import (
    BEHAVIOUR,
    NEXT_TOKEN,
    frame_units,
    group_sets,
    law_rows,
    pair_units,
)
from harness.results import LawRow, TurnInfluenceRow, TurnRow, WindowRow, result_frame
from harness.scoring.passes import window_passes
from harness.stages.base import Curves, Records
from harness.stages.context import RunContext

# bootstrap draws per curve set: every set refits three laws per draw (~300 sets in the
# quickstart); the floor's p-value counts the draws (no finer than 1 / 201), the decision to
# settle rests on the chooser's paired t-test (law_table.law_rows), whose p-value is exact
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
            units += pair_units(model, by_key[rkey], arrays)
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
    before it) and a(k)
    per sample of the generated conversations (1/0 per reply)."""
    conversations = {r.item for r in ctx.records() if r.is_conversation}
    out = []
    windows = ctx.frame(WindowRow)
    if not windows.empty:
        passes = window_passes(windows)
        passes = passes[~passes["item"].isin(conversations)]
        passes = passes.assign(x=(passes["window"] + 0.5) * ctx.config.scoring.window,
                               y=passes["passed"].astype(float))  # fmt: skip
        out += frame_units(passes, "a_t", "x", "y", BEHAVIOUR, False)
    turns = ctx.frame(TurnRow) if conversations else None
    if turns is not None and not turns.empty:
        verdicts = turn_verdicts(turns)
        verdicts = verdicts[verdicts["history"] == "generated"]
        verdicts = verdicts.assign(y=verdicts["passed"].astype(float))
        out += frame_units(verdicts, "a_k", "turn", "y", BEHAVIOUR, True)
    return out
