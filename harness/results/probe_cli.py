"""Row models of the files `harness probe` writes into its --out folder (docs/architecture.md,
"Files of a run folder"). They share names with a run's probe files but not their columns:
a pair here is one of the user's own prompt pairs (its name), not a generation record, and a
lam sweep (--attention-bias) adds a `lam` column after `model`."""

from __future__ import annotations

from typing import ClassVar, Literal

from harness.results.base import ResultRow

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


class ProbeDivergenceRow(ProbeRow):
    file = "divergence.csv"
    written_by = "`harness probe`: tables (not with --backend openai)"
    row = "one (probe model[, lam], pair, hidden-state index, t), every t"
    keys = ("model", "lam", "pair", "layer", "t")

    layer: int
    t: int
    l2: float
    """L2 distance of the two prompts' hidden states at t"""
    rel_l2: float
    """l2 over the mean norm of the two hidden states"""
    cos_dist: float
    """1 - cosine similarity of the two hidden states"""


class ProbeNextTokenRow(ProbeRow):
    file = "nexttoken.csv"
    written_by = "`harness probe`: tables"
    row = "one (probe model[, lam], pair, t), every t"
    keys = ("model", "lam", "pair", "t")

    t: int
    delta_logp: float
    """log p(c_t | prompt A) - log p(c_t | prompt B)"""
    kl: float
    """KL(p_A || p_B) of the next-token distributions at t (as the run's nexttoken.csv)"""
    kl_low: float
    """a lower bound of the KL (= kl on hf/vllm)"""
    kl_high: float
    """an upper bound of the KL (= kl on hf/vllm)"""
    backend: Literal["hf", "vllm", "openai"]
    """the probe backend that computed the row"""


class ProbeAttentionRow(ProbeRow):
    file = "attention.csv"
    written_by = "`harness probe`: tables (not with --backend openai)"
    row = (
        "one (probe model[, lam], pair, attention layer, t), every t: prompt A's attention "
        "share; header-only on the vllm backend"
    )
    keys = ("model", "lam", "pair", "layer", "t")

    layer: int
    """hidden-state index l >= 1 whose decoder layer (l - 1) the attention belongs to"""
    t: int
    prompt_len: int
    """P: tokens of prompt A (the keys before t = 1)"""
    share_prompt_mean: float
    """attention of the query at t on prompt A's tokens after its first, mean over heads"""
    share_prompt_max_head: float
    """the same share of the head that puts the most on those tokens"""
    share_sink_mean: float
    """attention of the query at t on the prompt's first token, mean over heads"""
    share_sink_max_head: float
    """the same share of the head that puts the most on the first token"""
    uniform: float
    """(P - 1) / (P + t): share_prompt under uniform attention"""


class ProbeFitRow(ProbeRow):
    file = "fits.csv"
    written_by = "`harness probe`: fits"
    row = (
        "one alpha fit per (probe model[, lam], pair, layer, metric), plus pair `all` pooled "
        'over the pairs (see "Estimators: fits table")'
    )
    keys = ("model", "lam", "pair", "layer", "metric")

    layer: int
    """hidden-state index; -1 for the next-token metrics"""
    metric: str
    """the curve fitted: `l2`, `rel_l2`, `cos_dist`, `kl`, `abs_delta_logp`, `share_prompt_mean`"""
    alpha: float
    """the power-law exponent: metric ~ t^-alpha; NaN when degenerate"""
    alpha_low: float
    alpha_high: float
    n: int
    """pairs the interval rests on (1: a single curve)"""
    method: str
    """the interval's method"""
    r2: float
    """R^2 of the log-log fit"""
    t_min: int
    """first position fitted"""
    t_max: int
    """last position fitted (0 when nothing was)"""
    reason: str


PROBE_ROWS: tuple[type[ProbeRow], ...] = (
    ProbeDivergenceRow,
    ProbeNextTokenRow,
    ProbeAttentionRow,
    ProbeFitRow,
)
