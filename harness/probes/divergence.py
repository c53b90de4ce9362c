"""Paired-prompt divergence: hidden-state distances per layer and next-token log-prob gaps.

Both sequences ids(A)+c and ids(B)+c run in one batch of two rows (left padding, position ids
from 0 at each row's first real token). The prompts are prefilled once into a `DynamicCache`;
the shared continuation c then goes through in chunks, so peak memory is one chunk's activations
plus the KV cache. Forward hooks reduce each hidden state to three numbers per position the
moment it is produced (`harness.probes.hooks`), and the output head runs a slice of positions at
a time, reduced to delta_logp and KL at once (`harness.probes.head`): no (L, T, d) states and no
chunk-sized logits tensor are ever kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from harness.engines.attention_bias import attention_bias
from harness.engines.device import input_device
from harness.errors import UserError
from harness.probes.arrays import ATTENTION_KEYS
from harness.probes.attention import ShareRecorder, share_recording
from harness.probes.head import head_gaps, output_head
from harness.probes.hooks import StateReducer, n_hidden_states, reduction_hooks, resolve_layers
from harness.probes.precision import FLOOR_KEYS

HIDDEN_METRICS = ("l2", "rel_l2", "cos_dist")  # per hidden-state index and position
KL_BOUNDS = ("kl_low", "kl_high")  # (T,) each, only where the KL is not exact


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
    attention: dict[str, np.ndarray] = field(default_factory=dict)  # ATTENTION_KEYS; {}: none
    # the KL's bracket where it is not exact (the openai backend's top-k lists, probes/topk.py)
    kl_low: np.ndarray | None = None
    kl_high: np.ndarray | None = None
    # below float32: the model's dtype and its measured rounding floor (probes/floor.py)
    dtype: str = "float32"
    floor: dict[str, np.ndarray] = field(default_factory=dict)

    def to_arrays(self, hidden_dtype: Any = np.float64) -> dict[str, np.ndarray]:
        """The curves as named arrays for an .npz unit; hidden_dtype float32 halves a stored
        unit where exact re-assembly is not needed."""
        return {
            "layers": np.asarray(self.layers),
            **{m: getattr(self, m).astype(hidden_dtype) for m in HIDDEN_METRICS},
            "delta_logp": self.delta_logp,
            "kl": self.kl,
            "prompt_lens": np.asarray(self.prompt_lens),
            "identical": np.asarray(self.identical_prompts),
            **self.attention,
            **{m: getattr(self, m) for m in KL_BOUNDS if getattr(self, m) is not None},
            **({"dtype": np.asarray(self.dtype)} if self.dtype != "float32" else {}),
            **self.floor,
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> PairDivergence:
        return cls(
            layers=arrays["layers"].tolist(),
            **{m: arrays[m] for m in (*HIDDEN_METRICS, "delta_logp", "kl")},
            prompt_lens=tuple(arrays["prompt_lens"].tolist()),
            identical_prompts=bool(arrays["identical"]),
            attention={k: arrays[k] for k in ATTENTION_KEYS if k in arrays},
            **{m: arrays[m] for m in KL_BOUNDS if m in arrays},
            dtype=str(arrays["dtype"]) if "dtype" in arrays else "float32",
            floor={k: arrays[k] for k in FLOOR_KEYS if k in arrays},
        )


def check_inputs(
    ids_a: list[int],
    ids_b: list[int],
    cont: list[int],
    context: int | None,
    vocab: int | None = None,
) -> None:
    if not ids_a or not ids_b:
        raise UserError("prompt A and prompt B must each have at least one token (empty prompt)")
    if not cont:
        raise UserError("the continuation is empty")
    if vocab is not None:
        for name, ids in (("prompt A", ids_a), ("prompt B", ids_b), ("the continuation", cont)):
            bad = [i for i in ids if not 0 <= i < vocab]
            if bad:
                raise UserError(f"{name} has token id {bad[0]}, outside this model's vocabulary "
                                f"of {vocab}")  # fmt: skip
    total = max(len(ids_a), len(ids_b)) + len(cont)
    if context is not None and total > context:
        raise UserError(
            f"prompt ({max(len(ids_a), len(ids_b))} tokens) + continuation ({len(cont)}) = "
            f"{total} tokens exceeds the model's context of {context}"
        )


def padded_pair(
    ids_a: Sequence[int], ids_b: Sequence[int], continuation: Sequence[int], device: Any = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(2, width + T) left-padded ids(A)+c and ids(B)+c, their attention mask, and position ids
    from 0 at each row's first real token. The pad id is irrelevant: padded keys are masked."""
    width = max(len(ids_a), len(ids_b))
    seq = torch.zeros(2, width + len(continuation), dtype=torch.long, device=device)
    mask = torch.zeros_like(seq)
    for row, ids in enumerate((ids_a, ids_b)):
        seq[row, width - len(ids) :] = torch.tensor(list(ids) + list(continuation), device=device)
        mask[row, width - len(ids) :] = 1
    return seq, mask, (mask.cumsum(-1) - 1).clamp_min(0)


def forward_spans(width: int, total: int, chunk: int | None) -> list[tuple[int, int]]:
    """(start, stop) sequence positions of each forward: the prompts go in with the first chunk
    (a forward from an empty cache with equal-length prompts needs no mask and takes SDPA's
    causal kernel, markedly faster on CPU than masked attention against a cache); chunk None
    is one whole-sequence forward."""
    step = chunk or total
    bounds = [0, *range(width + min(step, total), width + total, step), width + total]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


@torch.no_grad()
def pair_divergence(
    model: Any,
    ids_a: list[int],
    ids_b: list[int],
    continuation: list[int],
    layers: Sequence[int] | None = None,
    chunk: int | None = None,
    lam: float | None = None,
    bias_layers: Sequence[int] | None = None,
) -> PairDivergence:
    """Divergence curves of one pair over the shared continuation (T = len(continuation)).

    chunk: continuation tokens per forward after the first (which also takes the prompts);
    None runs the whole sequence in one forward without a KV cache.
    lam: run under the attention bias of `attention_bias.py` (None = plain model).
    """
    from transformers import DynamicCache

    context = getattr(model.config, "max_position_embeddings", None)
    vocab = model.get_input_embeddings().num_embeddings
    check_inputs(ids_a, ids_b, continuation, context, vocab)
    n_states = n_hidden_states(model)
    kept = resolve_layers(layers, n_states)
    device = input_device(model)  # under a device map: the first GPU's
    lens = (len(ids_a), len(ids_b))
    width = max(lens)
    total = len(continuation)

    seq, mask, positions = padded_pair(ids_a, ids_b, continuation, device)  # (2, width + T)
    cont = seq[0, width:]  # (T,)
    padded = lens[0] != lens[1]

    reducer = StateReducer(kept, width, total)
    shares = ShareRecorder(kept, lens[0], width, total)  # row A's attention on its prompt
    delta = torch.zeros(total, dtype=torch.float64)
    kl = torch.zeros(total, dtype=torch.float64)
    cache = DynamicCache(config=model.config) if chunk else None
    decoder, head = model.get_decoder(), output_head(model)
    bias = attention_bias(model, list(lens), lam, bias_layers) if lam is not None else nullcontext()
    with bias, share_recording(model, shares), reduction_hooks(model, reducer):
        for start, stop in forward_spans(width, total, chunk):
            reducer.start = start
            out = decoder(
                input_ids=seq[:, start:stop],
                attention_mask=mask[:, :stop] if padded else None,
                position_ids=positions[:, start:stop],
                past_key_values=cache,
                use_cache=cache is not None,
            )
            # sequence position p predicts c at index p + 1 - width (the last prompt token, c_1)
            first, last = max(start, width - 1), min(stop, width + total - 1)
            if last > first:
                hidden = out.last_hidden_state[:, first - start : last - start]
                targets = cont[first + 1 - width : last + 1 - width]
                window = slice(first + 1 - width, last + 1 - width)
                delta[window], kl[window] = head_gaps(head, hidden, targets)
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
        attention=shares.arrays() if shares.layers else {},
    )
