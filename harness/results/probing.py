"""Row models of the files the probe, theory and fits stages write (docs/architecture.md,
"Estimators: fits table")."""

from __future__ import annotations

from typing import ClassVar, Literal

from harness.results.base import CONDITION, MODEL_TOKENS, RECORD, FieldGroup, ResultRow

# a continuation token's role: one list for every file with a `role` column (replay adds
# "logged", the logged replies a replay feeds back as history)
ContinuationRole = Literal["assistant", "user", "markup", "reminder", "restatement", "logged"]


# The measurements of the probe files, declared once where several files share them: each
# file places them after its own columns (`ResultRow.place`).
class HiddenDistances(FieldGroup):
    l2: float
    """L2 distance of the two prompts' hidden states at t"""
    rel_l2: float
    """l2 over the mean norm of the two hidden states"""
    cos_dist: float
    """1 - cosine similarity of the two hidden states"""
    below_floor: bool
    """a probe below float32 (`probe.dtype`): rel_l2 lies within 3x the rounding floor measured
    for this layer, so the position is left out of fits and laws; always false in float32"""


class LogpShift(FieldGroup):
    delta_logp: float
    """log p(c_t | prompt A) - log p(c_t | prompt B) of the token at t"""


class KlBounds(FieldGroup):
    kl: float
    """KL(p_A || p_B) of the next-token distributions that predict the token at t (backend
    openai: kl_low, the KL with the tokens outside both top-k lists merged)"""
    kl_low: float
    """a lower bound of the KL (= kl; on backend openai see "Metrics: next-token influence
    through an endpoint")"""
    kl_high: float
    """an upper bound of the KL (= kl on hf/vllm; on openai valid under the stated premise
    on the unseen tokens)"""


class ProbeBackendField(FieldGroup):
    backend: Literal["hf", "vllm", "openai"]
    """the probe backend that computed the row"""


class AttentionShares(FieldGroup):
    prompt_len: int
    """P: tokens of the prompt (prompt A in `harness probe`; the keys before t = 1)"""
    share_prompt_mean: float
    """attention of the query at t on the prompt's tokens after its first, mean over heads"""
    share_prompt_max_head: float
    """the same share of the head that puts the most on those tokens"""
    share_sink_mean: float
    """attention of the query at t on the prompt's first token (BOS / attention sink), mean
    over heads"""
    share_sink_max_head: float
    """the same share of the head that puts the most on the first token"""
    uniform: float
    """(P - 1) / (P + t): share_prompt under uniform attention (P/(P+t) without the sink)"""


class AlphaFit(FieldGroup):
    alpha: float
    """the power-law exponent: metric ~ t^-alpha; NaN when degenerate"""
    alpha_low: float
    alpha_high: float
    n: int
    """pairs the interval rests on (1: a single curve)"""
    method: str
    """the interval's method: `block-bootstrap (curve noise)` or `bootstrap over 2 pairs (curve
    noise)` where it reflects one or two curves' noise, not sample-to-sample variation"""
    r2: float
    """R^2 of the log-log fit"""
    t_min: int
    """first position fitted"""
    t_max: int
    """last position fitted (0 when nothing was)"""
    reason: str


class DivergenceRow(ResultRow, HiddenDistances):
    file = "divergence.csv"
    written_by = "probe; `harness probe`: tables (not with --backend openai)"
    row = (
        "one (probe model, pair, hidden-state index, t); a run keeps only t = 1..16, the fit "
        "positions of [t_min, T] and (conversations) each reply's first token and the one "
        "before (full curves stay in the cache), `harness probe` every t"
    )
    keys = (*RECORD, "layer", "t")
    place: ClassVar = {HiddenDistances: "role"}

    model: str
    item: str
    policy: str
    sample: int
    pair: str
    layer: int
    t: int
    turn: int
    """the token's turn (1 in a single reply)"""
    role: ContinuationRole
    """the token's role in the continuation"""
    t_unit: str = MODEL_TOKENS


class NextTokenRow(ResultRow, LogpShift, KlBounds, ProbeBackendField):
    file = "nexttoken.csv"
    written_by = "probe; `harness probe`: tables"
    row = "one (probe model, pair, t), every t"
    keys = (*RECORD, "t")
    place: ClassVar = {LogpShift: "t", KlBounds: "delta_logp", ProbeBackendField: "kl_high"}

    model: str
    item: str
    policy: str
    sample: int
    pair: str
    t: int
    t_unit: str = MODEL_TOKENS


class TurnInfluenceRow(ResultRow, KlBounds, LogpShift, ProbeBackendField):
    file = "turn_influence.csv"
    written_by = "probe (only with conversations)"
    row = (
        "one (probe model, conversation, turn): the next-token influence at the reply's first token"
    )
    keys = (*RECORD, "turn")
    place: ClassVar = {KlBounds: "t", LogpShift: "kl_high", ProbeBackendField: "delta_logp"}

    model: str
    item: str
    policy: str
    sample: int
    pair: str
    turn: int
    t: int
    """continuation position of the reply's first token"""
    t_unit: str = MODEL_TOKENS


class AttentionRow(ResultRow, AttentionShares):
    file = "attention.csv"
    written_by = "probe; `harness probe`: tables (not with --backend openai)"
    row = (
        "one (probe model, pair, attention layer, t) at divergence.csv's positions: the "
        "prompt's share of the record's own attention (see \"Estimators: attention share\"); "
        "header-only where no pair ran on the hf backend"
    )
    keys = (*RECORD, "layer", "t")
    place: ClassVar = {AttentionShares: "role"}

    model: str
    item: str
    policy: str
    sample: int
    pair: str
    layer: int
    """hidden-state index l >= 1 whose decoder layer (l - 1) the attention belongs to"""
    t: int
    turn: int
    """the token's turn (1 in a single reply)"""
    role: ContinuationRole
    """the token's role in the continuation"""
    t_unit: str = MODEL_TOKENS


class AttentionTurnRow(ResultRow):
    file = "attention_turns.csv"
    written_by = "probe (only with conversations)"
    row = "one (probe model, conversation pair, attention layer, turn): means over the reply"
    keys = (*RECORD, "layer", "turn")

    model: str
    item: str
    policy: str
    sample: int
    pair: str
    layer: int
    """as in attention.csv"""
    turn: int
    tokens: int
    """the reply's tokens the means are over (generated, in the continuation)"""
    t_start: int
    """t of the reply's first token"""
    share_prompt_mean: float
    """attention.csv's share_prompt_mean, averaged over the reply's tokens"""
    share_prompt_max_head: float
    """attention.csv's share_prompt_max_head, averaged over the reply's tokens"""
    share_sink_mean: float
    """attention.csv's share_sink_mean, averaged over the reply's tokens"""
    share_sink_max_head: float
    """attention.csv's share_sink_max_head, averaged over the reply's tokens"""
    uniform: float
    """the mean of (P - 1) / (P + t) over the same tokens"""
    t_unit: str = MODEL_TOKENS


class FitRow(ResultRow, AlphaFit):
    file = "fits.csv"
    written_by = "fits; `harness probe`: fits"
    row = 'one alpha fit (see "Estimators: fits table")'
    keys = (*CONDITION, "pair", "layer", "metric")
    place: ClassVar = {AlphaFit: "metric"}

    model: str
    item: str
    """the item, or `all` in a row pooled over a whole model (`harness probe --attention-bias`:
    also over the pairs of one policy)"""
    policy: str
    """the policy, or `all` in a row pooled over a whole model"""
    pair: str
    layer: int
    metric: str
    """the curve fitted: `rel_l2`, `cos_dist`, `kl`, ... (`<metric>@assistant` in conversations)"""
    t_unit: str = MODEL_TOKENS


class BiasRow(ResultRow):
    file = "bias.csv"
    written_by = "theory"
    row = "one (probe model, lam, hidden-state index)"
    keys = ("model", "lam", "layer")

    model: str
    lam: float
    """attention-bias strength on the prompt's tokens"""
    layer: int
    alpha: float
    """alpha of the pooled rel_l2 curves under the bias"""
    alpha_low: float
    alpha_high: float
    r2: float
    n_pairs: int
    """records pooled"""
    reason: str
    share_alpha: float
    """decay exponent of the pooled prompt share (attention.csv's share_prompt_mean) under the
    bias: near 0 = the bias holds the share; NaN at layer 0 (no attention)"""
    share_alpha_low: float
    share_alpha_high: float
    share_start: float
    """the pooled prompt share at t = t_min"""
    share_end: float
    """the pooled prompt share at the last t of the pooled curves"""


class RelayRow(ResultRow):
    file = "relay.csv"
    written_by = "theory"
    row = "one (relay layer, t)"
    keys = ("layer", "t")

    layer: int
    t: int
    delta: float
    """the relay model's divergence at layer and t"""
    local_alpha: float
    """the local slope -d log delta / d log t"""
    bound_ratio: float
    """delta over the theory's bound"""
    t_unit: str = MODEL_TOKENS


Law = Literal["power-zero", "power-floor", "exp-equilibrium"]
Verdict = Literal["vanishes", "settles", "flat", "grows", "cannot tell", ""]


class LawRow(ResultRow):
    file = "laws.csv"
    written_by = "laws"
    row = (
        "one candidate law fitted to one curve of one group (a condition, or pooled: item "
        '`all`); three rows per curve (see "Estimators: laws")'
    )
    keys = (*CONDITION, "rule", "curve", "layer_group", "law")

    model: str
    """the probe model (mechanism curves; a twin is `untrained:<name>`) or the generating model
    (behaviour: `a_t`, `a_k`)"""
    item: str
    """the item, or `all`: pooled over the model's single replies (conversations for `kl_turn`
    and `a_k`)"""
    policy: str
    """the policy, or `all` in a row pooled over the model's policies"""
    rule: str = ""
    """behaviour curves of one rule alone (rules.csv's `rule`), for each item that has several
    rules, per condition; empty: all rules (and every mechanism curve)"""
    curve: str
    """`rel_l2` (hidden-state divergence), `kl` (next-token KL per position), `share_prompt_mean`
    (attention share), `kl_turn` (KL at each reply's first token), `a_t` (behaviour per scoring
    window), `a_k` (behaviour per reply)"""
    layer_group: str
    """the report's layer group (`early (layers 1–10)`, ...), `next-token` or `behaviour`"""
    x: Literal["t", "turn"]
    """what the curve runs over: continuation position t or turn k"""
    law: Law
    """the candidate: `power-zero` c x^-rate, `power-floor` floor + c x^-rate,
    `exp-equilibrium` floor + c e^(-rate (x - x_min))"""
    n: int
    """units (pairs or samples) of the curve"""
    x_min: float
    """first x fitted"""
    x_max: float
    """last x fitted"""
    initial: float
    """the mean curve at x_min"""
    error: float
    """out-of-sample RMS error (relative for mechanism curves, absolute for behaviour;
    `leave-one-pair-out`: the RMS over pairs of each pair's log error, its level removed)"""
    error_method: str
    """`tail (second half of x)` (fit up to each cut, predict the rest), `leave-one-sample-out`
    (behaviour, >= 3 samples) or `leave-one-pair-out` (mechanism curves, >= 4 pairs)"""
    chosen: bool
    """the law chosen: a floored law must beat the power law to zero by 5 % out of sample
    (tail), in a one-sided sign-flip test over the pairs left out at 0.1 (leave-one-pair-out),
    or for behaviour (>= 3 samples) in the binomial floor test (`law_p`) at 0.1; on mechanism
    curves it must have a floor above 0"""
    rate: float
    """alpha (power laws) or lambda per unit of x (exponential)"""
    rate_low: float
    rate_high: float
    floor: float
    """the floor or equilibrium (0 by definition for `power-zero`)"""
    floor_low: float
    floor_high: float
    floor_share: float
    """floor / initial"""
    scale: float
    """c"""
    method: str
    """the intervals' method: a percentile bootstrap over the units; `none (...)` with fewer
    than 3"""
    law_p: float
    """the chooser's comparison as a test (the same in the set's three rows; empty with fewer
    than 3 units): mechanism curves, one-sided p-value that a falling floored law with a
    floor >= 10 % of its fitted initial value predicts the pairs left out better than every
    decay to zero (sign-flip test over the pairs, Bonferroni over the two floored laws; 1
    when no floored law qualifies); behaviour, the binomial likelihood ratio of the best
    falling floored law (floor >= 10 % of its initial value) against the best decay to zero,
    its p a parametric bootstrap from that decay (1 when no floored law qualifies)"""
    law_p_holm: float
    """law_p Holm-adjusted over every curve set of the run with a law_p (`settles`' share of the
    run's one false-verdict budget: 1 - level)"""
    floor_p: float
    """one-sided bootstrap p-value of floor <= 0: (1 + draws <= 0) / (draws + 1)"""
    floor_excludes_zero: bool | None
    """floor_p < 1 - level; empty when not tested"""
    verdict: Verdict
    """the chosen row's reading: `vanishes` (exponent interval above 0, and every floored law
    the units left out cannot tell from the best rules out a floor of 10 % of `initial`),
    `settles` (a floored law with rate and scale above 0, law_p_holm and floor_p below 1 -
    level, the floor's interval no lower than 10 % of the initial value), `flat` (the
    exponent's interval inside +-0.1), `grows` (below -0.1) or `cannot tell` (why: `reason`).
    `vanishes`, `flat` and `grows` read their intervals widened to the run's level (Bonferroni
    over its sets: laws.csv's intervals are per set), so any false verdict in a run has
    chance <= 1 - level (bench/laws.py --runs)"""
    floor_delta: float
    """this policy's floor minus policy `none`'s (same model, item, curve, law)"""
    floor_delta_low: float
    floor_delta_high: float
    floor_delta_p: float
    """two-sided bootstrap p-value of floor_delta = 0, no finer than 1 / (draws + 1) (the
    report's "lowers" / "raises" Holm-adjusts it over the run's deltas)"""
    reason: str
    t_unit: str = MODEL_TOKENS
