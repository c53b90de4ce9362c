"""Attention steering toward the prompt (docs/architecture.md, "Estimators: attention bias";
docs/remedies.md): the attention bias, split-softmax and SpotLight.

Attention bias: for the query at continuation position t (t = 1 is the first token after the
prompt) every one of the P prompt keys gets b added to its attention logit, in all layers or in
chosen ones: schedule `log`, b = lam * log((P + t) / P) (dilution compensation); `constant`,
b = lam (InstABoost). lam = 0 is the plain model; queries inside the prompt (t <= 0) get no bias.
Split-softmax and SpotLight (`harness.engines.share_steering`) set the bias per head and query
from the prompt's current share instead.
Under uniform attention the prompt's share P/(P + t) then becomes P w / (P w + t) with
w = ((P + t)/P)^lam: at lam = 1 it is (P + t)/(P + 2t), which falls from 1 to 1/2 instead of to 0
(bounded, not constant).

It is a transformers attention function registered under `ATTENTION_NAME` through
`AttentionInterface`, with a mask function registered through `AttentionMaskInterface` that always
materialises the boolean mask (the causal shortcut would leave nothing to add the bias to).
`attention_bias(model, prompt_len, lam)` switches a loaded model to it and back in `finally`.

Positions: the query's absolute position comes from `position_ids` (transformers passes them to
the attention function), so the bias is right for a whole-sequence forward, chunked forwards over
a KV cache and `generate()` (queries one at a time). Keys are cache slots; with left padding the
row's padding width is slot - position of its last query. That holds for `DynamicCache` (the
default) and no cache; a `StaticCache` keeps unfilled slots and is not supported.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from harness.engines.share_steering import key_geometry, share_bias

ATTENTION_NAME = "harness_prompt_bias"
_SPEC_ATTR = "_harness_prompt_bias"


@dataclass(frozen=True)
class BiasSpec:
    """What one attention module does: `kind` bias (lam, schedule), split_softmax (k) or
    spotlight (target), toward the first prompt_len keys of each row."""

    lam: float
    prompt_len: torch.Tensor  # (B,) int64: P per batch row (0: the row is not steered)
    schedule: str = "log"
    kind: str = "bias"
    strength: float = 0.0  # k of split_softmax, the target share of spotlight


def prompt_bias(
    q_positions: torch.Tensor,
    kv_length: int,
    prompt_len: torch.Tensor,
    lam: float,
    schedule: str = "log",
) -> torch.Tensor:
    """Additive logits (B, q, kv) on prompt keys for queries with t >= 1: lam * log((P+t)/P)
    (schedule log) or lam (constant); rows with P = 0 get none."""
    k_positions, p, t = key_geometry(q_positions, kv_length, prompt_len)
    is_prompt_key = (k_positions >= 0) & (k_positions < p)  # (B, kv)
    tf = t.to(torch.float32)
    if schedule == "constant":
        b = torch.where(t > 0, torch.full_like(tf, lam), torch.zeros_like(tf))
    else:  # log(1) = 0 where t = 0; a row with P = 0 has no prompt key to carry it
        b = lam * torch.log((p + tf) / p.clamp_min(1))
    return b.unsqueeze(-1) * is_prompt_key.unsqueeze(1)  # (B, q, kv)


def bias_logits(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    kwargs: dict[str, Any],
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """The logits this module's steering adds: (B, 1, q, kv) for the bias, (B, H, q, kv) for
    split-softmax and SpotLight, which read the plain scores (so they need the module's
    `attention_mask`, bool or additive); None when the module is not steered. query (B, H, q,
    d), key (B, Hkv, kv, d). The attention share (`probes/attention.py`) adds the same ones."""
    spec: BiasSpec | None = getattr(module, _SPEC_ATTR, None)
    if spec is None:
        return None
    batch, _, q_len, _ = query.shape
    kv_len = key.shape[2]
    positions = kwargs.get("position_ids")
    if positions is None:
        positions = torch.arange(kv_len - q_len, kv_len, device=query.device).view(1, -1)
    positions = positions.expand(batch, q_len)  # (B, q)
    if spec.kind == "bias":
        bias = prompt_bias(positions, kv_len, spec.prompt_len, spec.lam, spec.schedule)
        return bias.to(query.dtype).unsqueeze(1)
    scores = plain_scores(module, query, key, additive_mask(attention_mask, query, kv_len), kwargs)
    return share_bias(scores, positions, spec).to(query.dtype)


def additive_mask(mask: torch.Tensor | None, query: torch.Tensor, kv_len: int) -> torch.Tensor:
    """The (B or 1, 1, q, kv) additive form of a bool or additive mask (None: causal)."""
    q_len = query.shape[2]
    if mask is None:  # only without our mask function (e.g. a 4D mask passed in)
        causal = torch.ones(q_len, kv_len, dtype=torch.bool, device=query.device)
        mask = causal.tril(kv_len - q_len).view(1, 1, q_len, kv_len)
    if mask.dtype == torch.bool:
        # finite minimum, not -inf: a fully masked padding row must stay finite, or NaN values
        # would leak into real rows through 0 * NaN in the next layer's attention
        floor = torch.tensor(torch.finfo(query.dtype).min, dtype=query.dtype, device=query.device)
        zero = torch.zeros((), dtype=query.dtype, device=query.device)
        return torch.where(mask, zero, floor)
    return mask[..., :kv_len]


def plain_scores(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    mask: torch.Tensor,
    kwargs: dict[str, Any],
) -> torch.Tensor:
    """(B, H, q, kv) float32 attention logits of the plain model: q k^T * scaling + mask."""
    from transformers.integrations.sdpa_attention import repeat_kv

    groups = getattr(module, "num_key_value_groups", 1)
    scaling = kwargs.get("scaling") or query.shape[-1] ** -0.5
    keys = repeat_kv(key, groups).to(torch.float32)
    scores = torch.matmul(query.to(torch.float32), keys.transpose(-1, -2)) * scaling
    return scores + mask.to(torch.float32)


def _biased_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # (B, H, q, d)
    key: torch.Tensor,  # (B, Hkv, kv, d)
    value: torch.Tensor,  # (B, Hkv, kv, d)
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    bias = bias_logits(module, query, key, kwargs, attention_mask)  # (B, 1 or H, q, kv)
    if bias is None:  # a layer left out of `layers`, or the manager is not active
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    mask = additive_mask(attention_mask, query, key.shape[2]) + bias
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)  # (B, H, kv, d)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling
    )  # (B, H, q, d)
    return out.transpose(1, 2).contiguous(), None


def _materialised_mask(*args: Any, **kwargs: Any) -> torch.Tensor | None:
    from transformers.masking_utils import sdpa_mask

    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


def register() -> str:
    """Register the attention and mask functions (idempotent); returns the implementation name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTENTION_NAME, _biased_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, _materialised_mask)
    return ATTENTION_NAME


def attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The self-attention module of every decoder layer, in layer order."""
    found = [m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "o_proj")]
    return sorted(found, key=lambda m: m.layer_idx)


@contextmanager
def attention_bias(
    model: Any,
    prompt_len: int | Sequence[int] | torch.Tensor,
    lam: float,
    layers: Sequence[int] | None = None,
    schedule: str = "log",
) -> Iterator[None]:
    """Run `model` with the prompt-key bias inside the block; restore it in `finally`.

    prompt_len: P for every row (int) or per batch row (sequence / (B,) tensor), counted in real
    tokens (left padding excluded). layers: decoder-layer indices 0..L-1 to bias; None = all.
    schedule: `log` (lam * log((P + t) / P)) or `constant` (lam).
    """
    if not math.isfinite(lam):
        raise ValueError(f"attention bias lam must be finite, got {lam}")
    if schedule not in ("log", "constant"):
        raise ValueError(f"attention bias schedule must be log or constant, got {schedule!r}")
    p = torch.as_tensor(prompt_len, dtype=torch.long).reshape(-1)
    if (p <= 0).any():
        raise ValueError("attention bias needs a non-empty prompt (P >= 1)")
    with steered(model, BiasSpec(lam=float(lam), prompt_len=p, schedule=schedule), layers):
        yield


@contextmanager
def steered(model: Any, spec: BiasSpec, layers: Sequence[int] | None = None) -> Iterator[None]:
    """Run `model` with `spec` on the attention of `layers` (None = all) inside the block;
    restore the model's own attention in `finally`."""
    modules = attention_modules(model)
    if not modules:
        raise ValueError(f"{type(model).__name__}: no attention modules with layer_idx found")
    chosen = set(range(len(modules))) if layers is None else set(layers)
    bad = sorted(i for i in chosen if not 0 <= i < len(modules))
    if bad:
        raise ValueError(f"attention steering layers {bad} out of range 0..{len(modules) - 1}")
    previous = model.config._attn_implementation
    register()
    try:
        model.set_attn_implementation(ATTENTION_NAME)
        for module in modules:
            if module.layer_idx in chosen:
                setattr(module, _SPEC_ATTR, spec)
        yield
    finally:
        for module in modules:
            if hasattr(module, _SPEC_ATTR):
                delattr(module, _SPEC_ATTR)
        model.set_attn_implementation(previous)
