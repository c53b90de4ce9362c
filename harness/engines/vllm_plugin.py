"""A vLLM general plugin (entry point `vllm.general_plugins` in pyproject.toml): top-p without
sorting the whole vocabulary, on CPU.

vLLM's CPU sampler applies top-p by sorting every row of the logits (49,152 tokens for the
embedded model) at every decode step: 150 ms per step at batch 64 on 2 cores, against ~280 ms
for the model's own forward, so `top_p < 1` cost a third of the throughput. The mask only
depends on the highest-probability tokens, so this computes it from the top `CANDIDATES` of
each row (`torch.topk`, ~8 ms at batch 64): a token is kept when the probability mass of the
tokens ranked above it is below p, which is vLLM's rule (it removes a token when the mass at
or below it is at most 1 - p). A row whose candidates hold less than p of the mass is handed
to vLLM's own function, so every row gets the same mask, up to float rounding of tokens whose
mass above sits within ~1e-6 of p.

vLLM runs general plugins in each of its processes, before the model runs; this one changes
nothing on GPU or when `HARNESS_FAST_TOP_P=0`.
"""

from __future__ import annotations

import os

CANDIDATES = 256


def register() -> None:
    if os.environ.get("HARNESS_FAST_TOP_P", "1") == "0":
        return
    try:
        import torch
        from vllm.v1.sample.ops import topk_topp_sampler as sampler
    except ImportError:  # a vLLM without this module: leave it as it is
        return
    if torch.cuda.is_available() or getattr(sampler, "_harness_fast_top_p", False):
        return
    original = sampler.apply_top_k_top_p_pytorch

    def apply(logits, k, p, allow_cpu_sync: bool = False):
        if p is None or k is not None:
            return original(logits, k, p, allow_cpu_sync)
        return top_p_from_candidates(logits, p, lambda rows, p_rows: original(rows, None, p_rows))

    sampler.apply_top_k_top_p_pytorch = apply
    sampler._harness_fast_top_p = True


def top_p_from_candidates(logits, p, fallback, candidates: int = CANDIDATES):
    """`logits` with every token outside each row's top-p set at -inf (in place, returned).
    `p` holds one value per row; rows the candidates do not cover go to `fallback(rows, p)`."""
    import torch

    n = min(candidates, logits.shape[-1])
    values, indices = logits.topk(n, dim=-1)  # descending
    probs = (values - logits.logsumexp(dim=-1, keepdim=True)).exp()
    mass = probs.cumsum(dim=-1)
    above = mass - probs  # probability mass of the tokens ranked above each candidate
    covered = mass[:, -1] >= p
    kept = values.masked_fill(above >= p.unsqueeze(1), float("-inf"))
    out = torch.full_like(logits, float("-inf")).scatter_(1, indices, kept)
    if not bool(covered.all()):
        rows = (~covered).nonzero().squeeze(1)
        out[rows] = fallback(logits[rows], p[rows])
    logits.copy_(out)
    return logits
