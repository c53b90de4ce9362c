"""The probed model's decoder layers and the hooks that reduce each hidden state as it is produced.

Hidden-state index l follows transformers' `output_hidden_states`: l = 0 is the input of the first
decoder layer (the embeddings), l = 1..L-1 the output of decoder layer l-1, l = L the final norm.
Forward hooks reduce each state to three numbers per position the moment it is produced (l2,
rel_l2, cos_dist between the pair's two rows), so results are O(L*T) floats; no (L, T, d) tensor
is ever kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from harness.errors import UserError


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


class StateReducer:
    """Holds the (n_layers, T) result arrays; the hooks write the continuation part of each span.

    `start` is the sequence position of the current forward's first token; positions before
    `width` (the padded prompt) are skipped, position p >= width lands at index p - width.
    """

    def __init__(self, layers: list[int], width: int, total: int) -> None:
        self.row = {layer: i for i, layer in enumerate(layers)}
        self.width = width
        self.start = 0
        self.l2 = torch.zeros(len(layers), total, dtype=torch.float64)
        self.rel_l2 = torch.zeros_like(self.l2)
        self.cos_dist = torch.zeros_like(self.l2)

    @torch.no_grad()
    def reduce(self, layer: int, hidden: torch.Tensor) -> None:
        row = self.row.get(layer)
        skip = max(0, self.width - self.start)
        if row is None or skip >= hidden.shape[1]:
            return
        # float32 is enough: the states are float32, a - b is exact for close values, and the
        # squared unit-vector gap keeps cos_dist accurate far below float32's epsilon
        a, b = hidden[0, skip:].float(), hidden[1, skip:].float()  # (q, d) each: rows A and B
        na, nb = a.norm(dim=-1), b.norm(dim=-1)  # (q,)
        l2 = (a - b).norm(dim=-1)  # (q,)
        tiny = torch.finfo(torch.float32).tiny
        # 1 - cos = ||a/|a| - b/|b|||^2 / 2: no cancellation when the states nearly agree
        unit_gap = a / na.clamp_min(tiny).unsqueeze(-1) - b / nb.clamp_min(tiny).unsqueeze(-1)
        first = self.start + skip - self.width
        window = slice(first, first + a.shape[0])
        # .cpu(): under device_map="auto" a layer's states may sit on any GPU
        self.l2[row, window] = l2.cpu()
        self.rel_l2[row, window] = (l2 / ((na + nb) / 2).clamp_min(tiny)).cpu()
        self.cos_dist[row, window] = (unit_gap.pow(2).sum(-1) / 2).cpu()


@contextmanager
def reduction_hooks(model: Any, reducer: StateReducer) -> Iterator[None]:
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
