"""Paired-prompt divergence: hidden-state distances per layer and next-token log-prob gaps.

Both sequences ids(A)+c and ids(B)+c run in one batch of two rows (left padding, position ids
from 0 at each row's first real token). The prompts are prefilled once into a `DynamicCache`;
the shared continuation c then goes through in chunks, so peak memory is one chunk's activations
plus the KV cache. Forward hooks reduce each hidden state to three numbers per position the
moment it is produced (l2, rel_l2, cos_dist), so results are O(L*T) floats; no (L, T, d) tensor is
ever kept. Logits exist for one chunk at a time and are reduced to delta_logp and KL there.

Hidden-state index l follows transformers' `output_hidden_states`: l = 0 is the input of the first
decoder layer (the embeddings), l = 1..L-1 the output of decoder layer l-1, l = L the final norm.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harness.errors import UserError

DEFAULT_CHUNK = 256
KL_SLICE = 32


@dataclass
class PairDivergence:
    """Per-pair curves; position index i holds continuation position t = i + 1."""

    layers: list[int]  # hidden-state indices kept, rows of the (n_layers, T) arrays
    l2: np.ndarray  # (n_layers, T)
    rel_l2: np.ndarray  # (n_layers, T)
    cos_dist: np.ndarray  # (n_layers, T)
    delta_logp: np.ndarray  # (T,)
    kl: np.ndarray  # (T,)
    prompt_lens: tuple[int, int]
    identical_prompts: bool


def decoder_parts(model: Any) -> tuple[torch.nn.ModuleList, torch.nn.Module]:
    """(decoder layers, final norm) of a llama-style causal LM (llama, qwen2, mistral, ...)."""
    base = getattr(model, "model", None)
    layers = getattr(base, "layers", None)
    norm = getattr(base, "norm", None)
    if layers is None or norm is None:
        raise UserError(
            f"{type(model).__name__}: the probe needs a llama-style model "
            "(model.layers, model.norm)"
        )
    return layers, norm


def n_hidden_states(model: Any) -> int:
    """L + 1: the number of hidden-state indices (0 = embeddings ... L = final norm)."""
    return len(decoder_parts(model)[0]) + 1


def resolve_layers(spec: str | Sequence[int] | None, n_states: int) -> list[int]:
    """'all' / None -> 0..L; a list or comma string of indices, each checked against 0..L."""
    if spec is None or (isinstance(spec, str) and spec.strip() == "all"):
        return list(range(n_states))
    if isinstance(spec, str):
        try:
            spec = [int(part) for part in spec.split(",") if part.strip()]
        except ValueError:
            msg = f"--layers must be 'all' or comma-separated integers, got '{spec}'"
            raise UserError(msg) from None
    layers = sorted(set(spec))
    bad = [i for i in layers if not 0 <= i < n_states]
    if bad or not layers:
        raise UserError(f"layer index {bad or spec} out of range: this model has 0..{n_states - 1}")
    return layers


class _Reducer:
    """Holds the (n_layers, T) result arrays and the current chunk offset the hooks write at."""

    def __init__(self, layers: list[int], n_states: int, total: int) -> None:
        self.row = {layer: i for i, layer in enumerate(layers)}
        self.l2 = torch.zeros(len(layers), total, dtype=torch.float64)
        self.rel_l2 = torch.zeros_like(self.l2)
        self.cos_dist = torch.zeros_like(self.l2)
        self.offset: int | None = None  # None while prefilling the prompts: nothing to record

    @torch.no_grad()
    def reduce(self, layer: int, hidden: torch.Tensor) -> None:
        row = self.row.get(layer)
        if row is None or self.offset is None:
            return
        # float32 is enough: the states are float32, a - b is exact for close values, and the
        # squared unit-vector gap keeps cos_dist accurate far below float32's epsilon
        a, b = hidden[0].float(), hidden[1].float()  # (q, d) each: rows A and B
        na, nb = a.norm(dim=-1), b.norm(dim=-1)  # (q,)
        l2 = (a - b).norm(dim=-1)  # (q,)
        tiny = torch.finfo(torch.float32).tiny
        # 1 - cos = ||a/|a| - b/|b|||^2 / 2: no cancellation when the states nearly agree
        unit_gap = a / na.clamp_min(tiny).unsqueeze(-1) - b / nb.clamp_min(tiny).unsqueeze(-1)
        window = slice(self.offset, self.offset + a.shape[0])
        self.l2[row, window] = l2
        self.rel_l2[row, window] = l2 / ((na + nb) / 2).clamp_min(tiny)
        self.cos_dist[row, window] = unit_gap.pow(2).sum(-1) / 2


@contextmanager
def reduction_hooks(model: Any, reducer: _Reducer) -> Iterator[None]:
    """Hooks that feed every hidden state to `reducer`; removed in `finally`."""
    layers, norm = decoder_parts(model)
    handles = []

    def first_input(_module, args, kwargs):  # hidden state 0 = what layer 0 receives
        reducer.reduce(0, args[0] if args else kwargs["hidden_states"])

    def output_of(index: int):
        def hook(_module, _args, output):
            reducer.reduce(index, output[0] if isinstance(output, tuple) else output)

        return hook

    try:
        handles.append(layers[0].register_forward_pre_hook(first_input, with_kwargs=True))
        # decoder layer i gives state i+1, except the last one: state L is after the final norm
        for i, layer in enumerate(layers[:-1]):
            handles.append(layer.register_forward_hook(output_of(i + 1)))
        handles.append(norm.register_forward_hook(output_of(len(layers))))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _next_token_gaps(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """logits (2, q, V) predicting targets (q,) -> delta_logp (q,), kl (q,) in float64.

    float64 because late-t KL values are tiny differences of large log-probs; done in slices
    of KL_SLICE positions so the float64 copies stay small next to the chunk's logits.
    """
    delta, kl = [], []
    for start in range(0, targets.shape[0], KL_SLICE):
        part = slice(start, start + KL_SLICE)
        logp = torch.log_softmax(logits[:, part], dim=-1, dtype=torch.float64)  # (2, s, V)
        rows = torch.arange(logp.shape[1])
        picked = logp[:, rows, targets[part]]  # (2, s)
        delta.append(picked[0] - picked[1])
        kl.append((logp[0].exp() * (logp[0] - logp[1])).sum(-1).clamp_min(0.0))  # (s,)
    return torch.cat(delta), torch.cat(kl)


def check_inputs(ids_a: list[int], ids_b: list[int], cont: list[int], context: int | None) -> None:
    if not ids_a or not ids_b:
        raise UserError("prompt A and prompt B must each have at least one token (empty prompt)")
    if not cont:
        raise UserError("the continuation is empty")
    total = max(len(ids_a), len(ids_b)) + len(cont)
    if context is not None and total > context:
        raise UserError(
            f"prompt ({max(len(ids_a), len(ids_b))} tokens) + continuation ({len(cont)}) = "
            f"{total} tokens exceeds the model's context of {context}"
        )


@torch.no_grad()
def pair_divergence(
    model: Any,
    ids_a: list[int],
    ids_b: list[int],
    continuation: list[int],
    layers: Sequence[int] | None = None,
    chunk: int = DEFAULT_CHUNK,
    lam: float | None = None,
    bias_layers: Sequence[int] | None = None,
) -> PairDivergence:
    """Divergence curves of one pair over the shared continuation (T = len(continuation)).

    lam: run under the attention bias of `attention_bias.py` (None = plain model).
    """
    from transformers import DynamicCache

    from harness.probes.attention_bias import attention_bias

    context = getattr(model.config, "max_position_embeddings", None)
    check_inputs(ids_a, ids_b, continuation, context)
    n_states = n_hidden_states(model)
    kept = resolve_layers(layers, n_states)
    device = next(model.parameters()).device
    lens = (len(ids_a), len(ids_b))
    width = max(lens)
    total = len(continuation)

    # (2, width) left-padded prompts; pad id is irrelevant since padded keys are masked out
    prompt = torch.zeros(2, width, dtype=torch.long, device=device)
    mask = torch.zeros(2, width + total, dtype=torch.long, device=device)
    for row, ids in enumerate((ids_a, ids_b)):
        prompt[row, width - len(ids) :] = torch.tensor(ids, device=device)
        mask[row, width - len(ids) :] = 1
    p_len = torch.tensor(lens, device=device).view(2, 1)  # (2, 1)
    cont = torch.tensor(continuation, device=device)  # (T,)
    padded = lens[0] != lens[1]

    reducer = _Reducer(kept, n_states, total)
    delta = torch.zeros(total, dtype=torch.float64)
    kl = torch.zeros(total, dtype=torch.float64)
    cache = DynamicCache(config=model.config)
    bias = (
        attention_bias(model, prompt_len=list(lens), lam=lam, layers=bias_layers)
        if lam is not None
        else nullcontext()
    )
    with bias, reduction_hooks(model, reducer):
        positions = (torch.arange(width, device=device).view(1, -1) - (width - p_len)).clamp_min(0)
        out = model(
            input_ids=prompt,
            attention_mask=mask[:, :width] if padded else None,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        # the last prompt token predicts c_1 (t = 1)
        delta[:1], kl[:1] = _next_token_gaps(out.logits[:, -1:], cont[:1])
        for start in range(0, total, chunk):
            stop = min(start + chunk, total)
            reducer.offset = start
            positions = p_len + torch.arange(start, stop, device=device).view(1, -1)  # (2, q)
            out = model(
                input_ids=cont[start:stop].expand(2, -1),
                attention_mask=mask[:, : width + stop] if padded else None,
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
            )
            # the token at t predicts t + 1: this chunk gives positions start+2 .. stop+1
            n_pred = min(stop, total - 1) - start
            if n_pred > 0:
                targets = cont[start + 1 : start + 1 + n_pred]
                window = slice(start + 1, start + 1 + n_pred)
                delta[window], kl[window] = _next_token_gaps(out.logits[:, :n_pred], targets)
            del out
    return PairDivergence(
        layers=kept,
        l2=reducer.l2.numpy(),
        rel_l2=reducer.rel_l2.numpy(),
        cos_dist=reducer.cos_dist.numpy(),
        delta_logp=delta.numpy(),
        kl=kl.numpy(),
        prompt_lens=lens,
        identical_prompts=list(ids_a) == list(ids_b),
    )
