"""The prompt's attention share, measured in the probe's own forward (docs/architecture.md,
"Estimators: attention share").

For each decoder layer and continuation position t, the softmax mass that the query at t (row A
of the pair: the prompt under test) puts on the P prompt keys, split into the first key (the
BOS / attention sink, which trained models attend to whatever the context) and the prompt's
other P - 1 keys; reduced at once to the mean over heads and the largest head. Under uniform
attention the query at t sees P + t keys, so the prompt's other keys hold (P - 1) / (P + t):
the dilution reference.

Route: an attention function registered through transformers' `AttentionInterface` under
`SHARE_NAME` that records the shares from the query and key states it is handed (after RoPE,
with the layer's scaling, mask, sliding window, GQA head mapping and any attention bias of
`attention_bias.py`) and then calls the implementation that was active before (sdpa, eager,
the bias function), so the forward's outputs do not change. Its mask function hands over to
that implementation's own, so SDPA keeps its causal fast path. The shares come from one more
fused SDPA call on row 0 whose values are indicators of the key sets (channel 0: the prompt
after its first token, channel 1: the first token): its output is the softmax mass on each
set, and no T x T matrix ever exists (memory O(layers x T)). Soft-capped logits (Gemma 2),
which SDPA cannot take, are formed QUERY_BLOCK scores at a time and reduced by logsumexp over
the set minus logsumexp over all keys.

Positions: keys are cache slots (left padding included) and the first query of a forward sits
in slot kv_length - q_length, which holds for a whole-sequence forward and for chunks over a
`DynamicCache` (the probe's two modes).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from harness.engines.attention_bias import attention_modules, bias_logits
from harness.probes.arrays import SHARE_METRICS

SHARE_NAME = "harness_attention_share"
_RECORDER_ATTR = "_harness_share_recorder"
_INNER_ATTR = "_harness_share_inner"  # on a config: the implementation the shares wrap
# soft-capped models only: scores (heads x queries x keys) formed at once, 32 MB in float64
QUERY_BLOCK = 1 << 22


class ShareRecorder:
    """The (n_layers, T) share arrays of row 0 of the pair; filled by the attention function.

    layers: hidden-state indices l >= 1 to measure (l is the output of decoder layer l - 1, so
    a share sits beside the alpha of the hidden state its layer writes); prompt_len: P of row
    0; width: the padded prompt length (continuation t = 1 is slot `width`).
    """

    def __init__(self, layers: Sequence[int], prompt_len: int, width: int, total: int) -> None:
        self.layers = [int(layer) for layer in layers if layer >= 1]
        self.row = {layer - 1: i for i, layer in enumerate(self.layers)}  # decoder index -> row
        self.prompt_len, self.width = int(prompt_len), int(width)
        shape = (len(self.layers), total)
        self.curves = {m: np.full(shape, np.nan) for m in SHARE_METRICS}

    def arrays(self) -> dict[str, np.ndarray]:
        return {"attn_layers": np.asarray(self.layers, dtype=np.int64), **self.curves}

    @torch.no_grad()
    def record(
        self,
        module: torch.nn.Module,
        query: torch.Tensor,  # (B, H, q, d)
        key: torch.Tensor,  # (B, Hkv, kv, d)
        attention_mask: torch.Tensor | None,
        kwargs: dict[str, Any],
    ) -> None:
        row = self.row.get(module.layer_idx)
        q_len, kv_len = query.shape[2], key.shape[2]
        start = kv_len - q_len  # cache slot of the forward's first query
        skip = max(0, self.width - start)  # queries inside the prompt are not measured
        if row is None or skip >= q_len:
            return
        extra = bias_logits(module, query, key, kwargs, attention_mask)  # (B, 1|H, q, kv)
        mask = None if attention_mask is None else attention_mask[:1, ..., :kv_len]
        if kwargs.get("softcap"):  # SDPA has no logit soft-cap: scores formed here
            shares = self._formed(query, key, mask, extra, start, skip, kwargs)
        else:
            shares = self._fused(query, key, mask, extra, start, kwargs)[:, skip:]
        first = start + skip - self.width  # continuation index of the first measured query
        window = slice(first, first + shares.shape[1])
        for k, name in enumerate(("prompt", "sink")):
            share = shares[..., k].double()  # (H, q')
            self.curves[f"share_{name}_mean"][row, window] = share.mean(0).cpu().numpy()
            self.curves[f"share_{name}_max_head"][row, window] = share.amax(0).cpu().numpy()

    def _indicator(self, like: torch.Tensor, kv_heads: int, kv_len: int) -> torch.Tensor:
        """(1, Hkv, kv, d) values: channel 0 = 1 on row 0's prompt keys after the first,
        channel 1 = 1 on its first key; d = the query's head size, so SDPA keeps its fused
        kernel (a 2-channel value falls back to a materialised one, ~7x slower on CPU)."""
        pad = self.width - self.prompt_len  # row 0's first real slot
        ind = like.new_zeros(1, kv_heads, kv_len, like.shape[-1])
        ind[:, :, pad + 1 : pad + self.prompt_len, 0] = 1
        ind[:, :, pad, 1] = 1
        return ind

    def _fused(self, query, key, mask, extra, start: int, kwargs: dict[str, Any]):
        """(H, q, 2) shares of row 0's queries from one SDPA call over the indicator values:
        the output is the softmax mass on each indicated key set, the model's softmax itself."""
        q_len, kv_len = query.shape[2], key.shape[2]
        causal = False
        window = kwargs.get("sliding_window")
        if mask is None and (
            extra is not None or 1 < q_len < kv_len or (window and kv_len > window)
        ):
            mask = _visible(q_len, kv_len, start, window, query.device)
        elif mask is None:
            causal = q_len > 1  # SDPA's causal skip: no padding, kv = q (or a single query)
        if extra is not None:
            extra = extra[:1].to(query.dtype)
            if mask.dtype == torch.bool:  # a finite floor, as the bias's own attention uses
                mask = torch.where(mask, extra, torch.finfo(query.dtype).min)
            else:
                mask = mask + extra
        out = torch.nn.functional.scaled_dot_product_attention(
            query[:1], key[:1], self._indicator(query, key.shape[1], kv_len), attn_mask=mask,
            is_causal=causal, scale=kwargs.get("scaling"),
            enable_gqa=query.shape[1] != key.shape[1],
        )  # fmt: skip
        return out[0, :, :, :2]

    def _formed(self, query, key, mask, extra, start: int, skip: int, kwargs: dict[str, Any]):
        """(H, q - skip, 2) shares from scores formed QUERY_BLOCK at a time (soft-capped
        logits, which SDPA cannot take): logsumexp over the key set minus over all keys."""
        heads, groups = query.shape[1], query.shape[1] // key.shape[1]
        q_len, kv_len = query.shape[2], key.shape[2]
        pad = self.width - self.prompt_len
        block = max(1, QUERY_BLOCK // (heads * kv_len))
        parts = []
        for lo in range(skip, q_len, block):
            hi = min(lo + block, q_len)
            scores = _scores(query[0, :, lo:hi], key[0], groups, kwargs)  # (H, b, kv)
            if extra is not None:
                scores = scores + extra[0, :, lo:hi, :kv_len]
            part = None if mask is None else mask[0, :, lo:hi]
            scores = _masked(scores.double(), part, start + lo, kwargs.get("sliding_window"))
            total = torch.logsumexp(scores, dim=-1)  # (H, b)
            rest = scores[..., pad + 1 : pad + self.prompt_len]
            sink = torch.exp(scores[..., pad] - total)
            prompt = torch.exp(torch.logsumexp(rest, -1) - total) if rest.shape[-1] else sink * 0
            parts.append(torch.stack([prompt, sink], dim=-1))
        return torch.cat(parts, dim=1)


def _visible(q_len: int, kv_len: int, start: int, window: int | None, device) -> torch.Tensor:
    """(1, 1, q, kv) bool: key slot j visible to the query in slot start + i (causal, and
    within the sliding window when there is one)."""
    q_slot = torch.arange(start, start + q_len, device=device).view(-1, 1)
    k_slot = torch.arange(kv_len, device=device).view(1, -1)
    visible = k_slot <= q_slot
    if window:
        visible &= k_slot > q_slot - window
    return visible.view(1, 1, q_len, kv_len)


def _scores(query, key, groups: int, kwargs: dict[str, Any]) -> torch.Tensor:
    """(H, b, d), (Hkv, kv, d) -> (H, b, kv) scaled, soft-capped logits; head h reads key head
    h // groups, as `repeat_kv` maps them."""
    heads, b, dim = query.shape
    scaling = kwargs.get("scaling") or dim**-0.5
    grouped = query.reshape(key.shape[0], groups * b, dim)  # (Hkv, groups * b, d)
    scores = torch.matmul(grouped, key.transpose(1, 2)).reshape(heads, b, -1) * scaling
    cap = kwargs["softcap"]
    return torch.tanh(scores / cap) * cap


def _masked(scores, mask, first_slot: int, window: int | None) -> torch.Tensor:
    """Masked keys -> -inf (a bool mask, an additive one, or none: causal + window built)."""
    if mask is None:
        mask = _visible(scores.shape[1], scores.shape[2], first_slot, window, scores.device)[0]
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    return scores + mask.double()


def _inner_function(module: torch.nn.Module, name: str):
    """The attention function registered as `name`; `eager` is the model file's own."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if name == "eager":
        return sys.modules[type(module).__module__].eager_attention_forward
    return ALL_ATTENTION_FUNCTIONS[name]


def _share_attention(module, query, key, value, attention_mask, *args, **kwargs):
    recorder: ShareRecorder | None = getattr(module, _RECORDER_ATTR, None)
    if recorder is not None:
        recorder.record(module, query, key, attention_mask, {**kwargs, **_named(args)})
    inner = _inner_function(module, getattr(module.config, _INNER_ATTR))
    return inner(module, query, key, value, attention_mask, *args, **kwargs)


def _named(args: tuple) -> dict[str, Any]:
    """Positional extras after the mask, in the interface's order (dropout, scaling)."""
    return dict(zip(("dropout", "scaling"), args, strict=False))


def _share_mask(*args: Any, **kwargs: Any):
    """The mask of the wrapped implementation (sdpa's may be None: its causal skip)."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    inner = getattr(kwargs.get("config"), _INNER_ATTR, "sdpa")
    if inner not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
        return None
    return ALL_MASK_ATTENTION_FUNCTIONS[inner](*args, **kwargs)


def register() -> str:
    """Register the attention and mask functions (idempotent); returns the implementation name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(SHARE_NAME, _share_attention)
    AttentionMaskInterface.register(SHARE_NAME, _share_mask)
    return SHARE_NAME


@contextmanager
def share_recording(model: Any, recorder: ShareRecorder | None) -> Iterator[None]:
    """Run `model` with `recorder` filled by every forward inside the block (None: nothing is
    wrapped); the previous attention implementation is restored in `finally`."""
    if recorder is None or not recorder.layers:
        yield
        return
    modules = attention_modules(model)
    previous = model.config._attn_implementation
    configs = {id(c): c for c in [model.config, *(m.config for m in modules)]}.values()
    register()
    try:
        for config in configs:
            setattr(config, _INNER_ATTR, previous)
        model.set_attn_implementation(SHARE_NAME)
        for module in modules:
            if module.layer_idx in recorder.row:
                setattr(module, _RECORDER_ATTR, recorder)
        yield
    finally:
        for module in modules:
            if hasattr(module, _RECORDER_ATTR):
                delattr(module, _RECORDER_ATTR)
        model.set_attn_implementation(previous)
        for config in configs:
            if hasattr(config, _INNER_ATTR):
                delattr(config, _INNER_ATTR)
