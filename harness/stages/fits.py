"""Fits stage: alpha of every probed pair's curves, pooled per condition and per model ->
fits.csv (written by `harness.analysis.fits`, the writer `harness probe` uses too)."""

from __future__ import annotations

from typing import Any

from harness.analysis.fits import FitMember, fit_table
from harness.results import CONDITION, FitRow, pair_id, result_frame
from harness.stages.base import Curves, Records
from harness.stages.context import RunContext
from harness.text.records import GenerationRecord

IDENT = list(CONDITION)  # a fit group: one condition


class FitsStage:
    """The probe curves (`Curves`) -> fits.csv; conditions in sorted order, pairs by sample."""

    name = "fits"
    reads = (Records, Curves)
    writes = (FitRow,)

    def run(self, ctx: RunContext) -> dict[str, object]:
        by_key = {r.key: r for r in ctx.records()}
        groups: dict[tuple[str, str, str], list[FitMember]] = {}
        for (model, rkey), arrays in sorted(ctx.read(Curves, {}).items()):
            record = by_key[rkey]
            pair = pair_id(record.item, record.policy, record.sample)
            if record.is_conversation:  # fits over the assistant's positions too
                arrays = {**arrays, "assistant": _assistant_mask(record, arrays)}
            member = FitMember(pair=pair, arrays=arrays, seed=record.sample)
            groups.setdefault((model, record.item, record.policy), []).append(member)
        table = [
            ({"model": model, "item": item, "policy": policy}, sorted(members, key=_sample))
            for (model, item, policy), members in sorted(groups.items())
        ]
        bar = ctx.progress.bar("fits", 1)
        st = ctx.config.stats
        # per-pair fits (one curve's noise, ~100 curves a pair) take at most 200 draws
        fits = fit_table(
            table, ctx.config.probe.t_min, n_boot_pair=min(st.draws, 200),
            n_boot_pooled=st.draws, pool_models=True, ident=IDENT, level=st.level,
        )  # fmt: skip
        fits = result_frame(FitRow, fits)
        bar.finish()
        return {"fits.csv": fits}


def _assistant_mask(record: GenerationRecord, arrays: dict[str, Any]) -> Any:
    import numpy as np

    mask = np.zeros(arrays["kl"].shape[0], dtype=bool)
    positions = [p for p in record.generated_positions() if p < mask.shape[0]]
    mask[positions] = True
    return mask


def _sample(member: FitMember) -> int:
    return int(member.seed)
