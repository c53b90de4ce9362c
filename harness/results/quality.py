"""quality.csv: what each policy's replies cost and whether they are still good text (the
remedies' fourth measure, docs/remedies.md)."""

from __future__ import annotations

from harness.results.base import ResultRow


class QualityRow(ResultRow):
    file = "quality.csv"
    written_by = "analyse"
    row = "one (model, item, policy): its replies' speed and quality against `none`'s"
    keys = ("model", "item", "policy")

    model: str
    item: str
    policy: str
    n: int
    """samples"""
    generated: int
    """generated tokens, all samples"""
    ms_per_token: float
    """wall milliseconds per generated token (each batch's time shared among its requests)"""
    time_ratio: float
    """ms_per_token / `none`'s on the same item in the same run (NaN without `none`)"""
    perplexity: float
    """exp of the mean negative log-likelihood of the generated tokens under the unsteered
    model, token-weighted over the samples (hf engine runs; NaN elsewhere)"""
    perplexity_ratio: float
    """perplexity / `none`'s on the same item (NaN without `none`)"""
    degeneration: float
    """mean over samples of the share of generated 4-grams that repeat an earlier 4-gram of
    the same reply (0: no repetition; near 1: a loop)"""
    degeneration_delta: float
    """mean over paired samples (sample k here and under `none`) of degeneration - `none`'s"""
    degeneration_delta_low: float
    degeneration_delta_high: float
    """the paired interval at the run's level (NaN without `none`)"""
    quality_holds: bool | None
    """the quality rule (docs/remedies.md): perplexity_ratio <= 1.5 where measured and
    degeneration_delta_low <= 0 (its degeneration not shown above `none`'s); None where
    neither was measured (no `none` to compare with)"""
    pass_rate: float
    """share of the decided check verdicts in windows.csv that pass (all checks, windows and
    whole replies)"""
