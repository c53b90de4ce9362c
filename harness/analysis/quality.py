"""quality.csv: speed and quality of each (model, item, policy) beside `none`'s (docs/remedies.md).

A remedy that keeps the rule by degrading the text is caught three ways: the unsteered model's
perplexity of its replies (`GenerationRecord.perplexity`, hf runs), a degeneration rate
(repeated 4-grams within a reply: the loops small models fall into), and the task checks' own
verdicts. The quality rule (`quality_holds`, the one the prescription reads): perplexity at
most PERPLEXITY_LIMIT x `none`'s on the same item, where measured, and the degeneration not
shown above `none`'s (the paired interval of the per-sample difference does not lie above 0).
Speed: wall milliseconds per generated token from the records' `seconds`, which
share each engine batch's time among its requests, so policies of one run compare side by side.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.config.policy_specs import BASELINE
from harness.results import QualityRow, result_frame
from harness.stats import DEFAULT_LEVEL, paired_interval
from harness.text.records import GenerationRecord

NGRAM = 4
# the bound: a remedy whose replies the plain model finds more than 1.5x as surprising
# as the baseline's is producing other text, not the same text with the rule kept
PERPLEXITY_LIMIT = 1.5


def degeneration(tokens: list[int], n: int = NGRAM) -> float:
    """Share of the n-grams of `tokens` that already occurred earlier in it (NaN: none)."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    if not grams:
        return math.nan
    return 1 - len(set(grams)) / len(grams)


def generated_tokens(record: GenerationRecord) -> list[int]:
    ids = record.continuation_ids
    return [
        t for seg in record.segments if seg.kind == "generated" for t in ids[seg.start : seg.end]
    ]


def _condition(records: list[GenerationRecord]) -> dict[str, float]:
    generated = sum(r.tokens.generated for r in records)
    seconds = sum(r.seconds for r in records)
    nll = [(math.log(r.perplexity), r.tokens.generated) for r in records if r.perplexity]
    weight = sum(w for _, w in nll)
    rates = [x for x in (degeneration(generated_tokens(r)) for r in records) if not math.isnan(x)]
    degen = float(np.mean(rates)) if rates else math.nan  # no reply long enough to tell
    return {
        "n": len(records),
        "generated": generated,
        "ms_per_token": 1000 * seconds / generated if generated else math.nan,
        "perplexity": math.exp(sum(v * w for v, w in nll) / weight) if weight else math.nan,
        "degeneration": degen,
    }


def quality_holds(perplexity_ratio: float, degeneration_low: float) -> bool | None:
    """The quality rule: perplexity within PERPLEXITY_LIMIT of `none`'s (where measured) and
    degeneration not shown above `none`'s (the paired difference's lower bound <= 0). None
    where neither is known."""
    known = [x for x in (perplexity_ratio, degeneration_low) if math.isfinite(x)]
    if not known:
        return None
    too_surprising = math.isfinite(perplexity_ratio) and perplexity_ratio > PERPLEXITY_LIMIT
    more_loops = math.isfinite(degeneration_low) and degeneration_low > 0
    return not (too_surprising or more_loops)


def _degenerations(records: list[GenerationRecord]) -> dict[tuple, float]:
    """{(run_id, seed, sample): degeneration}: the pairing key of policies.csv."""
    return {(r.run_id, r.seed, r.sample): degeneration(generated_tokens(r)) for r in records}


def _degeneration_delta(
    records: list[GenerationRecord], none: list[GenerationRecord] | None, level: float
) -> tuple[float, float, float]:
    if not none:
        return math.nan, math.nan, math.nan
    mine, base = _degenerations(records), _degenerations(none)
    pairs = sorted(k for k in mine if k in base)
    ci = paired_interval([mine[k] for k in pairs], [base[k] for k in pairs], level=level)
    return ci.estimate, ci.low, ci.high


def quality_frame(
    records: list[GenerationRecord], windows: pd.DataFrame, level: float = DEFAULT_LEVEL
) -> pd.DataFrame:
    """One QualityRow per (model, item, policy) of the records."""
    groups: dict[tuple[str, str, str], list[GenerationRecord]] = {}
    for record in records:
        groups.setdefault((record.model, record.item, record.policy), []).append(record)
    stats = {key: _condition(rs) for key, rs in groups.items()}
    passed = _pass_rates(windows)
    rows = []
    for (model, item, policy), values in stats.items():
        none = stats.get((model, item, BASELINE))
        delta, low, high = _degeneration_delta(
            groups[(model, item, policy)], groups.get((model, item, BASELINE)), level
        )
        ratio = _ratio(values["perplexity"], none, "perplexity")
        rows.append(
            QualityRow(
                model=model,
                item=item,
                policy=policy,
                **values,  # type: ignore[arg-type]
                time_ratio=_ratio(values["ms_per_token"], none, "ms_per_token"),
                perplexity_ratio=ratio,
                degeneration_delta=delta,
                degeneration_delta_low=low,
                degeneration_delta_high=high,
                quality_holds=quality_holds(ratio, low),
                pass_rate=passed.get((model, item, policy), math.nan),
            )  # fmt: skip
        )
    return result_frame(QualityRow, rows)


def _ratio(value: float, none: dict[str, float] | None, column: str) -> float:
    base = none[column] if none else math.nan
    return value / base if base and math.isfinite(base) else math.nan


def _pass_rates(windows: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    if windows.empty or "passed" not in windows:
        return {}
    decided = windows[windows["passed"].notna()]
    rates = decided.groupby(["model", "item", "policy"])["passed"].apply(
        lambda s: float(s.astype(bool).mean())
    )
    return {tuple(map(str, key)): float(v) for key, v in rates.items()}
