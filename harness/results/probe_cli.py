"""Row models of the files `harness probe` writes into its --out folder (docs/architecture.md,
"Files of a run folder"). They share names with a run's probe files but not their columns:
a pair here is one of the user's own prompt pairs (its name), not a generation record, and a
lam sweep (--attention-bias) adds a `lam` column after `model`. The measurements are the
run's field groups (results/probing.py), placed where these files have them."""

from __future__ import annotations

from typing import ClassVar

from harness.results.base import MODEL_TOKENS, ResultRow
from harness.results.probing import (
    AlphaFit,
    AttentionShares,
    HiddenDistances,
    KlBounds,
    LogpShift,
    ProbeBackendField,
)

# --attention-bias adds this column after `model` in every file; without it there is none
LAM_PATTERN = "lam"
LAM_DOC = "attention-bias strength on prompt A's tokens (only with --attention-bias)"


class ProbeRow(ResultRow):
    """A file of `harness probe`: keyed by (model[, lam], pair), its `lam` column optional."""

    command: ClassVar[str] = "probe"
    extra_pattern = LAM_PATTERN
    extra_after = "model"
    extra_doc: ClassVar[str] = LAM_DOC

    model: str
    """the probe model (`untrained:<name>` with --compare untrained)"""
    pair: str
    """the pair's name (`cli` for the command line's prompts; `all` in a pooled fit)"""


class ProbeDivergenceRow(ProbeRow, HiddenDistances):
    file = "divergence.csv"
    written_by = "`harness probe`: tables (not with --backend openai)"
    row = "one (probe model[, lam], pair, hidden-state index, t), every t"
    keys = ("model", "lam", "pair", "layer", "t")
    place: ClassVar = {HiddenDistances: "t"}

    layer: int
    t: int
    t_unit: str = MODEL_TOKENS


class ProbeNextTokenRow(ProbeRow, LogpShift, KlBounds, ProbeBackendField):
    file = "nexttoken.csv"
    written_by = "`harness probe`: tables"
    row = "one (probe model[, lam], pair, t), every t"
    keys = ("model", "lam", "pair", "t")
    place: ClassVar = {LogpShift: "t", KlBounds: "delta_logp", ProbeBackendField: "kl_high"}

    t: int
    t_unit: str = MODEL_TOKENS


class ProbeAttentionRow(ProbeRow, AttentionShares):
    file = "attention.csv"
    written_by = "`harness probe`: tables (not with --backend openai)"
    row = (
        "one (probe model[, lam], pair, attention layer, t), every t: prompt A's attention "
        "share; header-only on the vllm backend"
    )
    keys = ("model", "lam", "pair", "layer", "t")
    place: ClassVar = {AttentionShares: "t"}

    layer: int
    """hidden-state index l >= 1 whose decoder layer (l - 1) the attention belongs to"""
    t: int
    t_unit: str = MODEL_TOKENS


class ProbeFitRow(ProbeRow, AlphaFit):
    file = "fits.csv"
    written_by = "`harness probe`: fits"
    row = (
        "one alpha fit per (probe model[, lam], pair, layer, metric), plus pair `all` pooled "
        'over the pairs (see "Estimators: fits table")'
    )
    keys = ("model", "lam", "pair", "layer", "metric")
    place: ClassVar = {AlphaFit: "metric"}

    layer: int
    """hidden-state index; -1 for the next-token metrics"""
    metric: str
    """the curve fitted: `l2`, `rel_l2`, `cos_dist`, `kl`, `abs_delta_logp`, `share_prompt_mean`"""
    t_unit: str = MODEL_TOKENS


PROBE_ROWS: tuple[type[ProbeRow], ...] = (
    ProbeDivergenceRow,
    ProbeNextTokenRow,
    ProbeAttentionRow,
    ProbeFitRow,
)
