"""A reduced-precision probe's rounding floor, measured on the pair itself.

Rounding puts a random error e into every hidden state; a measured distance between the two
rows is then ||dh + e_A - e_B||, which for a true divergence dh far below |e_A - e_B| reads as
the rounding's own size: the curve flattens onto it, a false "settles". The floor is that size.
The pair's first FLOOR_SPAN continuation positions are recomputed by the reduced model and by a
float32 copy (the reference numerics); per hidden-state index and position the rounding error
of the difference is e = (h_A - h_B)(dtype) - (h_A - h_B)(float32) = e_A - e_B, and the floor
is the FLOOR_QUANTILE over the span of ||e|| / mean(||h_A||, ||h_B||), in rel_l2's units: the
most rounding can add to (or fake in) a rel_l2 there, by the triangle inequality
(| ||d + e|| - ||d|| | <= ||e||). It was err_A + err_B, a bound of that bound which ignores that
the two rows' errors are correlated (they share most inputs): at T = 512 it removed every fit
position. It does not depend on the divergence
itself (the error of a large distance is small; the floor is not), and bf16 rounds relative to
the values, so the level holds past the span (bench/precision.py checks it on the last quarter
of a 4,096-token pair). The next-token floors are the same for the distributions that predict
the continuation: KL(p(dtype) || p(float32)) summed over the two rows, and |log p(dtype)(c_t) -
log p(float32)(c_t)| summed likewise. `harness.probes.precision` masks what lies under
FLOOR_MULTIPLE x the floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch

from harness.engines.attention_bias import attention_bias
from harness.engines.device import input_device
from harness.probes.divergence import padded_pair
from harness.probes.head import next_token_gaps, output_head
from harness.probes.hooks import n_hidden_states, reduction_hooks, resolve_layers

FLOOR_SPAN = 256  # continuation positions recomputed in both precisions
FLOOR_QUANTILE = 0.9


class _Capture:
    """A reducer for `reduction_hooks` that keeps the continuation part of each state (2, S, d)
    in float32 on the CPU (S = FLOOR_SPAN: small)."""

    def __init__(self, layers: Sequence[int], width: int) -> None:
        self.row = {layer: i for i, layer in enumerate(layers)}
        self.width, self.start = width, 0
        self.states: dict[int, torch.Tensor] = {}

    @torch.no_grad()
    def reduce(self, layer: int, hidden: torch.Tensor) -> None:
        if layer in self.row:
            self.states[layer] = hidden[:, self.width :].float().cpu()


@torch.no_grad()
def _states(model: Any, ids_a, ids_b, span, layers, lam) -> dict[int, torch.Tensor]:
    """Every kept hidden state of both rows over the span, and index L's logits' inputs."""
    width = max(len(ids_a), len(ids_b))
    seq, mask, positions = padded_pair(ids_a, ids_b, span, input_device(model))
    capture = _Capture(layers, width)
    lens = [len(ids_a), len(ids_b)]
    bias = attention_bias(model, lens, lam) if lam is not None else nullcontext()
    with bias, reduction_hooks(model, capture):
        model.get_decoder()(
            input_ids=seq,
            attention_mask=mask if lens[0] != lens[1] else None,
            position_ids=positions,
        )
    return capture.states


@torch.no_grad()  # the head's sliced matmuls write into `out=` buffers: no autograd
def measure_floor(
    model: Any,
    reference: Any,
    ids_a: list[int],
    ids_b: list[int],
    continuation: list[int],
    layers: Sequence[int] | None,
    lam: float | None = None,
) -> dict[str, np.ndarray]:
    """The floor arrays (`precision.FLOOR_KEYS`) of `model` (a reduced dtype) against
    `reference` (its float32 copy) over the pair's first FLOOR_SPAN positions."""
    n_states = n_hidden_states(model)
    kept = resolve_layers(layers, n_states)
    wanted = sorted({*kept, n_states - 1})  # index L feeds the next-token floors
    span = list(continuation[:FLOOR_SPAN])
    low = _states(model, ids_a, ids_b, span, wanted, lam)
    ref = _states(reference, ids_a, ids_b, span, wanted, lam)
    floors = []
    for layer in kept:
        # the error of the measured difference vector itself: e_A - e_B (rows A and B share
        # most of their inputs, so their rounding errors largely cancel in the difference)
        diff_low = low[layer][0] - low[layer][1]
        diff_ref = ref[layer][0] - ref[layer][1]
        error = (diff_low - diff_ref).norm(dim=-1)  # (S,) ||e_A - e_B||
        scale = ref[layer].norm(dim=-1).mean(0).clamp_min(torch.finfo(torch.float32).tiny)
        floors.append(float(torch.quantile((error / scale).double(), FLOOR_QUANTILE)))
    last = n_states - 1
    targets = torch.tensor(span[1:])  # the state at c_j predicts c_{j+1}
    kl = torch.zeros(len(span) - 1, dtype=torch.float64)
    delta = torch.zeros_like(kl)
    if len(span) > 1:
        heads = output_head(model), output_head(reference)
        for row in range(2):  # rounding's own gap: the dtype's row against float32's
            pair = [head(states[last][row : row + 1, :-1]) for head, states in
                    zip(heads, (low, ref), strict=True)]  # fmt: skip
            gap_delta, gap_kl = next_token_gaps(torch.cat(pair).cpu(), targets)
            delta += gap_delta.abs()
            kl += gap_kl
    return {
        "floor_rel_l2": np.asarray(floors),
        "floor_kl": np.asarray(_quantile(kl)),
        "floor_delta_logp": np.asarray(_quantile(delta)),
    }


def _quantile(values: torch.Tensor) -> float:
    return float(np.quantile(values.numpy(), FLOOR_QUANTILE)) if len(values) else 0.0
